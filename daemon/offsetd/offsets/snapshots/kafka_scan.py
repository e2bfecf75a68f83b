"""One read of the snapshot topic: its single partition from the start to the high watermark.

No consumer group and no commits (the partition is assigned). Of every key only the latest value
counts, as compaction would leave it; chunk values are kept only when the reader wants them, so
a history listing holds headers only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.snapshots.errors import SnapshotStoreError
from offsetd.offsets.snapshots.kafka_topic import reason

__all__ = ["Scan", "scan_topic"]


class Scan:
    """What a read of the topic keeps: the latest value per key; chunk values only if wanted."""

    def __init__(self, keep_chunk: Callable[[str], bool]) -> None:
        self.keep_chunk = keep_chunk
        self.headers: dict[str, bytes] = {}  # id -> latest header (tombstoned ids dropped)
        self.chunks: dict[str, bytes | None] = {}  # chunk key -> latest value (kept ones)

    def add(self, key: str, value: bytes | None) -> None:
        if "/" not in key:
            if value is None:
                self.headers.pop(key, None)
            else:
                self.headers[key] = value
        elif self.keep_chunk(key):
            self.chunks[key] = value


def scan_topic(
    conf: Mapping[str, str], topic: str, timeout_s: float, keep_chunk: Callable[[str], bool]
) -> Scan:
    """Read the partition from its start to the high watermark (no group, no commits)."""
    scan = Scan(keep_chunk)
    consumer = Consumer(
        {
            **conf,
            "group.id": "offsetd-snapshot-reader",  # never joined: partitions are assigned
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": "false",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s)
        if high > low:
            consumer.assign([TopicPartition(topic, 0, low)])
            _read_until(consumer, high, scan, topic, timeout_s, conf)
    except KafkaException as exc:
        raise_if_denied(exc, conf, topic=("READ", topic))
        raise SnapshotStoreError(f"cannot read Kafka topic {topic}: {reason(exc)}") from None
    finally:
        consumer.close()
    return scan


def _read_until(
    consumer: Consumer,
    high: int,
    scan: Scan,
    topic: str,
    timeout_s: float,
    conf: Mapping[str, str],
) -> None:
    deadline = time.monotonic() + timeout_s
    position = -1
    while position < high - 1:
        msg = consumer.poll(0.5)  # returns as soon as a record is there (consume() waits)
        if msg is None:
            if time.monotonic() > deadline:
                raise SnapshotStoreError(
                    f"timed out reading Kafka topic {topic} (at offset {position + 1} of {high})"
                )
            continue
        deadline = time.monotonic() + timeout_s  # a deadline without progress
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return
            raise_if_denied(err, conf, topic=("READ", topic))
            raise SnapshotStoreError(f"cannot read Kafka topic {topic}: {err.str()}")
        position = max(position, msg.offset() or 0)
        key, value = msg.key(), msg.value()
        if key:
            scan.add(
                key.decode("utf-8", "replace") if isinstance(key, bytes) else key,
                value.encode() if isinstance(value, str) else value,
            )
