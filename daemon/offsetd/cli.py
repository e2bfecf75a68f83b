"""The `offsetd` command line."""

import click


@click.group()
def main() -> None:
    """offsetd: offset automation for Kafka Connect and MirrorMaker 2."""
