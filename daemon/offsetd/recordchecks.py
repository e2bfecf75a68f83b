"""Rule-supplied record checks: data that says what a poison record looks like, never code.

When neither the DLQ nor one-record batches can name the failing record, a rule may describe it
("the value is not JSON", "the value matches this pattern", ...). The record at the sink's
committed offset C is taken as the poison record only if it *fails* the check: a record that
passes cannot explain the failure, and skipping it would lose a good record. The catalogue is
deliberately small and total (no expressions, no plugins), so rules stay reviewable and a check
can never run arbitrary code inside the daemon.

Pure: no I/O. `KafkaRecord` is the whole record as read from Kafka, shared with the locator and
the quarantine copy. A base module: rules name checks (`skip-record.check`) and remediation runs
them, so the vocabulary lives below both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from offsetd.saferegex import check_regex, compile_regex

__all__ = [
    "MATCH_LIMIT_BYTES",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "KafkaRecord",
    "KeyMatches",
    "NotJson",
    "RecordCheck",
    "TooLarge",
    "ValueMatches",
    "describe",
    "fails",
]

# Regex checks read at most this much of a key or value: a pathological pattern on a huge value
# must not stall the daemon's event loop thread for long.
MATCH_LIMIT_BYTES = 1 << 20

# confluent-kafka's timestamp types (TIMESTAMP_NOT_AVAILABLE, _CREATE_TIME, _LOG_APPEND_TIME).
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


@dataclass(frozen=True)
class KafkaRecord:
    """One record as Kafka stores it: raw bytes, headers in order, timestamp and its type."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default_factory=tuple)
    timestamp_type: int = TIMESTAMP_NOT_AVAILABLE
    timestamp_ms: int = -1

    @property
    def coordinates(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"


def _compiles(pattern: str) -> str:
    return check_regex(pattern)  # RE2: linear in the record's size, whatever the pattern


Pattern = Annotated[str, Field(min_length=1), AfterValidator(_compiles)]


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NotJson(_Check):
    """Fails when the value is not JSON (what JsonConverter chokes on). A null value passes:
    JsonConverter turns it into a null (tombstone) record without error."""

    kind: Literal["not_json"]


class ValueMatches(_Check):
    """Fails when the value, read as UTF-8 (invalid bytes replaced), contains `pattern`
    (a regex search, RE2 syntax). A null value never matches."""

    kind: Literal["value_matches"]
    pattern: Pattern


class KeyMatches(_Check):
    """Fails when the key, read as UTF-8 (invalid bytes replaced), contains `pattern`. A null key
    never matches."""

    kind: Literal["key_matches"]
    pattern: Pattern


class TooLarge(_Check):
    """Fails when the value is longer than `max_bytes` (e.g. a sink's row or request limit)."""

    kind: Literal["too_large"]
    max_bytes: Annotated[int, Field(ge=0)]


RecordCheck = Annotated[NotJson | ValueMatches | KeyMatches | TooLarge, Field(discriminator="kind")]


def fails(check: NotJson | ValueMatches | KeyMatches | TooLarge, record: KafkaRecord) -> bool:
    """Whether `record` fails `check`, i.e. looks like the poison record the rule describes."""
    if isinstance(check, NotJson):
        return record.value is not None and not _is_json(record.value)
    if isinstance(check, ValueMatches):
        return _search(check.pattern, record.value)
    if isinstance(check, KeyMatches):
        return _search(check.pattern, record.key)
    return len(record.value or b"") > check.max_bytes


def describe(check: NotJson | ValueMatches | KeyMatches | TooLarge) -> str:
    """The check in words, for NotLocated details and audit records."""
    if isinstance(check, NotJson):
        return "the value is not JSON"
    if isinstance(check, ValueMatches):
        return f"the value matches /{check.pattern}/"
    if isinstance(check, KeyMatches):
        return f"the key matches /{check.pattern}/"
    return f"the value is larger than {check.max_bytes} bytes"


def _is_json(data: bytes) -> bool:
    # json.loads takes UTF-8/16/32 bytes; Jackson (JsonConverter) detects the same encodings.
    # NaN and Infinity are Python extensions that Jackson rejects by default: so do we.
    try:
        json.loads(data, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _search(pattern: str, data: bytes | None) -> bool:
    if data is None:
        return False
    text = data[:MATCH_LIMIT_BYTES].decode("utf-8", errors="replace")
    return compile_regex(pattern).search(text) is not None
