"""How a command fails: one line on stderr and the error's exit code, never a traceback.

Its own module, free of the clients and config that `offsetd.cli.common` brings, so a command
that needs nothing else (`offsetd lag`) does not import them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from offsetd.errors import OffsetdError

__all__ = ["reports_errors"]

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(func: F) -> F:
    """Turn an OffsetdError into one line on stderr and its exit code; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OffsetdError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]
