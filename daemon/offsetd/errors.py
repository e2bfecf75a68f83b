"""Exceptions that offsetd raises on purpose.

Every error meant for an operator derives from `OffsetdError`, so the CLI can catch one
type, print its message (never a traceback) and exit with its `exit_code`::

    OffsetdError            exit 1   base: anything offsetd reports to the operator
    └── ConfigError         exit 2   the configuration file or environment is invalid

Messages must be safe to print and log: they never carry secret values.
"""


class OffsetdError(Exception):
    """Base class for errors reported to the operator as a message and an exit code."""

    exit_code: int = 1


class ConfigError(OffsetdError):
    """The configuration (file or environment) cannot be read or is invalid.

    Exit code 2 matches click's usage errors: the command was given bad input.
    """

    exit_code = 2
