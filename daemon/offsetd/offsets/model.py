"""Offsets as Connect exposes them, and the pure arithmetic around them (no I/O).

A connector's offsets are a list of (partition map, offset map) pairs, exactly the shape of
`GET /connectors/{c}/offsets`. What the maps hold depends on the connector type:

- sink: `{"kafka_topic", "kafka_partition"} -> {"kafka_offset"}`, the *next* record to read;
- MirrorSourceConnector: `{"cluster", "topic", "partition"} -> {"offset"}`, the *last replicated*
  source record (the task seeks to offset + 1);
- MirrorCheckpointConnector / MirrorHeartbeatConnector: offset always `{"offset": 0}`;
- other sources: whatever the connector writes (primitive values only).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from offsetd.connect.offsets import (
    JsonScalar,
    OffsetEntry,
    OffsetMap,
    PartitionMap,
    entries_from_json,
    partition_key,
)

__all__ = [
    "MIRROR_CHECKPOINT_CLASS",
    "MIRROR_HEARTBEAT_CLASS",
    "MIRROR_SOURCE_CLASS",
    "Change",
    "ConnectorKind",
    "DiffLine",
    "JsonScalar",
    "OffsetEntry",
    "OffsetMap",
    "PartitionMap",
    "apply_patch",
    "as_map",
    "connector_kind",
    "diff",
    "entries_from_json",
    "mirror_partition",
    "next_offset_of",
    "offset_for_next",
    "partition_key",
    "same_offsets",
    "sink_partition",
    "topic_partition_of",
]

MIRROR_SOURCE_CLASS = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
MIRROR_CHECKPOINT_CLASS = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
MIRROR_HEARTBEAT_CLASS = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"


class ConnectorKind(enum.StrEnum):
    SINK = "sink"
    MIRROR_SOURCE = "mirror-source"
    MIRROR_CHECKPOINT = "mirror-checkpoint"
    MIRROR_HEARTBEAT = "mirror-heartbeat"
    SOURCE = "source"

    @property
    def is_mirror(self) -> bool:
        return self in (
            ConnectorKind.MIRROR_SOURCE,
            ConnectorKind.MIRROR_CHECKPOINT,
            ConnectorKind.MIRROR_HEARTBEAT,
        )


_MIRROR_KINDS = {
    MIRROR_SOURCE_CLASS: ConnectorKind.MIRROR_SOURCE,
    MIRROR_CHECKPOINT_CLASS: ConnectorKind.MIRROR_CHECKPOINT,
    MIRROR_HEARTBEAT_CLASS: ConnectorKind.MIRROR_HEARTBEAT,
}


def connector_kind(connector_class: str, connector_type: str) -> ConnectorKind:
    """Kind from the class (MM2 connectors are matched by class, also by simple name)."""
    for full, kind in _MIRROR_KINDS.items():
        if connector_class in (full, full.rsplit(".", 1)[1]):
            return kind
    if connector_type == "sink":
        return ConnectorKind.SINK
    return ConnectorKind.SOURCE


def as_map(entries: Iterable[OffsetEntry]) -> dict[str, OffsetEntry]:
    return {entry.key: entry for entry in entries}


def same_offsets(a: Iterable[OffsetEntry], b: Iterable[OffsetEntry]) -> bool:
    """Two images hold the same partitions at the same offsets (order does not matter)."""
    return {e.key: e.offset for e in a} == {e.key: e.offset for e in b}


def apply_patch(current: Iterable[OffsetEntry], patch: Iterable[OffsetEntry]) -> list[OffsetEntry]:
    """What PATCH does: listed partitions are overwritten (null removes), others stay."""
    result = as_map(current)
    for entry in patch:
        if entry.offset is None:
            result.pop(entry.key, None)
        else:
            result[entry.key] = entry
    return sorted(result.values(), key=lambda e: e.key)


class Change(enum.StrEnum):
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class DiffLine:
    partition: PartitionMap
    before: OffsetMap | None
    after: OffsetMap | None
    change: Change

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "before": self.before,
            "after": self.after,
            "change": str(self.change),
        }


def diff(before: Iterable[OffsetEntry], after: Iterable[OffsetEntry]) -> list[DiffLine]:
    """Per-partition diff of two images, in a stable order."""
    old, new = as_map(before), as_map(after)
    lines = []
    for key in sorted(old.keys() | new.keys()):
        b, a = old.get(key), new.get(key)
        partition = (a or b).partition  # type: ignore[union-attr]
        b_off, a_off = (b.offset if b else None), (a.offset if a else None)
        if b is None:
            change = Change.ADDED
        elif a is None:
            change = Change.REMOVED
        elif b_off == a_off:
            change = Change.UNCHANGED
        else:
            change = Change.CHANGED
        lines.append(DiffLine(partition, b_off, a_off, change))
    return lines


# -- next-offset arithmetic ---------------------------------------------------------------------


def sink_partition(topic: str, partition: int) -> PartitionMap:
    return {"kafka_topic": topic, "kafka_partition": partition}


def mirror_partition(cluster: str, topic: str, partition: int) -> PartitionMap:
    return {"cluster": cluster, "partition": partition, "topic": topic}


def offset_for_next(kind: ConnectorKind, next_offset: int) -> OffsetMap | None:
    """The stored offset that makes a connector read `next_offset` next.

    Sink offsets *are* the next offset. MirrorSourceConnector stores the last replicated offset
    and seeks to +1, so N becomes N-1; for N = 0 there is nothing before it, and a null offset
    (no stored offset) makes MM2 start from the log start (its auto.offset.reset is earliest).
    """
    if next_offset < 0:
        raise ValueError(f"a next offset cannot be negative ({next_offset})")
    if kind is ConnectorKind.SINK:
        return {"kafka_offset": next_offset}
    if kind is ConnectorKind.MIRROR_SOURCE:
        return None if next_offset == 0 else {"offset": next_offset - 1}
    raise ValueError(f"{kind} connectors have no Kafka position to move")


def next_offset_of(kind: ConnectorKind, offset: OffsetMap | None) -> int | None:
    """The next source record the connector will read, or None if it has no position."""
    if offset is None:
        return None
    if kind is ConnectorKind.SINK:
        return int(offset["kafka_offset"])  # type: ignore[arg-type]
    if kind is ConnectorKind.MIRROR_SOURCE:
        return int(offset["offset"]) + 1  # type: ignore[arg-type]
    raise ValueError(f"{kind} connectors have no Kafka position")


def topic_partition_of(kind: ConnectorKind, partition: Mapping[str, JsonScalar]) -> tuple[str, int]:
    """The Kafka (topic, partition) a sink or MirrorSource partition map refers to."""
    if kind is ConnectorKind.SINK:
        return str(partition["kafka_topic"]), int(partition["kafka_partition"])  # type: ignore[arg-type]
    if kind is ConnectorKind.MIRROR_SOURCE:
        return str(partition["topic"]), int(partition["partition"])  # type: ignore[arg-type]
    raise ValueError(f"{kind} partitions are not Kafka partitions")
