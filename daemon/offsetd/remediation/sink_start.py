"""Where a sink that has committed nothing yet starts reading, and keeping it there.

A sink's consumer group has no committed offset for a partition until the task delivers a
record from it. Until then each start of the task — a restart too — begins where the consumer's
`auto.offset.reset` says: Connect's default for sinks is `earliest` (the log start), a worker's
`consumer.auto.offset.reset` or the connector's `consumer.override.auto.offset.reset` can say
`latest` (the log end *at that start*). Verified on the stack: a new sink whose first record is
poison fails with nothing committed, and with `latest` a restart then starts after the poison
record and after every record written since, silently (nothing delivered, nothing committed).

So before offsetd restarts such a task (a restart rule, or one-record batches while locating) it
writes the start the consumer had as the group's committed offset: the restart begins there, the
failure repeats on the same record, and no record is skipped behind anyone's back. For
`earliest` the start is the log start. For `latest` it is the first record written after the
failed run of the task began (its RUNNING status record's time): its consumer was assigned its
partitions a moment after that, so this start is never after the consumer's, and at most the
records of that moment are delivered that `latest` would have passed over. `none` gives no start
(the consumer fails without one: that is not a poison record).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from offsetd.errors import OffsetdError
from offsetd.events.decode import Malformed, raw_record
from offsetd.events.models import TaskStatusEvent
from offsetd.events.status import decode_status
from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.offline.javahash import murmur2
from offsetd.remediation.records import RecordUnavailable

__all__ = [
    "PIN_METADATA",
    "RESET_KEY",
    "Start",
    "StartNotPinned",
    "effective_reset",
    "pin_starts",
    "pinned_partitions",
    "start_of",
    "task_run_started_ms",
]

RESET_KEY = "consumer.override.auto.offset.reset"
PIN_METADATA = "offsetd: the consumer's start, pinned before a restart (nothing delivered yet)"
_SCAN_TAIL = 5_000  # status records read back from the end before reading the whole partition


class StartNotPinned(OffsetdError):
    """A sink that committed nothing: its consumer's start cannot be told or committed, so
    restarting it could jump past records; it is not restarted."""

    exit_code = 47


@dataclass(frozen=True)
class Start:
    """Where the consumer starts on one partition without a committed offset, and why."""

    offset: int
    how: str  # for the audit: "auto.offset.reset=earliest: the log start"


def effective_reset(config: Mapping[str, str], worker_default: str) -> str:
    """The sink's `auto.offset.reset`: the connector's override, else the workers' setting."""
    return config.get(RESET_KEY, worker_default).strip().lower()


def start_of(
    conf: Mapping[str, str],
    topic: str,
    partition: int,
    reset: str,
    run_started_ms: int | None,
    timeout_s: float = 30.0,
) -> Start | None:
    """The consumer's start on `topic-partition` (None: `none`, or an unknown policy)."""
    consumer = Consumer({**conf, "group.id": "offsetd-remediation-reader"})
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
            if reset == "earliest":
                return Start(low, f"auto.offset.reset=earliest: the log start, {low}")
            if reset != "latest":
                return None
            if run_started_ms is None:
                return Start(high, f"auto.offset.reset=latest: the log end now, {high}")
            found = consumer.offsets_for_times(
                [TopicPartition(topic, partition, run_started_ms)], timeout=timeout_s
            )[0]
        except KafkaException as exc:
            raise RecordUnavailable(
                f"cannot read the start of {topic}-{partition}: {exc.args[0].str()}"
            ) from None
        offset = found.offset if found.offset >= 0 else high
        return Start(
            max(offset, low),
            f"auto.offset.reset=latest: the log end when the failed run began "
            f"(the first record after {run_started_ms} ms), {max(offset, low)}",
        )
    finally:
        consumer.close()


def task_run_started_ms(
    conf: Mapping[str, str],
    status_topic: str,
    connector: str,
    tasks: Sequence[int],
    timeout_s: float = 30.0,
) -> int | None:
    """When the earliest of `tasks`' current runs began: the time of each task's last RUNNING
    status record (None if the status topic no longer holds one)."""
    consumer = Consumer(
        {
            **conf,
            "group.id": f"offsetd-status-reader-{connector}",  # assign() only
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    try:
        metadata = consumer.list_topics(status_topic, timeout=timeout_s).topics.get(status_topic)
        if metadata is None or not metadata.partitions:
            return None
        count = len(metadata.partitions)
        starts = []
        for task in tasks:
            key = f"status-task-{connector}-{task}".encode()
            partition = (murmur2(key) & 0x7FFFFFFF) % count
            started = _last_running(consumer, status_topic, partition, key, timeout_s)
            if started is not None:
                starts.append(started)
        return min(starts) if starts else None
    except KafkaException:
        return None
    finally:
        consumer.close()


def _last_running(
    consumer: Consumer, topic: str, partition: int, key: bytes, timeout_s: float
) -> int | None:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout_s)
    for start in (max(low, high - _SCAN_TAIL), low):
        found = _scan(consumer, topic, partition, start, high, key, timeout_s)
        if found is not None or start == low:
            return found
    return None


def _scan(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    key: bytes,
    timeout_s: float,
) -> int | None:
    """The timestamp of the last RUNNING record of `key` in [start, end)."""
    if start >= end:
        return None
    consumer.assign([TopicPartition(topic, partition, start)])
    last: int | None = None
    deadline = time.monotonic() + timeout_s
    position = start
    while position < end and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is not None:
                continue
            position = (msg.offset() or 0) + 1
            if msg.key() != key:
                continue
            try:
                event = decode_status("", raw_record(msg))
            except Malformed:
                continue
            if isinstance(event, TaskStatusEvent) and event.state == "RUNNING":
                last = event.time_ms
    return last


def pin_starts(
    conf: Mapping[str, str],
    group: str,
    starts: Mapping[tuple[str, int], int],
    timeout_s: float = 30.0,
) -> None:
    """Commit `starts` for the sink's group, marked `PIN_METADATA` (the broker refuses while
    the group has members: the sink's task must be FAILED). Raises StartNotPinned (or
    KafkaAccessDenied, naming the ACL) when it cannot."""
    admin = AdminClient(dict(conf))
    request = ConsumerGroupTopicPartitions(
        group,
        [
            TopicPartition(topic, partition, offset, metadata=PIN_METADATA)
            for (topic, partition), offset in sorted(starts.items())
        ],
    )
    try:
        result = admin.alter_consumer_group_offsets([request], request_timeout=timeout_s)[
            group
        ].result()
    except KafkaException as exc:
        reason = exc.args[0]
        raise_if_denied(reason, conf, group=("READ", group))
        raise StartNotPinned(f"cannot commit the start for group {group}: {reason}") from None
    failed = [
        f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions if tp.error
    ]
    if failed:
        raise StartNotPinned(f"cannot commit the start for group {group}: {'; '.join(failed)}")


def pinned_partitions(
    conf: Mapping[str, str], group: str, timeout_s: float = 30.0
) -> set[tuple[str, int]]:
    """The group's partitions whose committed offset is still a start offsetd pinned (nothing
    delivered since: Connect's own commits carry no metadata). Empty when unreadable."""
    admin = AdminClient(dict(conf))
    try:
        found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[
            group
        ].result(timeout=timeout_s)
    except KafkaException:
        return set()
    return {
        (tp.topic, tp.partition)
        for tp in found.topic_partitions
        if tp.offset >= 0 and getattr(tp, "metadata", None) == PIN_METADATA
    }
