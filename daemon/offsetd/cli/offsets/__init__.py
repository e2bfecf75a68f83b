"""`offsetd offsets`: list, export, alter, import, reset, undo, history — one safe command each.

Every command chooses its offsets backend once (`choose.backend_of`: REST, offline, or the
Strimzi cluster's) and asks it what it can do; how results are printed is chosen with it
(`present`). Modules: `choose`, `present`, `listing` (list, export), `changes` (alter, import,
reset, undo), `history`.
"""

import click

from offsetd.cli.offsets.changes import alter, import_, reset, undo
from offsetd.cli.offsets.history import history
from offsetd.cli.offsets.listing import export, list_

__all__ = ["offsets"]


@click.group()
def offsets() -> None:
    """Connector offsets: list, export, alter, import, reset, undo, history."""


for command in (list_, export, alter, import_, reset, undo, history):
    offsets.add_command(command)
