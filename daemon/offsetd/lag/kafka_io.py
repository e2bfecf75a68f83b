"""The Kafka reads of lag collection (confluent-kafka): ListOffsets, record timestamps, tails.

- `list_offsets`: ONE admin ListOffsets call for many partitions; librdkafka sends one request
  per partition leader, never one per partition. Specs may differ per partition (latest,
  earliest, max-timestamp share the request), the isolation level is per call;
- `TimestampFetcher`: the timestamp of the record at a given offset, for lagging partitions only,
  `concurrency` partitions assigned at a time with small fetch sizes, results cached by the
  caller per (partition, offset);
- `Tail`: a group-less reader (assign, no group join, no commits) of every partition of a topic,
  from the beginning, that on each call reads what is available now;
- `group_offsets`: a consumer group's committed offsets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]

__all__ = [
    "OffsetSpec",
    "Position",
    "Tail",
    "TimestampFetcher",
    "group_offsets",
    "list_offsets",
    "topic_partitions",
]

TP = tuple[str, int]
OffsetSpec: Any = _OffsetSpec


@dataclass(frozen=True, slots=True)
class Position:
    offset: int
    timestamp_ms: int  # -1 when the spec gives none (latest, earliest)


def list_offsets(
    admin: AdminClient,
    specs: Mapping[TP, Any],
    *,
    read_committed: bool = True,
    timeout_s: float = 30.0,
) -> tuple[dict[TP, Position], dict[TP, str]]:
    """Positions for every partition of `specs` in one call; failures per partition, not raised."""
    if not specs:
        return {}, {}
    request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(request, isolation_level=level, request_timeout=timeout_s)
    found: dict[TP, Position] = {}
    failed: dict[TP, str] = {}
    for tp, future in futures.items():
        key = (tp.topic, tp.partition)
        try:
            info = future.result()
        except KafkaException as exc:
            failed[key] = str(exc.args[0] if exc.args else exc)
            continue
        found[key] = Position(int(info.offset), int(info.timestamp))
    return found, failed


def topic_partitions(admin: AdminClient, topic: str, timeout_s: float = 10.0) -> list[int]:
    """The partitions of one topic; empty if it does not exist."""
    meta = admin.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None:
        return []
    return sorted(meta.partitions)


def _consumer(conf: Mapping[str, str], **extra: Any) -> Consumer:
    return Consumer(
        {
            **conf,
            "group.id": f"offsetd-lag-{uuid.uuid4().hex}",  # never joined: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


class TimestampFetcher:
    """Reads the timestamp of one record per partition, `concurrency` partitions at a time."""

    def __init__(self, conf: Mapping[str, str], *, concurrency: int = 32) -> None:
        self.concurrency = concurrency
        self._consumer = _consumer(
            conf,
            **{
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.max.bytes": 1 << 20,
                "max.partition.fetch.bytes": 64 << 10,
                "fetch.wait.max.ms": 50,
            },
        )

    def fetch(self, wanted: Mapping[TP, int], timeout_s: float = 10.0) -> dict[TP, Position]:
        """The first record at or after each wanted offset (its real offset and timestamp)."""
        out: dict[TP, Position] = {}
        items = sorted(wanted.items())
        deadline = time.monotonic() + timeout_s
        for start in range(0, len(items), self.concurrency):
            if time.monotonic() > deadline:
                break
            chunk = dict(items[start : start + self.concurrency])
            self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in chunk.items()])
            pending = set(chunk)
            while pending and time.monotonic() < deadline:
                for msg in self._consumer.consume(num_messages=len(pending) * 4, timeout=0.2):
                    key = (cast(str, msg.topic()), cast(int, msg.partition()))
                    if key not in pending:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(key)  # nothing there (yet): no timestamp
                        continue
                    kind, ts = msg.timestamp()
                    if kind != 0:
                        out[key] = Position(cast(int, msg.offset()), int(ts))
                    pending.discard(key)
            self._consumer.unassign()
        return out

    def close(self) -> None:
        self._consumer.close()


class Tail:
    """Every partition of `topic` from the beginning; `read()` returns what is there now."""

    def __init__(self, conf: Mapping[str, str], topic: str, *, batch: int = 10_000) -> None:
        self.topic = topic
        self._batch = batch
        self._consumer = _consumer(
            conf,
            **{
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.queue.backoff.ms": "10",
            },
        )
        self._at_end: dict[int, bool] = {}
        self.last_error: str | None = None

    def _assign(self) -> bool:
        if self._at_end:
            return True
        meta = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return False
        self._at_end = dict.fromkeys(sorted(meta.partitions), False)
        self._consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._at_end]
        )
        return True

    def read(self, budget_s: float = 5.0) -> list[Message]:
        """Records until nothing more is buffered, once every partition has reached its end.

        "Reached its end" is sticky: a busy partition (Connect rewrites a live connector's
        offsets every flush) is at its end only between two records, so waiting for all
        partitions to be at their end at the same moment could take forever.
        """
        if not self._assign():
            return []
        out: list[Message] = []
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline:
            batch = self._consumer.consume(num_messages=self._batch, timeout=0.1)
            for msg in batch:
                err = msg.error()
                if err is None:
                    out.append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._at_end[cast(int, msg.partition())] = True
                else:
                    self.last_error = err.str()
            if not batch and all(self._at_end.values()):
                break
        return out

    def close(self) -> None:
        self._consumer.close()


def group_offsets(
    admin: AdminClient, groups: Iterable[str], timeout_s: float = 10.0
) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
    """Committed offsets of each group (one request per group: librdkafka has no KIP-709)."""
    found: dict[str, dict[TP, int]] = {}
    failed: dict[str, str] = {}
    for group in sorted(set(groups)):
        try:
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s
            )
            result = futures[group].result()
        except KafkaException as exc:
            failed[group] = str(exc.args[0] if exc.args else exc)
            continue
        found[group] = {
            (tp.topic, tp.partition): int(tp.offset)
            for tp in result.topic_partitions or []
            if tp.offset is not None and tp.offset >= 0
        }
    return found, failed
