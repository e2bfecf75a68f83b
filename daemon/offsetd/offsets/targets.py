"""Targets people think in — a time, the earliest or latest record, a shift — as offsets.

Positions come from one batched ListOffsets per cluster and kind of position (earliest, latest,
by timestamp), never one request per partition. The arithmetic is pure and done here for the
user, MirrorSourceConnector's "last replicated" convention included.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]

from offsetd.adminclient import connected_admin
from offsetd.errors import InvalidDocument, TargetOutOfRange
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    PartitionMap,
    mirror_partition,
    next_offset_of,
    offset_for_next,
    sink_partition,
    topic_partition_of,
)

__all__ = [
    "Positions",
    "Target",
    "TargetKind",
    "TopicPartitionKey",
    "all_topics",
    "fetch_positions",
    "parse_timestamp",
    "partition_map_for",
    "resolve",
    "topic_partitions",
    "tp_of",
]

TopicPartitionKey = tuple[str, int]


class TargetKind(enum.StrEnum):
    TIMESTAMP = "timestamp"
    EARLIEST = "earliest"
    LATEST = "latest"
    SHIFT = "shift"


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    timestamp_ms: int | None = None
    shift: int = 0

    def describe(self) -> str:
        if self.kind is TargetKind.TIMESTAMP and self.timestamp_ms is not None:
            when = datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).isoformat()
            return f"the first record at or after {when}"
        if self.kind is TargetKind.SHIFT:
            return f"a shift by {self.shift:+d}"
        return f"the {self.kind} record"


@dataclass(frozen=True)
class Positions:
    """Log start, log end (LSO for read_committed) and, for a time target, the offset at it."""

    start: int
    end: int
    at_time: int | None = None


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds, or ISO 8601 (a time without a zone is refused, not guessed)."""
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidDocument(f"--to-timestamp {text!r} is neither epoch ms nor ISO 8601") from None
    if when.tzinfo is None:
        raise InvalidDocument(f"--to-timestamp {text!r} has no time zone: add Z or +hh:mm")
    return int(when.timestamp() * 1000)


def resolve(
    kind: ConnectorKind,
    target: Target,
    current: Iterable[OffsetEntry],
    partitions: Iterable[tuple[PartitionMap, TopicPartitionKey]],
    positions: Mapping[TopicPartitionKey, Positions],
) -> list[OffsetEntry]:
    """New offsets for `partitions` (partition map + Kafka topic-partition) from `positions`."""
    by_key = {e.key: e for e in current}
    result = []
    for partition, tp in partitions:
        pos = positions[tp]
        entry = by_key.get(OffsetEntry(partition, None).key)
        present = next_offset_of(kind, entry.offset) if entry is not None else None
        next_offset = _next(target, tp, pos, present)
        result.append(OffsetEntry(partition, offset_for_next(kind, next_offset)))
    return result


def _next(target: Target, tp: TopicPartitionKey, pos: Positions, present: int | None) -> int:
    if target.kind is TargetKind.EARLIEST:
        return pos.start
    if target.kind is TargetKind.LATEST:
        return pos.end
    if target.kind is TargetKind.TIMESTAMP:
        # No record at or after the time: the partition goes to its end.
        return pos.end if pos.at_time is None or pos.at_time < 0 else pos.at_time
    if present is None:
        raise TargetOutOfRange(f"{tp[0]}-{tp[1]} has no committed position to shift from")
    shifted = present + target.shift
    if shifted < pos.start or shifted > pos.end:
        raise TargetOutOfRange(
            f"shifting {tp[0]}-{tp[1]} by {target.shift:+d} gives {shifted}, outside its log "
            f"[{pos.start}, {pos.end}]"
        )
    return shifted


def partition_map_for(
    kind: ConnectorKind, tp: TopicPartitionKey, source_alias: str
) -> PartitionMap:
    if kind is ConnectorKind.SINK:
        return sink_partition(*tp)
    return mirror_partition(source_alias, *tp)


def tp_of(kind: ConnectorKind, partition: PartitionMap) -> TopicPartitionKey:
    return topic_partition_of(kind, partition)


# -- I/O: ListOffsets and metadata -------------------------------------------------------------


def fetch_positions(
    conf: Mapping[str, str], tps: Iterable[TopicPartitionKey], target: Target
) -> dict[TopicPartitionKey, Positions]:
    """One batched ListOffsets per kind of position, for every partition at once."""
    wanted = sorted(set(tps))
    if not wanted:
        return {}
    admin = connected_admin(conf)
    start = _list_offsets(admin, wanted, _OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    # read_committed: the end of a transactional topic is its last stable offset.
    end = _list_offsets(admin, wanted, _OffsetSpec.latest())  # type: ignore[no-untyped-call]
    at_time: dict[TopicPartitionKey, int] = {}
    if target.kind is TargetKind.TIMESTAMP and target.timestamp_ms is not None:
        at_time = _list_offsets(admin, wanted, _OffsetSpec.for_timestamp(target.timestamp_ms))
    return {tp: Positions(start[tp], end[tp], at_time.get(tp)) for tp in wanted}


def _list_offsets(
    admin: AdminClient, tps: list[TopicPartitionKey], spec: _OffsetSpec
) -> dict[TopicPartitionKey, int]:
    request = {TopicPartition(topic, partition): spec for topic, partition in tps}
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=30
    )
    out = {}
    for tp, future in futures.items():
        info = future.result()
        out[(tp.topic, tp.partition)] = int(info.offset)
    return out


def topic_partitions(conf: Mapping[str, str], topics: Iterable[str]) -> list[TopicPartitionKey]:
    """Every partition of the named topics (unknown topics are an error naming them)."""
    metadata = AdminClient(dict(conf)).list_topics(timeout=15)
    out: list[TopicPartitionKey] = []
    missing = []
    for topic in sorted(set(topics)):
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None:
            missing.append(topic)
            continue
        out.extend((topic, p) for p in sorted(meta.partitions))
    if missing:
        raise InvalidDocument(f"topics not found on the cluster: {', '.join(missing)}")
    return out


def all_topics(conf: Mapping[str, str]) -> list[str]:
    return sorted(AdminClient(dict(conf)).list_topics(timeout=15).topics)
