"""Writing offsets offline, byte for byte what the worker would write itself.

- `write_source_offsets`: one record per partition to the offsets topic, with the exact key
  bytes Connect already wrote (or, for a known key layout, the bytes Connect would write), in
  the partition Java's default partitioner picks (murmur2, computed here and checked);
- `write_sink_offsets`: the sink connector's consumer group, which must be empty, through the
  Admin API (alter, and OffsetDelete for null offsets).

Each write refuses if the topic or group changed since it was read, and reports exactly what
was confirmed when it fails half-way (`OfflineWriteIncomplete`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.offline import rdkafka as offline_rdkafka
from offsetd.offsets.offline.gate import OfflineRefused
from offsetd.offsets.offline.plan import (
    OfflineWriteIncomplete,
    PlannedRecord,
    WriteReport,
    WrittenOffset,
    plan_sink_writes,
    plan_source_writes,
)
from offsetd.offsets.offline.reader import offline_consumer, partitions_of
from offsetd.offsets.offline.view import (
    OfflineError,
    OffsetsView,
)

__all__ = ["write_sink_offsets", "write_source_offsets"]


def _producer(conf: Mapping[str, str], timeout_s: float) -> Producer:
    return Producer(
        {
            **conf,
            "acks": "all",
            "enable.idempotence": True,
            # Every record carries an explicit partition computed with Java's murmur2; the
            # partitioner is set to the Java-compatible one anyway, so nothing ever falls back
            # to librdkafka's default (consistent_random, CRC32).
            "partitioner": "murmur2_random",
            "message.timeout.ms": max(1000, int(timeout_s * 1000)),
            "linger.ms": 5,
            # errors only: librdkafka's info lines (e.g. BGQUEUE "Purging 1 unserved events",
            # at close on a loaded machine) go to stderr, where a command says one line
            "log_level": 3,
        }
    )


def write_source_offsets(
    conf: Mapping[str, str],
    topic: str,
    connector: str,
    entries: list[OffsetEntry],
    view: OffsetsView,
    *,
    connector_class: str | None,
    key_template: str | None = None,
    timeout_s: float = 60.0,
) -> WriteReport:
    """Write `entries` (null offset = remove) for a source connector to its offsets topic.

    `view` must be a fresh `read_offsets` of `topic`: keys already in it are reused byte for
    byte. New keys need a known layout: the class's own (MM2, FileStreamSource) or
    `key_template` (see `offline_plan.parse_key_template`). Refuses (nothing written) on any
    problem; waits for every record's acknowledgement (acks=all) and checks where it landed.
    """
    if view.topic != topic:
        raise OfflineError(f"the offsets view is of topic {view.topic}, not {topic}")
    planned, warnings = plan_source_writes(
        connector, entries, view, connector_class=connector_class, key_template=key_template
    )
    if not planned:
        return WriteReport("source", topic, connector, (), tuple(warnings))
    _require_unchanged(conf, view, min(timeout_s, 30.0), connector)
    delivered: dict[int, tuple[KafkaError | None, int | None, int | None]] = {}
    producer = _producer(conf, timeout_s)

    def on_delivery(index: int) -> Any:
        def report(err: KafkaError | None, msg: Message) -> None:
            delivered[index] = (err, msg.partition(), msg.offset())

        return report

    for index, record in enumerate(planned):
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            partition=record.kafka_partition,
            on_delivery=on_delivery(index),
        )
    producer.flush(timeout_s)
    written: list[WrittenOffset] = []
    failed: list[str] = []
    if not any(err is None for err, _, _ in delivered.values()):
        for err, _, _ in delivered.values():
            raise_if_denied(err, conf, topic=("WRITE", topic))
    for index, record in enumerate(planned):
        err, partition, offset = delivered.get(index, (None, None, None))
        if index not in delivered or err is not None or partition != record.kafka_partition:
            why = (
                "no acknowledgement in time"
                if index not in delivered
                else err.str()
                if err is not None
                else f"landed in partition {partition}, not {record.kafka_partition}"
            )
            failed.append(f"{_describe(record)}: {why}")
            continue
        written.append(
            WrittenOffset(
                record.partition,
                record.offset,
                kafka_partition=partition,
                kafka_offset=offset,
                key=record.key,
                key_source=record.key_source,
            )
        )
    report = WriteReport("source", topic, connector, tuple(written), tuple(warnings))
    if failed:
        raise _incomplete(f"offsets topic {topic}", report, failed)
    return report


def _require_unchanged(
    conf: Mapping[str, str], view: OffsetsView, timeout_s: float, connector: str
) -> None:
    """The topic must still be as it was read *for this connector*: the same partition count
    (keys map to partitions by count), and no record of this connector written since. Other
    connectors' records (a live worker runs other connectors) do not matter."""
    consumer = offline_consumer(conf)
    try:
        partitions = partitions_of(consumer, view.topic, timeout_s, conf)
        if len(partitions) != view.partition_count:
            raise OfflineError(
                f"topic {view.topic} has {len(partitions)} partitions but had "
                f"{view.partition_count} when it was read; read it again"
            )
        # Every end offset first: once a partition is assigned, each watermark query waits
        # behind the fetcher's long poll on the same connection (~0.5 s a partition).
        highs = {
            p: consumer.get_watermark_offsets(
                TopicPartition(view.topic, p), timeout=timeout_s, cached=False
            )[1]
            for p in partitions
        }
        moved: list[str] = []
        for p, high in highs.items():
            start = view.end_offsets.get(p, 0)
            if high != start and _has_records_of(
                consumer, view.topic, p, start, high, connector, timeout_s
            ):
                moved.append(f"partition {p}: {start} -> {high}")
    finally:
        consumer.close()
    if moved:
        raise OfflineError(
            f"{connector}'s offsets in {view.topic} changed since they were read "
            f"({', '.join(moved[:5])}); read them again, and if they keep changing, a Connect "
            "worker still runs the connector"
        )


def _has_records_of(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    connector: str,
    timeout_s: float,
) -> bool:
    prefix = json.dumps([connector], ensure_ascii=False)[:-1].encode() + b","  # ["name",
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    seen = start
    while seen < end and time.monotonic() < deadline:
        # no more than are left: consume() waits its whole timeout for a batch it cannot fill,
        # a second per partition that other connectors wrote to since the read
        for msg in consumer.consume(min(500, end - seen), timeout=1.0):
            if msg.error() is not None:
                continue
            seen = (msg.offset() or 0) + 1
            if (msg.key() or b"").startswith(prefix):
                return True
    return seen < end  # could not read it all: assume the worst


def _describe(record: PlannedRecord) -> str:
    return f"{record.key.decode('utf-8', 'backslashreplace')} -> partition {record.kafka_partition}"


def _incomplete(target: str, report: WriteReport, failed: list[str]) -> OfflineWriteIncomplete:
    confirmed = [
        (w.key.decode("utf-8", "backslashreplace") if w.key else str(w.partition))
        for w in report.written
    ]
    return OfflineWriteIncomplete(
        f"the offline write to {target} is incomplete: {len(failed)} failed, "
        f"{len(confirmed)} confirmed.\nfailed:\n  "
        + "\n  ".join(failed)
        + ("\nconfirmed:\n  " + "\n  ".join(confirmed) if confirmed else ""),
        report,
    )


def _require_empty_group(
    admin: AdminClient, conf: Mapping[str, str], group_id: str, timeout_s: float
) -> None:
    future = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)[group_id]
    try:
        description = future.result()
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return  # no group yet: committing creates it
        raise_if_denied(exc, conf, group=("DESCRIBE", group_id))
        raise OfflineError(f"cannot describe consumer group {group_id}: {exc}") from None
    members = len(description.members)
    state = description.state
    if members or state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        name = getattr(state, "name", str(state))
        raise OfflineRefused(
            f"consumer group {group_id} is not empty ({members} member"
            f"{'' if members == 1 else 's'}, state {name}): stop the sink connector's tasks "
            "before writing its offsets offline"
        )


def write_sink_offsets(
    conf: Mapping[str, str],
    group_id: str,
    entries: Sequence[OffsetEntry],
    *,
    timeout_s: float = 30.0,
) -> WriteReport:
    """Set (or, for null offsets, delete) a sink connector's committed offsets.

    The group must be empty (no member), checked first; the broker checks again on every
    request. Null offsets use Kafka's OffsetDelete through librdkafka (see `offline_rdkafka`);
    if that is not reachable the whole write is refused before anything changes.
    """
    changes = plan_sink_writes(entries)
    deletes = [c for c in changes if c.offset is None]
    alters = [(c.topic, c.partition, c.offset) for c in changes if c.offset is not None]
    if deletes and not offline_rdkafka.available():
        raise OfflineError(
            "removing a sink partition's offset needs Kafka's OffsetDelete, which this "
            "confluent-kafka cannot reach; nothing was written (use kafka-consumer-groups.sh "
            "--delete-offsets for those partitions)"
        )
    admin = AdminClient(dict(conf))
    _require_empty_group(admin, conf, group_id, timeout_s)
    written: list[WrittenOffset] = []
    failed: list[str] = []
    by_tp = {(c.topic, c.partition): c for c in changes}
    if alters:
        request = ConsumerGroupTopicPartitions(
            group_id,
            [TopicPartition(topic, partition, offset) for topic, partition, offset in alters],
        )
        future = admin.alter_consumer_group_offsets([request], request_timeout=timeout_s)
        try:
            result = future[group_id].result()
            answered = {(tp.topic, tp.partition): tp for tp in result.topic_partitions}
            request_error: object = "no answer for this partition"
        except KafkaException as exc:
            answered, request_error = {}, exc
        for topic, partition, offset in alters:
            tp = answered.get((topic, partition))
            if tp is None or tp.error is not None:
                why = tp.error if tp is not None else request_error
                if not written:
                    raise_if_denied(why, conf, group=("READ", group_id), topic=("READ", topic))
                failed.append(f"{topic}-{partition}: {why}")
            else:
                written.append(_sink_written(topic, partition, offset))
    if deletes:
        try:
            outcome = offline_rdkafka.delete_consumer_group_offsets(
                conf, group_id, [(c.topic, c.partition) for c in deletes], timeout_s
            )
        except (RuntimeError, offline_rdkafka.RdkafkaUnavailable) as exc:
            outcome = {(c.topic, c.partition): str(exc) for c in deletes}
        for (topic, partition), error in outcome.items():
            if error is not None and not written:
                raise_if_denied(error, conf, group=("DELETE", group_id), topic=("READ", topic))
            if error is None:
                written.append(_sink_written(topic, partition, by_tp[(topic, partition)].offset))
            else:
                failed.append(f"{topic}-{partition} (delete): {error}")
    report = WriteReport("sink", group_id, None, tuple(written))
    if failed:
        raise _incomplete(f"consumer group {group_id}", report, failed)
    return report


def _sink_written(topic: str, partition: int, offset: int | None) -> WrittenOffset:
    return WrittenOffset(
        {"kafka_topic": topic, "kafka_partition": partition},
        None if offset is None else {"kafka_offset": offset},
    )
