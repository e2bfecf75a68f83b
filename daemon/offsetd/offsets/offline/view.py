"""Offline mode, the pure read side: what an offsets topic holds, decoded (no I/O).

`offsetd.offsets.offline.read_offsets` consumes the topic and hands the records to `build_view`.
Facts it relies on (§2.1 of the Connect offsets reference):

- a record's key is `["<connector>", {partition map}]` and its value the offset map, both compact
  JSON from Connect's internal JsonConverter; a null value is a tombstone (partition removed);
- workers index offsets by the raw key bytes, so one logical partition stored under two byte
  forms (another key order, other whitespace) or in two topic partitions is two entries, and
  which one a task sees depends on bytes and consumption order: a *conflict*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from offsetd.errors import OffsetdError
from offsetd.offsets.model import (
    JsonScalar,
    OffsetEntry,
    OffsetMap,
    PartitionMap,
    partition_key,
)

__all__ = [
    "HistoryRecord",
    "KeyForm",
    "LogicalPartition",
    "Malformed",
    "OfflineError",
    "OffsetsView",
    "RawRecord",
    "build_view",
    "decode_key",
    "decode_value",
    "is_primitive",
]


class OfflineError(OffsetdError):
    """An offline read or write was refused or failed; the message says which and why."""


# -- what the topic holds -----------------------------------------------------------------------


@dataclass(frozen=True)
class RawRecord:
    """One record of the offsets topic, as consumed."""

    kafka_partition: int
    kafka_offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class KeyForm:
    """The latest record under one key byte string in one topic partition."""

    key: bytes
    kafka_partition: int
    kafka_offset: int
    timestamp_ms: int | None
    offset: OffsetMap | None  # None: the latest record is a tombstone

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key.decode("utf-8", "backslashreplace"),
            "topic_partition": self.kafka_partition,
            "kafka_offset": self.kafka_offset,
            "timestamp_ms": self.timestamp_ms,
            "offset": self.offset,
        }


def _form_order(form: KeyForm) -> tuple[int, int, int]:
    return (form.timestamp_ms or -1, form.kafka_partition, form.kafka_offset)


@dataclass(frozen=True)
class LogicalPartition:
    """One partition of one connector, with every key form it was seen under (oldest first)."""

    connector: str
    partition: PartitionMap  # as decoded from the newest form, in its key order
    forms: tuple[KeyForm, ...]

    @property
    def key(self) -> str:
        return partition_key(self.partition)

    @property
    def current(self) -> KeyForm:
        """The newest form (by record timestamp): the best guess of what a worker sees."""
        return self.forms[-1]

    @property
    def offset(self) -> OffsetMap | None:
        return self.current.offset

    @property
    def conflict(self) -> bool:
        """Two live forms, or one key stored in two topic partitions where one copy is live.

        A form whose latest record is a tombstone under bytes seen nowhere else is settled: the
        worker has dropped it. The same bytes in two topic partitions are never settled while
        any copy is live, since the winner then depends on the order partitions are read.
        """
        live = [f for f in self.forms if f.offset is not None]
        if len(live) >= 2:
            return True
        return bool(live) and any(
            f.key == live[0].key and f.kafka_partition != live[0].kafka_partition
            for f in self.forms
        )

    def describe(self) -> str:
        """The forms, one per line, for error messages and reports."""
        return "\n".join(
            f"  key {f.key.decode('utf-8', 'backslashreplace')} in topic partition "
            f"{f.kafka_partition} at offset {f.kafka_offset}: "
            + ("tombstone" if f.offset is None else json.dumps(f.offset))
            for f in self.forms
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "partition": self.partition,
            "offset": self.offset,
            "conflict": self.conflict,
            "forms": [f.as_json() for f in self.forms],
        }


@dataclass(frozen=True)
class Malformed:
    """A record Connect would skip or fail on; never raised, always reported."""

    topic: str
    kafka_partition: int
    kafka_offset: int
    reason: str
    key: bytes | None
    value: bytes | None

    def as_json(self) -> dict[str, Any]:
        def text(raw: bytes | None) -> str | None:
            return None if raw is None else raw[:300].decode("utf-8", "backslashreplace")

        return {
            "topic": self.topic,
            "topic_partition": self.kafka_partition,
            "kafka_offset": self.kafka_offset,
            "reason": self.reason,
            "key": text(self.key),
            "value": text(self.value),
        }


@dataclass(frozen=True)
class HistoryRecord:
    """One record of the log (`history=True`), in log order."""

    kafka_partition: int
    kafka_offset: int
    timestamp_ms: int | None
    connector: str
    partition: PartitionMap
    offset: OffsetMap | None  # None: tombstone

    def as_json(self) -> dict[str, Any]:
        return {
            "topic_partition": self.kafka_partition,
            "kafka_offset": self.kafka_offset,
            "timestamp_ms": self.timestamp_ms,
            "connector": self.connector,
            "partition": self.partition,
            "offset": self.offset,
        }


@dataclass(frozen=True)
class OffsetsView:
    """Everything read from an offsets topic up to the end offsets taken when reading began."""

    topic: str
    partition_count: int
    end_offsets: Mapping[int, int]
    records_read: int
    connectors: Mapping[str, Mapping[str, LogicalPartition]]  # connector -> partition_key -> LP
    malformed: tuple[Malformed, ...] = ()
    history: tuple[HistoryRecord, ...] | None = None

    def lookup(
        self, connector: str, partition: Mapping[str, JsonScalar]
    ) -> LogicalPartition | None:
        return self.connectors.get(connector, {}).get(partition_key(partition))

    def entries(self, connector: str) -> list[OffsetEntry]:
        """The live offsets, shaped like `GET /connectors/{c}/offsets` (no tombstoned ones)."""
        found = self.connectors.get(connector, {})
        return [
            OffsetEntry(dict(lp.partition), dict(lp.offset))
            for _key, lp in sorted(found.items())
            if lp.offset is not None
        ]

    def conflicts(self, connector: str | None = None) -> list[LogicalPartition]:
        names = [connector] if connector is not None else sorted(self.connectors)
        return [
            lp
            for name in names
            for _key, lp in sorted(self.connectors.get(name, {}).items())
            if lp.conflict
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition_count": self.partition_count,
            "end_offsets": {str(p): o for p, o in sorted(self.end_offsets.items())},
            "records_read": self.records_read,
            "connectors": {
                name: [lp.as_json() for _k, lp in sorted(parts.items())]
                for name, parts in sorted(self.connectors.items())
            },
            "conflicts": len(self.conflicts()),
            "malformed": [m.as_json() for m in self.malformed],
            **(
                {"history": [h.as_json() for h in self.history]} if self.history is not None else {}
            ),
        }


# -- decoding -----------------------------------------------------------------------------------


_json = json.JSONDecoder().decode  # `json.loads` minus its per-call overhead (UTF-8 only)


class _Bad(Exception):
    """A record that is not in Connect's offsets format (the reason is the message)."""


def is_primitive(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _flat(parsed: dict[str, Any]) -> bool:
    """No nested object or array among the values (JSON gives nothing else but primitives)."""
    return not any(isinstance(value, dict | list) for value in parsed.values())


def decode_key(raw: bytes | None) -> tuple[str, PartitionMap]:
    """`["<connector>", {partition}]` -> (connector, partition), or `_Bad` with the reason."""
    if raw is None:
        raise _Bad("the record has no key")
    try:
        key = _json(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        raise _Bad("the key is not JSON") from None
    if not (isinstance(key, list) and len(key) == 2):
        raise _Bad("the key is not a JSON array of two elements")
    connector, partition = key
    if not isinstance(connector, str) or not isinstance(partition, dict):
        raise _Bad("the key is not [connector name, partition object]")
    if not _flat(partition):
        raise _Bad("the partition object holds a nested value, not only primitives")
    return connector, partition


def decode_value(raw: bytes | None) -> OffsetMap | None:
    """An offset map, None for a tombstone, or `_Bad` with the reason."""
    if raw is None:
        return None
    try:
        value = _json(raw.decode("utf-8"))
    except ValueError:
        raise _Bad("the value is not JSON") from None
    if not isinstance(value, dict):
        raise _Bad("the value is not a JSON object or null")
    if not _flat(value):
        raise _Bad("the offset object holds a nested value, not only primitives")
    return value


def build_view(
    topic: str,
    partition_count: int,
    end_offsets: Mapping[int, int],
    records: Iterable[RawRecord],
    *,
    connectors: set[str] | None = None,
    history: bool = False,
    records_read: int | None = None,
) -> OffsetsView:
    """Fold records (each topic partition in offset order) into a view.

    Without `history`, only the latest record per (key bytes, topic partition) is decoded, as a
    worker would: a malformed record that a later record with the same key replaced is never
    read by Connect and is not reported. With `history`, every record is decoded, kept in log
    order (by topic partition, then offset) and every malformed one reported.
    """
    fold = _Fold(topic, connectors)
    latest: dict[tuple[int, bytes | None], RawRecord] = {}
    log: list[HistoryRecord] = []
    count = 0
    for rec in records:
        count += 1
        latest[(rec.kafka_partition, rec.key)] = rec
        if history:
            entry = fold.history_record(rec)
            if entry is not None:
                log.append(entry)

    found: dict[tuple[str, str], list[tuple[KeyForm, PartitionMap]]] = {}
    for rec in latest.values():
        # with history, a malformed record was reported when it was read
        decoded = fold.latest_form(rec, report=not history)
        if decoded is not None:
            connector, partition, form = decoded
            found.setdefault((connector, partition_key(partition)), []).append((form, partition))

    by_connector: dict[str, dict[str, LogicalPartition]] = {}
    for (connector, pkey), seen in found.items():
        seen.sort(key=lambda pair: _form_order(pair[0]))
        by_connector.setdefault(connector, {})[pkey] = LogicalPartition(
            connector, seen[-1][1], tuple(form for form, _ in seen)
        )
    malformed = sorted(fold.malformed, key=lambda m: (m.kafka_partition, m.kafka_offset))
    log.sort(key=lambda h: (h.kafka_partition, h.kafka_offset))
    return OffsetsView(
        topic=topic,
        partition_count=partition_count,
        end_offsets=dict(end_offsets),
        records_read=count if records_read is None else records_read,
        connectors=by_connector,
        malformed=tuple(malformed),
        history=tuple(log) if history else None,
    )


class _Fold:
    """Decoding records for `build_view`: keys decoded once each, malformed ones collected."""

    def __init__(self, topic: str, connectors: set[str] | None) -> None:
        self.topic = topic
        self.connectors = connectors
        self.malformed: list[Malformed] = []
        self._keys: dict[bytes | None, tuple[str, PartitionMap] | str] = {}

    def key_of(self, raw: bytes | None) -> tuple[str, PartitionMap] | str:
        if raw not in self._keys:
            try:
                self._keys[raw] = decode_key(raw)
            except _Bad as bad:
                self._keys[raw] = str(bad)
        return self._keys[raw]

    def bad(self, rec: RawRecord, reason: str) -> None:
        self.malformed.append(
            Malformed(self.topic, rec.kafka_partition, rec.kafka_offset, reason, rec.key, rec.value)
        )

    def history_record(self, rec: RawRecord) -> HistoryRecord | None:
        """The record for the history (None: malformed, reported, or another connector's)."""
        decoded = self.key_of(rec.key)
        if isinstance(decoded, str):
            self.bad(rec, decoded)
            return None
        try:
            offset = decode_value(rec.value)
        except _Bad as exc:
            self.bad(rec, str(exc))
            return None
        if self.connectors is not None and decoded[0] not in self.connectors:
            return None
        return HistoryRecord(
            rec.kafka_partition, rec.kafka_offset, rec.timestamp_ms, decoded[0], decoded[1], offset
        )

    def latest_form(
        self, rec: RawRecord, *, report: bool
    ) -> tuple[str, PartitionMap, KeyForm] | None:
        """The key form a latest record stands for (None: malformed, or another connector's)."""
        decoded = self.key_of(rec.key)
        if isinstance(decoded, str):
            if report:
                self.bad(rec, decoded)
            return None
        connector, partition = decoded
        if self.connectors is not None and connector not in self.connectors:
            return None
        try:
            offset = decode_value(rec.value)
        except _Bad as exc:
            if report:
                self.bad(rec, str(exc))
            return None
        assert rec.key is not None  # a key that decoded is not None
        form = KeyForm(rec.key, rec.kafka_partition, rec.kafka_offset, rec.timestamp_ms, offset)
        return connector, partition, form
