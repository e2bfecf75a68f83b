"""The `offsetd` command line: one click group, one module per command family."""

import click

from offsetd import __version__
from offsetd.cli.config import config
from offsetd.cli.control import (
    approvals,
    approve,
    automation,
    breaker,
    opt_in,
    opt_out,
    pause,
    reject,
    resume_automation,
)
from offsetd.cli.dev import dev
from offsetd.cli.lag import lag
from offsetd.cli.offsets import offsets
from offsetd.cli.quarantine import quarantine
from offsetd.cli.rewind import rewind
from offsetd.cli.rules import rules
from offsetd.cli.run import history, run

__all__ = ["main"]


@click.group()
@click.version_option(__version__, prog_name="offsetd")
def main() -> None:
    """offsetd: offset automation for Kafka Connect and MirrorMaker 2."""


main.add_command(config)
main.add_command(dev)
main.add_command(lag)
main.add_command(offsets)
main.add_command(run)
main.add_command(history)
main.add_command(rules)
main.add_command(rewind)
main.add_command(approve)
main.add_command(reject)
main.add_command(approvals)
main.add_command(breaker)
main.add_command(pause)
main.add_command(resume_automation)
main.add_command(opt_out)
main.add_command(opt_in)
main.add_command(automation)
main.add_command(quarantine)
