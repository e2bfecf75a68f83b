"""Errors of the local stack; each message is one sentence naming the problem and what to do."""

from offsetd.errors import OffsetdError

__all__ = ["DevStackError"]


class DevStackError(OffsetdError):
    """The local stack could not be fetched, started, or stopped."""

    exit_code = 3
