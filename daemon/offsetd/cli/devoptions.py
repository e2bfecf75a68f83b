"""What the `offsetd dev` command groups share: the run folder option, progress lines, failure.

Its own module so `offsetd dev spark-cluster` (added to `dev`) and `dev` itself use one
definition without importing each other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from offsetd.errors import OffsetdError

__all__ = ["default_run_dir", "fail", "run_dir_option", "say"]


def default_run_dir() -> Path:
    return Path(os.environ.get("OFFSETD_DEV_DIR", ".offsetd/dev"))


run_dir_option = click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=default_run_dir,
    show_default="$OFFSETD_DEV_DIR or .offsetd/dev",
    help="Folder for the stack's config, data, logs and PIDs.",
)


def fail(exc: OffsetdError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


def say(message: str) -> None:
    click.echo(f"[dev] {message}", err=True)
