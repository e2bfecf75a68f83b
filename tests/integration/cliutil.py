"""Run `offsetd` in-process the way a person runs it, and read what it printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner, Result

from offsetd.cli import main


def leaf_argv(config: Path, args: Sequence[str]) -> list[str]:
    """`<command path> --config <config> <rest>`: --config belongs to the leaf command, however
    many group names lead to it (`pause`, `offsets list`, `lag serve`)."""
    depth = 0
    command: click.Command = main
    while isinstance(command, click.Group) and depth < len(args):
        found = command.get_command(click.Context(command), args[depth])
        if found is None:
            break
        command, depth = found, depth + 1
    return [*args[:depth], "--config", str(config), *args[depth:]]


def offsetd(config: Path, *args: str, input: str | None = None) -> Result:
    """Run `offsetd <command path> --config <config> <rest>` in this process."""
    return CliRunner().invoke(main, leaf_argv(config, args), input=input)


def offsetd_json(config: Path, *args: str, input: str | None = None) -> Any:
    result = offsetd(config, *args, "--output", "json", input=input)
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)
