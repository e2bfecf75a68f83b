"""The quarantine copy's format: Connect's `__connect.errors.*` headers plus offsetd's own.

A copy carries the record byte for byte, then its coordinates and the error context as headers,
each bounded in size, with Connect's own names so a DLQ consumer or replay tool understands
them, and `offsetd.*` headers that tie it to its saga and decision. Pure: writing and reading
copies (`offsetd.remediation.quarantine`) and skip-run plans (`offsetd.remediation.skiprun`)
share these names and this decoding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from offsetd.events.models import RecordRef
from offsetd.recordchecks import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaRecord,
)

__all__ = [
    "ERRORS",
    "H_CONNECTOR",
    "H_CONNECT_CLUSTER",
    "H_DECISION",
    "H_EXCEPTION",
    "H_MESSAGE",
    "H_OFFSET",
    "H_ORIGINAL_HEADERS",
    "H_PARTITION",
    "H_QUARANTINED_AT",
    "H_SAGA_KEY",
    "H_STACKTRACE",
    "H_STAGE",
    "H_TASK",
    "H_TIMESTAMP_TYPE",
    "H_TOPIC",
    "TIMESTAMP_NAMES",
    "QuarantineRef",
    "QuarantinedRecord",
    "context_headers",
    "decode_copy",
    "partition_for",
]

ERRORS = "__connect.errors."
H_TOPIC, H_PARTITION, H_OFFSET = ERRORS + "topic", ERRORS + "partition", ERRORS + "offset"
H_CONNECTOR, H_TASK, H_STAGE = ERRORS + "connector.name", ERRORS + "task.id", ERRORS + "stage"
H_EXCEPTION, H_MESSAGE = ERRORS + "exception.class.name", ERRORS + "exception.message"
H_STACKTRACE = ERRORS + "exception.stacktrace"
H_SAGA_KEY = "offsetd.saga.key"
H_DECISION = "offsetd.decision.id"
H_CONNECT_CLUSTER = "offsetd.connect.cluster"
H_QUARANTINED_AT = "offsetd.quarantined.at"  # epoch milliseconds, decimal text (as Connect's)
H_TIMESTAMP_TYPE = "offsetd.original.timestamp.type"  # CreateTime | LogAppendTime | none
H_ORIGINAL_HEADERS = "offsetd.original.headers"  # how many leading headers are the record's own

# Context names the caller may give bare ("stage") or in full ("__connect.errors.stage").
_ERROR_NAMES = frozenset(
    {
        "connector.name",
        "task.id",
        "stage",
        "class.name",
        "exception.class.name",
        "exception.message",
        "exception.stacktrace",
    }
)
# The record's coordinates always come from the record itself, never from the context.
_COORDINATES = frozenset({H_TOPIC, H_PARTITION, H_OFFSET})
_LIMITS = {H_STACKTRACE: 16_384, H_MESSAGE: 4_096}  # bytes; the rest at most 1 KiB each
_DEFAULT_LIMIT = 1_024
TIMESTAMP_NAMES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True)
class QuarantineRef:
    """Where a copy landed in the quarantine topic."""

    topic: str
    partition: int
    offset: int

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


@dataclass(frozen=True)
class QuarantinedRecord:
    """A record as stored in quarantine, with the context its headers carry."""

    ref: QuarantineRef
    stored: KafkaRecord  # the copy, headers ours included
    original: RecordRef | None
    original_headers: tuple[tuple[str, bytes | None], ...]
    headers: dict[str, str]  # the last value of each __connect.errors.* / offsetd.* header

    @property
    def saga_key(self) -> str | None:
        return self.headers.get(H_SAGA_KEY)

    @property
    def connector(self) -> str | None:
        return self.headers.get(H_CONNECTOR)

    @property
    def quarantined_at_ms(self) -> int | None:
        value = self.headers.get(H_QUARANTINED_AT, "")
        return int(value) if value.isdigit() else None


def partition_for(saga_key: str, partitions: int) -> int:
    """The quarantine partition of a saga: stable across processes and Python versions."""
    digest = hashlib.sha256(saga_key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % partitions


def context_headers(record: KafkaRecord, context: Mapping[str, str]) -> list[tuple[str, bytes]]:
    """The record's coordinates and the error context as headers, each value bounded in size.

    Context keys may be Connect's bare names (`stage`, `exception.message`, ...), full header
    names (`__connect.errors.stage`, `offsetd.decision.id`), or the saga's bare `saga.key`,
    `decision.id`, `connect.cluster`, which become `offsetd.*`. Coordinates always come from the
    record itself.
    """
    headers: list[tuple[str, bytes]] = [
        (H_TOPIC, record.topic.encode()),
        (H_PARTITION, str(record.partition).encode()),
        (H_OFFSET, str(record.offset).encode()),
    ]
    for key, value in context.items():
        name = _header_name(key)
        if name in _COORDINATES or name == H_SAGA_KEY or value is None:
            continue  # the saga key header is written from the copy's own argument
        limit = _LIMITS.get(name, _DEFAULT_LIMIT)
        headers.append((name, _bounded(str(value), limit)))
    return headers


def _header_name(key: str) -> str:
    if key.startswith((ERRORS, "offsetd.")):
        return key
    if key in _ERROR_NAMES or key in ("topic", "partition", "offset"):
        return ERRORS + key
    return "offsetd." + key


def _bounded(text: str, limit: int) -> bytes:
    data = text.encode()
    if len(data) <= limit:
        return data
    # Cut on a character boundary and say so: a stack trace's head is what explains it.
    return data[: limit - 16].decode("utf-8", errors="ignore").encode() + b"...[truncated]"


def decode_copy(stored: KafkaRecord) -> QuarantinedRecord:
    """A stored copy with the context its headers carry, and the original record's place."""
    text: dict[str, str] = {}
    for key, value in stored.headers:
        if key.startswith((ERRORS, "offsetd.")) and value is not None:
            text[key] = value.decode("utf-8", errors="replace")
    count = text.get(H_ORIGINAL_HEADERS, "")
    originals = stored.headers[: int(count)] if count.isdigit() else ()
    original: RecordRef | None = None
    # The last coordinates are ours (an original header of the same name comes first).
    topic, partition, offset = text.get(H_TOPIC), text.get(H_PARTITION), text.get(H_OFFSET)
    if topic and partition and offset and partition.isdigit() and offset.isdigit():
        original = RecordRef(topic=topic, partition=int(partition), offset=int(offset))
    return QuarantinedRecord(
        ref=QuarantineRef(stored.topic, stored.partition, stored.offset),
        stored=stored,
        original=original,
        original_headers=originals,
        headers=text,
    )
