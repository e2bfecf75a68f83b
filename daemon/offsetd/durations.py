"""Durations as people write them (`30s`, `10m`, `1h30m`, `500ms`), kept as milliseconds.

A base module: the configuration and the rules both take durations, so the vocabulary lives
below both of them and neither has to import the other for it.
"""

from __future__ import annotations

import re
from typing import Annotated, TypeAlias

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

__all__ = ["DURATION_PATTERN", "Duration", "format_duration", "parse_duration"]

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION_RE = re.compile(r"(?:\d+(?:ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
DURATION_PATTERN = r"^(?:[0-9]+(?:ms|s|m|h|d))+$"


def parse_duration(value: object) -> int:
    """`1h30m` -> 5400000 (milliseconds). Units: ms, s, m, h, d; integers only."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError("must be a duration string such as 30s, 10m, 1h30m (units ms, s, m, h, d)")
    text = value.strip()
    if not _DURATION_RE.fullmatch(text):
        raise ValueError(
            f"invalid duration {value!r}: use a number and a unit, e.g. 30s, 10m, 1h30m "
            "(units ms, s, m, h, d)"
        )
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION_PART.findall(text))


def format_duration(ms: int) -> str:
    """5400000 -> `1h30m`; the inverse of `parse_duration` (negative values get a `-`)."""
    if ms == 0:
        return "0s"
    sign, rest, out = ("-" if ms < 0 else ""), abs(ms), ""
    for unit in ("d", "h", "m", "s", "ms"):
        size = _UNIT_MS[unit]
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return sign + out


# Kept as milliseconds, written (and dumped) as text, so a rule round-trips through JSON.
Duration: TypeAlias = Annotated[
    int,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {"type": "string", "pattern": DURATION_PATTERN, "examples": ["30s", "10m", "1h30m"]}
    ),
]
