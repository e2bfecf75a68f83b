"""The `offsetd` command line: one click group, one module per command family."""

import click

from offsetd import __version__
from offsetd.cli.config import config
from offsetd.cli.dev import dev
from offsetd.cli.offsets import offsets
from offsetd.cli.rules import rules
from offsetd.cli.run import history, run


@click.group()
@click.version_option(__version__, prog_name="offsetd")
def main() -> None:
    """offsetd: offset automation for Kafka Connect and MirrorMaker 2."""


main.add_command(config)
main.add_command(dev)
main.add_command(offsets)
main.add_command(run)
main.add_command(history)
main.add_command(rules)
