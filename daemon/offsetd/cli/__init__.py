"""The `offsetd` command line: one click group, one module per command family.

Command modules are imported only when their command runs: `offsetd lag` during an incident
should not pay for importing the dev stack, Kubernetes and Spark clients it never uses (importing
every command family took about a second before any work began).

Two more start-up and exit costs are cut here, for every command (measured on the local stack,
where `offsetd lag` promises an answer in under a second):
- pydantic looks for plugins in the entry points of every installed distribution the first
  time a model is built (about 50 ms). offsetd uses none, so the scan is off unless the user's
  environment says otherwise (`PYDANTIC_DISABLE_PLUGINS`, pydantic's documented switch).
- At exit the interpreter's last garbage collections walked every object the imports made
  (pydantic's schemas above all): about 90 ms after the command had finished. The heap is
  frozen at exit instead; Python promises no finalizer at exit anyway, and the commands close
  their clients themselves.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os

import click

from offsetd import __version__

__all__ = ["main"]

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
atexit.register(gc.freeze)  # registered first, so it runs after every other exit handler

#: command name -> "module:attribute" of its click command, in `--help` order.
_COMMANDS = {
    "config": "offsetd.cli.config:config",
    "dev": "offsetd.cli.dev:dev",
    "lag": "offsetd.cli.lag:lag",
    "mm2": "offsetd.cli.mm2:mm2",
    "offsets": "offsetd.cli.offsets:offsets",
    "run": "offsetd.cli.run:run",
    "history": "offsetd.cli.history:history",
    "rules": "offsetd.cli.rules:rules",
    "rewind": "offsetd.cli.rewind:rewind",
    "approve": "offsetd.cli.control:approve",
    "reject": "offsetd.cli.control:reject",
    "approvals": "offsetd.cli.control:approvals",
    "breaker": "offsetd.cli.control:breaker",
    "pause": "offsetd.cli.control:pause",
    "resume-automation": "offsetd.cli.control:resume_automation",
    "opt-out": "offsetd.cli.control:opt_out",
    "opt-in": "offsetd.cli.control:opt_in",
    "automation": "offsetd.cli.control:automation",
    "quarantine": "offsetd.cli.quarantine:quarantine",
}


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="offsetd")
def main() -> None:
    """offsetd: offset automation for Kafka Connect and MirrorMaker 2."""
