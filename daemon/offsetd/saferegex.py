"""Regexes written in rules and record checks, matched in time linear in the text (RE2).

Rules are data: whoever may edit a rule must not be able to stall the daemon with it. Python's
`re` backtracks, so a pattern such as `(a+)+$` takes time exponential in the text: 0.55 s
against 22 `a`s and a `!` here, and it never ends on a 4 KiB trace head. The daemon matches
messages on its event loop, so one such rule would stop every decision. RE2 (google-re2)
guarantees linear time for every pattern it accepts and refuses, when the rule is loaded, what
would need backtracking (backreferences, lookaround) or too much memory; the loader names the
file, line and field. Globs are not compiled here: `fnmatch` builds them from safe parts.

Differences from `re` worth knowing: `\\d`, `\\w`, `\\s` and `\\b` are ASCII-only; the inline flags
are `i`, `m`, `s` and `U` (no `x`, `a`, `L`, `u`).
"""

from __future__ import annotations

import functools
from typing import Any

import re2  # type: ignore[import-untyped]  # no type information shipped

__all__ = ["RegexRefused", "check_regex", "compile_regex"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the refusal is ours to report, not absl's on stderr

_HINTS = {
    "invalid perl operator": "lookaround and named backreferences are not supported",
    "invalid escape sequence": "backreferences (\\1) and \\Z are not supported; \\z ends a text",
    "pattern too large": "the pattern needs more than RE2's memory limit",
}


class RegexRefused(ValueError):
    """A pattern RE2 cannot run (the message says why, in a rule author's terms)."""


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """The compiled pattern (`.search(text)`, `.fullmatch(text)`: a match or None)."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise RegexRefused(_reason(exc)) from None


def check_regex(pattern: str) -> str:
    """`pattern`, if it compiles; else `RegexRefused` (a ValueError: pydantic reports it)."""
    compile_regex(pattern)
    return pattern


def _reason(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    hint = next((h for key, h in _HINTS.items() if text.startswith(key)), None)
    reason = f"invalid regex: {text}"
    if hint is not None:
        reason += f" ({hint}: regexes run on RE2, in linear time)"
    return reason
