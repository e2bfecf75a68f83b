"""The Kafka reads of sink progress (confluent-kafka): where each sink's group stands.

Per Connect cluster and cycle, on the Kafka cluster that holds its internal topics (where its
sinks consume, unless a connector overrides `consumer.override.bootstrap.servers`, which is
not followed):

1. one Metadata request (all topics), for the partitions of the topics the sinks name;
2. one OffsetFetch per sink group (no KIP-709 batching: one request per group, up to 64 at
   once), through aiokafka (`offsetd.lag.groups`: librdkafka's coordinator requests can take
   the process down across a broker restart);
3. one ListOffsets for every partition (latest, read_committed), plus earliest for partitions
   whose group committed nothing;
4. the timestamp of the record at the committed offset, only for partitions with records
   waiting whose committed offset moved (cached while it does not: a stalled sink costs
   nothing here).

A sink's group is `connect-<name>` unless its config sets `consumer.override.group.id`. Which
task holds which partition is not read (the group's members: see `offsetd.lag.groups`); a sink
of one task is judged per task, one of several as a whole, unless a holder is known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offsetd.lag.groups import GroupReader
from offsetd.lag.kafka_io import OffsetSpec, TimestampFetcher, list_offsets
from offsetd.lag.snapshot import ConnectorHealth, SinkPartition

__all__ = ["SinkRead", "SinkReader", "sink_group"]

TP = tuple[str, int]


def sink_group(name: str, config: Mapping[str, str]) -> str:
    return config.get("consumer.override.group.id") or f"connect-{name}"


@dataclass
class SinkRead:
    """One Connect cluster's sinks, read this cycle."""

    partitions: dict[tuple[str, str], list[SinkPartition]]


class SinkReader:
    """Reads sink progress for one Kafka cluster; keeps the timestamp cache between cycles."""

    def __init__(
        self,
        conf: Mapping[str, str],
        admin: Any,
        fetcher: Callable[[], TimestampFetcher],
        groups: GroupReader,
    ):
        self.conf = dict(conf)
        self.admin = admin
        self.groups = groups
        self._fetcher = fetcher
        # (topic, partition) -> (committed offset, the timestamp of the first record there)
        self._oldest: dict[TP, tuple[int, int | None]] = {}

    def read(
        self,
        connect_cluster: str,
        sinks: Sequence[tuple[ConnectorHealth, Mapping[str, str]]],
        auto_offset_reset: str,
        errors: dict[str, str],
        timeout_s: float = 10.0,
    ) -> SinkRead:
        groups = {health.name: sink_group(health.name, config) for health, config in sinks}
        committed, failed = self.groups.offsets(groups.values(), timeout_s)
        for group, message in failed.items():
            errors[f"sinks:{connect_cluster}:{group}"] = message
        commits = {name: committed.get(group, {}) for name, group in groups.items()}
        wanted = self._wanted(sinks, commits, timeout_s)
        every = {tp for parts in wanted.values() for tp in parts}
        ends, end_failed = list_offsets(self.admin, dict.fromkeys(every, OffsetSpec.latest()))
        if end_failed:
            errors[f"sinks:{connect_cluster}:list_offsets"] = next(iter(end_failed.values()))
        uncommitted = {tp for name, parts in wanted.items() for tp in parts - commits[name].keys()}
        starts: dict[TP, Any] = {}
        if uncommitted:
            starts, _ = list_offsets(self.admin, dict.fromkeys(uncommitted, OffsetSpec.earliest()))
        rows: dict[tuple[str, str], list[SinkPartition]] = {}
        for name, parts in wanted.items():
            for tp in sorted(parts & ends.keys()):
                end = ends[tp].offset
                done = commits[name].get(tp)
                begin = done
                if begin is None:  # where it will start: its auto.offset.reset
                    start = starts[tp].offset if tp in starts else end
                    begin = start if auto_offset_reset == "earliest" else end
                row = SinkPartition(
                    connect_cluster, name, tp[0], tp[1], done, end, max(0, end - begin), None
                )
                rows.setdefault((connect_cluster, name), []).append(row)
        return SinkRead(self._with_oldest(rows, timeout_s))

    def _wanted(
        self,
        sinks: Sequence[tuple[ConnectorHealth, Mapping[str, str]]],
        commits: Mapping[str, Mapping[TP, int]],
        timeout_s: float,
    ) -> dict[str, set[TP]]:
        """Each sink's partitions: those its group committed, and those of its topics."""
        regexes = {health.name: _regex(config.get("topics.regex")) for health, config in sinks}
        listed = any(_listed(config.get("topics", "")) for _, config in sinks)
        # one Metadata request for the cycle, not one per topic
        topics_now = self._topics(timeout_s) if listed or any(regexes.values()) else {}
        wanted: dict[str, set[TP]] = {}
        for health, config in sinks:
            parts = set(commits[health.name])
            for topic in _listed(config.get("topics", "")):
                parts |= self._partitions_of(topic, timeout_s, topics_now)
            pattern = regexes[health.name]
            if pattern is not None:
                for topic, numbers in topics_now.items():
                    if pattern.fullmatch(topic):
                        parts |= {(topic, p) for p in numbers}
            wanted[health.name] = parts
        return wanted

    def _with_oldest(
        self, rows: dict[tuple[str, str], list[SinkPartition]], timeout_s: float
    ) -> dict[tuple[str, str], list[SinkPartition]]:
        """The rows with their oldest waiting record's timestamp: read only where the offset it
        is read at moved (a stalled sink costs no fetch)."""
        need: dict[TP, int] = {}
        for row in (r for parts in rows.values() for r in parts):
            if row.waiting > 0:
                begin = row.end - row.waiting
                cached = self._oldest.get((row.topic, row.partition))
                if cached is None or cached[0] != begin:
                    need[(row.topic, row.partition)] = begin
        if need:
            found = self._fetcher().fetch(need, timeout_s=timeout_s)
            for tp, offset in need.items():
                if tp in found:
                    position = found[tp]
                    self._oldest[tp] = (offset, position.timestamp_ms if position else None)
        live = {(r.topic, r.partition) for parts in rows.values() for r in parts}
        for gone in self._oldest.keys() - live:
            del self._oldest[gone]
        return {
            key: [_oldest(row, self._oldest.get((row.topic, row.partition))) for row in parts]
            for key, parts in rows.items()
        }

    def _topics(self, timeout_s: float) -> dict[str, tuple[int, ...]]:
        metadata = self.admin.list_topics(timeout=timeout_s)
        return {
            name: tuple(sorted(topic.partitions))
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    def _partitions_of(
        self, topic: str, timeout_s: float, known: dict[str, tuple[int, ...]]
    ) -> set[TP]:
        """A listed topic's partitions: from the cycle's Metadata (absent: it does not exist)."""
        return {(topic, p) for p in known.get(topic, ())}


def _listed(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def _regex(value: str | None) -> re.Pattern[str] | None:
    if not value:
        return None
    try:
        return re.compile(value)
    except re.error:
        return None


def _oldest(row: SinkPartition, cached: tuple[int, int | None] | None) -> SinkPartition:
    if row.waiting <= 0 or cached is None or cached[0] != row.end - row.waiting:
        return row
    return SinkPartition(
        row.connect_cluster,
        row.connector,
        row.topic,
        row.partition,
        row.committed,
        row.end,
        row.waiting,
        cached[1],
    )
