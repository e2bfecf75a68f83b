"""Which connectors failed recently, read from Connect's status topic (the blast radius's input).

`GET /connectors?expand=status` answers what is FAILED *now*. That is the wrong question for an
outage: while the automation restarts failing connectors, and in the half second between a DLQ
record and the FAILED status, the count now is lowest exactly when many connectors fail at once.
Connect writes every state change to its status topic, in order and with a timestamp, so the
connectors that went FAILED within `blast_radius.within` are read from there: every partition
from the first record at or after `now - within` (ListOffsets by time) to its end, assign only,
no group. The counting itself is pure (`offsetd.remediation.guards.failing_within`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offsetd.errors import OffsetdError
from offsetd.events.decode import Malformed, raw_record
from offsetd.events.models import ConnectorStatusEvent, TaskStatusEvent
from offsetd.events.status import decode_status
from offsetd.remediation.guards import StatusSample

__all__ = ["StatusUnreadable", "read_status_since"]


class StatusUnreadable(OffsetdError):
    """The status topic could not be read to its end in time: the guard fails closed."""

    exit_code = 46


def read_status_since(
    conf: Mapping[str, str], topic: str, since_ms: int, *, timeout_s: float = 10.0
) -> list[StatusSample]:
    """Every connector and task status record of `topic` with a timestamp >= `since_ms`."""
    consumer = Consumer(
        {
            **conf,
            "group.id": "offsetd-blast-radius",  # assign() only: never joined, never committed
            "enable.auto.commit": "false",
            "enable.partition.eof": "false",
        }
    )
    try:
        return _read(consumer, topic, since_ms, timeout_s)
    except KafkaException as exc:
        raise StatusUnreadable(f"cannot read {topic}: {exc.args[0].str()}") from None
    finally:
        consumer.close()


def _read(consumer: Consumer, topic: str, since_ms: int, timeout_s: float) -> list[StatusSample]:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise StatusUnreadable(f"cannot read {topic}: the topic is not there")
    wanted = [TopicPartition(topic, p, since_ms) for p in metadata.partitions]
    starts = consumer.offsets_for_times(wanted, timeout=timeout_s)
    ends: dict[int, int] = {}
    assign: list[TopicPartition] = []
    for tp in starts:
        if tp.offset < 0:  # no record at or after since_ms
            continue
        high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout_s)[1]
        if tp.offset < high:
            ends[tp.partition] = high
            assign.append(TopicPartition(topic, tp.partition, tp.offset))
    if not assign:
        return []
    consumer.assign(assign)
    samples: list[StatusSample] = []
    deadline = time.monotonic() + timeout_s
    while ends:
        if time.monotonic() > deadline:
            raise StatusUnreadable(f"timed out reading {topic} from {since_ms} ms")
        for msg in consumer.consume(500, timeout=0.5):
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise StatusUnreadable(f"cannot read {topic}: {error.str()}")
            partition, offset = msg.partition() or 0, msg.offset() or 0
            if offset + 1 >= ends.get(partition, 0):
                ends.pop(partition, None)
            sample = _sample(msg)
            if sample is not None and sample.time_ms >= since_ms:
                samples.append(sample)
    return samples


def _sample(msg: object) -> StatusSample | None:
    try:
        event = decode_status("", raw_record(msg))  # type: ignore[arg-type]
    except Malformed:
        return None
    if not isinstance(event, TaskStatusEvent | ConnectorStatusEvent):
        return None
    return StatusSample(event.connector, event.state, event.source.timestamp_ms)
