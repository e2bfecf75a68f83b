"""Reading exact records from a topic, with no consumer group: what the saga checks and copies.

The skip saga, its quarantine and skip-run plans all need "the record at topic-partition@offset"
(or a short run of them) byte for byte — key, value, headers in order, timestamp and its type —
and must tell "no record there" from "the log no longer holds it" from "cannot read in time".
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from offsetd.errors import OffsetdError
from offsetd.events.models import RecordRef
from offsetd.recordchecks import KafkaRecord

__all__ = [
    "RecordUnavailable",
    "read_record",
    "read_records",
    "subscribed_watermarks",
    "to_record",
]


class RecordUnavailable(OffsetdError):
    """A record or a partition's watermarks could not be read (in time)."""

    exit_code = 42


def read_record(
    conf: Mapping[str, str],
    ref: RecordRef,
    *,
    timeout_s: float = 30.0,
    isolation_level: str = "read_uncommitted",
) -> KafkaRecord | None:
    """The record at exactly (topic, partition, offset), or None if there is none there.

    Raises `RecordUnavailable` when the partition cannot be read in time.
    """
    records = read_records(
        conf, ref.topic, ref.partition, ref.offset, 1,
        timeout_s=timeout_s, isolation_level=isolation_level,
    )  # fmt: skip
    return records[0] if records and records[0].offset == ref.offset else None


def read_records(
    conf: Mapping[str, str],
    topic: str,
    partition: int,
    start: int,
    limit: int,
    *,
    timeout_s: float = 30.0,
    isolation_level: str = "read_uncommitted",
) -> list[KafkaRecord]:
    """Up to `limit` records from `start` (fewer at the end of the partition), no consumer group.

    `isolation_level` should be the sink's own (Connect's consumer default: read_uncommitted),
    so the records are the ones the task saw.
    """
    consumer = Consumer(
        {
            **conf,
            "group.id": "offsetd-remediation-reader",  # never joined, never committed
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "error",
            "isolation.level": isolation_level,
        }
    )
    try:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
        except KafkaException as exc:
            raise RecordUnavailable(
                f"cannot read {topic}-{partition}@{start}: {exc.args[0].str()}"
            ) from None
        if start >= high:
            return []
        if start < low:
            raise RecordUnavailable(
                f"{topic}-{partition}@{start} is no longer in the log (it starts at {low})"
            )
        consumer.assign([TopicPartition(topic, partition, start)])
        out: list[KafkaRecord] = []
        deadline = time.monotonic() + timeout_s
        position = start
        while len(out) < limit and position < high:
            if time.monotonic() > deadline:
                raise RecordUnavailable(f"timed out reading {topic}-{partition} from {start}")
            for msg in consumer.consume(min(limit - len(out), 500), timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        position = high
                        break
                    raise RecordUnavailable(
                        f"cannot read {topic}-{partition}@{start}: {error.str()}"
                    )
                record = to_record(msg)
                out.append(record)
                position = record.offset + 1
                if len(out) >= limit:
                    break
        return out
    finally:
        consumer.close()


def to_record(msg: Message) -> KafkaRecord:
    """A consumed message as a KafkaRecord (headers in order, timestamp type kept)."""
    raw = msg.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    ts_type, ts = msg.timestamp()
    key, value = msg.key(), msg.value()
    return KafkaRecord(
        topic=str(msg.topic()),
        partition=int(msg.partition() or 0),
        offset=int(msg.offset() or 0),
        key=_as_bytes(key),
        value=_as_bytes(value),
        headers=tuple((str(k), _as_bytes(v)) for k, v in pairs),
        timestamp_type=int(ts_type),
        timestamp_ms=int(ts),
    )


def _as_bytes(data: object) -> bytes | None:
    # The client hands out bytes (no deserializer is configured); str only if one were.
    if data is None or isinstance(data, bytes):
        return data
    return str(data).encode()


def subscribed_watermarks(
    conf: Mapping[str, str], config: Mapping[str, str], timeout_s: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) of every partition the sink subscribes to (`topics` or `topics.regex`)."""
    consumer = Consumer({**conf, "group.id": "offsetd-remediation-reader"})
    try:
        try:
            metadata = consumer.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise RecordUnavailable(f"cannot list topics: {exc.args[0].str()}") from None
        names = _subscribed(config, list(metadata.topics))
        marks: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in names:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            for partition in meta.partitions:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=timeout_s
                    )
                except KafkaException as exc:
                    raise RecordUnavailable(
                        f"cannot read the end of {topic}-{partition}: {exc.args[0].str()}"
                    ) from None
                marks[(topic, partition)] = (low, high)
        return marks
    finally:
        consumer.close()


def _subscribed(config: Mapping[str, str], topics: list[str]) -> list[str]:
    listed = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    if listed:
        return listed
    regex = config.get("topics.regex", "")
    try:
        pattern = re.compile(regex)
    except re.error:
        # A Java regex Python cannot read: every topic counts, which can only add ambiguity.
        return topics
    return [t for t in topics if pattern.fullmatch(t)]


# -- small helpers ------------------------------------------------------------------------------
