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
    """Turn an OffsetdError into one line on stderr and its exit code; never a traceback.

    The exit happens after the `except` block, with the error gone: raised inside it, the exit
    would carry the error (its `__context__`), and the error's traceback the frames and their
    locals to the very end of the interpreter. A librdkafka client among them (the login check's
    AdminClient, whose error callback is Python) was then destroyed during the interpreter's
    finalization while its threads still ran: a segfault (exit -11) after the right message,
    seen once in CI on a refused login."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OffsetdError as exc:
            click.echo(f"error: {exc}", err=True)
            code = exc.exit_code
        sys.exit(code)  # outside the except block: the error and its frames are freed first

    return wrapper  # type: ignore[return-value]
