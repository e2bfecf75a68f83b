"""Offline mode: read and write connector offsets straight from and to Kafka (KIP-199's tool).

For Connect older than 3.6 (no PATCH/DELETE offsets), or when the workers are down, offsetd does
what the worker would do itself, byte for byte:

- `read_offsets`: consume every partition of the offsets topic from the beginning to the end
  offsets taken at the start (assigned, no group membership, no commits), and fold it into an
  `OffsetsView`: the latest offset of every logical partition, the key bytes and topic
  partition it lives in, conflicts, malformed records, optionally the whole history;
- `write_source_offsets`: one record per partition to the offsets topic, with the exact key
  bytes Connect already wrote (or, for a known key layout, the bytes Connect would write), in
  the partition Java's default partitioner picks (murmur2, computed here and checked);
- `write_sink_offsets`: the sink connector's consumer group, which must be empty, through the
  Admin API (alter, and OffsetDelete for null offsets);
- `check_offline_allowed`: the safety gate run before any write.

New source keys need the order of the partition map's keys, which the connector's task decides.
offsetd knows it for MirrorSource/Checkpoint/Heartbeat (Java HashMap order) and
FileStreamSource; for any other class the caller gives a *key template* (`--key-template`): a
key in the topic's format, `["<any name>", {"<key 1>": <any>, "<key 2>": <any>}]`, of which only
the order of the object's keys counts. The easiest correct template is a key Connect itself wrote
for another partition of the same connector. Without one, new keys are refused (keys already in
the topic are always reused byte for byte).

Every function takes a confluent-kafka client configuration (`KafkaCluster.client_config()`),
so TLS and SASL apply unchanged. The pure parts live in `offline_view` (decoding,
conflicts), `offline_plan` (key layouts, planning) and `javahash` (the JVM's arithmetic).

Not covered: connector-specific offsets topics (KIP-618 `offsets.storage.topic`; pass that
topic explicitly) and transactional writes for exactly-once source workers (offline records are
plain, non-transactional ones, which read_committed readers see as well).
"""

from __future__ import annotations

import gc
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

import httpx
from confluent_kafka import (
    OFFSET_BEGINNING,
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

from offsetd.offsets import offline_rdkafka
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.offline_plan import (
    BUILTIN_LAYOUTS,
    FILE_STREAM_SOURCE_CLASS,
    KeyLayout,
    OfflineWriteIncomplete,
    PlannedRecord,
    WriteReport,
    WrittenOffset,
    parse_key_template,
    plan_sink_writes,
    plan_source_writes,
)
from offsetd.offsets.offline_view import (
    HistoryRecord,
    KeyForm,
    LogicalPartition,
    Malformed,
    OfflineError,
    OffsetsView,
    RawRecord,
    build_view,
)

__all__ = [
    "BUILTIN_LAYOUTS",
    "FILE_STREAM_SOURCE_CLASS",
    "HistoryRecord",
    "KeyForm",
    "KeyLayout",
    "LogicalPartition",
    "Malformed",
    "OfflineError",
    "OfflineRefused",
    "OfflineWriteIncomplete",
    "OffsetsView",
    "WriteReport",
    "WrittenOffset",
    "check_offline_allowed",
    "parse_key_template",
    "read_offsets",
    "write_sink_offsets",
    "write_source_offsets",
]

# Task states in which a task holds its position in memory and will write it back.
LIVE_TASK_STATES = ("RUNNING", "PAUSED", "RESTARTING", "UNASSIGNED")
FETCH_TUNING = {"fetch.queue.backoff.ms": "10", "max.partition.fetch.bytes": str(8 << 20)}
_RETRIABLE_READ_ERRORS = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


class OfflineRefused(OfflineError):
    """Offline writes were refused because Connect workers may still be running the connector."""

    exit_code = 14


# -- read ---------------------------------------------------------------------------------------


def _consumer(conf: Mapping[str, str]) -> Consumer:
    return Consumer(
        {
            # Read-to-end throughput: librdkafka's defaults pause a partition's fetches for 1 s
            # whenever its local queue is full, which halves the rate. The caller may override.
            **FETCH_TUNING,
            **conf,
            # assign() only: the group id is never joined and nothing is ever committed
            "group.id": f"offsetd-offline-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",  # like Connect: aborted EOS writes are skipped
        }
    )


def _partitions(client: Consumer, topic: str, timeout_s: float) -> list[int]:
    metadata = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        why = metadata.error if metadata is not None and metadata.error else "it does not exist"
        raise OfflineError(f"cannot read topic {topic}: {why}")
    return sorted(metadata.partitions)


def _timestamp(msg: Message) -> int | None:
    kind, value = msg.timestamp()
    return None if kind == 0 else int(value)  # 0: TIMESTAMP_NOT_AVAILABLE


def read_offsets(
    conf: Mapping[str, str],
    topic: str,
    *,
    connectors: set[str] | None = None,
    history: bool = False,
    timeout_s: float = 120.0,
    batch_size: int = 10_000,
) -> OffsetsView:
    """Read an offsets topic to the end offsets it had when this call began.

    `connectors` limits the view (and history) to those names. Malformed records are reported
    in the view, never raised. Without `history` only the latest record per key and topic
    partition is decoded (see `offline_view.build_view`).
    """
    consumer = _consumer(conf)
    collecting = gc.isenabled()
    gc.disable()  # a million short-lived Messages would trigger thousands of collections
    try:
        try:
            partitions = _partitions(consumer, topic, min(timeout_s, 30.0))
            ends: dict[int, int] = {}
            for p in partitions:
                _low, ends[p] = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=min(timeout_s, 30.0), cached=False
                )
            reader = _Reader(topic, ends, history)
            consumer.assign(
                [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(reader.pending)]
            )
            deadline = time.monotonic() + timeout_s
            while reader.pending:
                if time.monotonic() > deadline:
                    raise OfflineError(
                        f"reading {topic} did not reach its end within {timeout_s:.0f} s "
                        f"(partitions {sorted(reader.pending)} unfinished"
                        + (f"; last error: {reader.last_error}" if reader.last_error else "")
                        + ")"
                    )
                reader.add(consumer.consume(num_messages=batch_size, timeout=0.5))
        finally:
            consumer.close()
        return build_view(
            topic,
            len(partitions),
            ends,
            reader.records(),
            connectors=connectors,
            history=history,
            records_read=reader.read,
        )
    finally:
        if collecting:
            gc.enable()


class _Reader:
    """The consume loop's state; each batch is handled with C-level `map`s, not per message."""

    def __init__(self, topic: str, ends: Mapping[int, int], history: bool) -> None:
        self.topic = topic
        self.last = {p: end - 1 for p, end in ends.items()}  # last offset to read
        self.pending = {p for p, last in self.last.items() if last >= 0}
        self.history = history
        self.latest: dict[tuple[int, bytes | None], Message] = {}
        self.log: list[RawRecord] = []
        self.read = 0
        self.last_error: str | None = None

    def add(self, batch: list[Message]) -> None:
        if any(map(Message.error, batch)):
            batch = self._without_events(batch)
        parts = cast(list[int], list(map(Message.partition, batch)))
        offsets = cast(list[int], list(map(Message.offset, batch)))
        beyond = False
        for part, offset in dict(
            zip(parts, offsets, strict=True)
        ).items():  # the batch's last per partition
            if offset >= self.last[part]:
                self.pending.discard(part)
                beyond = beyond or offset > self.last[part]
        if beyond:  # records written after the read began: leave them out
            kept = [
                i for i, (p, o) in enumerate(zip(parts, offsets, strict=True)) if o <= self.last[p]
            ]
            batch = [batch[i] for i in kept]
            parts = [parts[i] for i in kept]
            offsets = [offsets[i] for i in kept]
        self.read += len(batch)
        keys = map(Message.key, batch)
        if self.history:
            values = map(Message.value, batch)
            self.log.extend(map(RawRecord, parts, offsets, map(_timestamp, batch), keys, values))
        else:
            self.latest.update(zip(zip(parts, keys, strict=True), batch, strict=True))

    def _without_events(self, batch: list[Message]) -> list[Message]:
        records = []
        for msg in batch:
            err = msg.error()
            if err is None:
                records.append(msg)
            elif err.code() == KafkaError._PARTITION_EOF:
                self.pending.discard(cast(int, msg.partition()))
            elif err.code() in _RETRIABLE_READ_ERRORS and not err.fatal():
                self.last_error = err.str()  # librdkafka retries; the deadline bounds it
            else:
                raise OfflineError(f"reading {self.topic} failed: {err.str()}")
        return records

    def records(self) -> list[RawRecord]:
        if self.history:
            return self.log
        return [
            RawRecord(p, cast(int, m.offset()), _timestamp(m), key, m.value())
            for (p, key), m in self.latest.items()
        ]


# -- write: source ------------------------------------------------------------------------------


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
    consumer = _consumer(conf)
    try:
        partitions = _partitions(consumer, view.topic, timeout_s)
        if len(partitions) != view.partition_count:
            raise OfflineError(
                f"topic {view.topic} has {len(partitions)} partitions but had "
                f"{view.partition_count} when it was read; read it again"
            )
        moved: list[str] = []
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(view.topic, p), timeout=timeout_s, cached=False
            )
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
        for msg in consumer.consume(500, timeout=1.0):
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


# -- write: sink --------------------------------------------------------------------------------


def _require_empty_group(admin: AdminClient, group_id: str, timeout_s: float) -> None:
    future = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)[group_id]
    try:
        description = future.result()
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return  # no group yet: committing creates it
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
    _require_empty_group(admin, group_id, timeout_s)
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
            request_error = "no answer for this partition"
        except KafkaException as exc:
            answered, request_error = {}, str(exc)
        for topic, partition, offset in alters:
            tp = answered.get((topic, partition))
            if tp is None or tp.error is not None:
                why = tp.error if tp is not None else request_error
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


# -- the safety gate ----------------------------------------------------------------------------


def check_offline_allowed(
    rest_url: str | None,
    connector: str,
    *,
    force: bool,
    assume_workers_down: bool,
    http: httpx.Client | None = None,
) -> None:
    """Refuse offline writes while a worker may still run the connector's tasks.

    A worker answering REST with a task of the connector RUNNING (or PAUSED, RESTARTING,
    UNASSIGNED: such tasks keep their position in memory and write it back) is refused unless
    `force`. A connector the workers do not know (404), or one with no live task (STOPPED, or
    only FAILED tasks) is allowed. When no REST URL is known or nothing answers, the caller
    must vouch with `assume_workers_down`.
    """
    if rest_url is None:
        if not assume_workers_down:
            raise OfflineRefused(
                "no Connect REST URL is known, so offsetd cannot check that the workers are "
                "down; make sure no worker runs, then pass --assume-workers-down"
            )
        return
    url = f"{rest_url.rstrip('/')}/connectors/{quote(connector, safe='')}/status"
    client = http or httpx.Client(timeout=10.0)
    try:
        response = client.get(url)
    except httpx.TransportError as exc:
        if assume_workers_down:
            return
        raise OfflineRefused(
            f"no Connect worker answered at {rest_url} ({type(exc).__name__}), which is what "
            "offline mode expects, but offsetd cannot tell a stopped worker from an unreachable "
            "one; pass --assume-workers-down once you have checked"
        ) from None
    finally:
        if http is None:
            client.close()
    if response.status_code == 404:
        return
    tasks = _tasks_of(response)
    if tasks is None:
        if force:
            return
        raise OfflineRefused(
            f"a Connect worker at {rest_url} answered {response.status_code} for connector "
            f"{connector}'s status, and offsetd cannot tell from that whether its tasks run; "
            "fix access or pass --force"
        )
    live = [
        f"task {t.get('id')} {t.get('state')}" for t in tasks if t.get("state") in LIVE_TASK_STATES
    ]
    if live and not force:
        raise OfflineRefused(
            f"connector {connector} has live tasks on a running worker ({', '.join(live)}), "
            "which would overwrite offline offsets: stop the connector (PUT "
            f"/connectors/{connector}/stop on Connect 3.5+) or its workers, or pass --force"
        )


def _tasks_of(response: httpx.Response) -> list[dict[str, Any]] | None:
    """The task list of a 200 status answer, or None when the answer says nothing usable."""
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        return None
    return tasks
