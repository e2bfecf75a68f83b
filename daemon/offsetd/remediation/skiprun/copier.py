"""Copying a skip-run's records, whole, to the skip saga's quarantine topic, exactly once.

Every copy of one plan carries the same key (`offsetd.saga.key` = `skip-run/<connector>/<plan
hash>`), and all of them go to the one quarantine partition that key chooses. Before copying,
that partition is read for copies already made with the key, and only the records not there yet
are copied; a second application (or one after a crash halfway through the copies) adds
nothing twice and loses nothing. Blocking Kafka clients: run in a thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.errors import ConfigError, OffsetdError
from offsetd.offsets.location import WorkerView, resolve_location
from offsetd.offsets.model import ConnectorKind
from offsetd.recordchecks import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaRecord,
)
from offsetd.remediation.quarantine import Quarantine, QuarantineFailed, durable_producer
from offsetd.remediation.quarantine_format import (
    H_OFFSET,
    H_ORIGINAL_HEADERS,
    H_PARTITION,
    H_QUARANTINED_AT,
    H_SAGA_KEY,
    H_TIMESTAMP_TYPE,
    H_TOPIC,
    context_headers,
)
from offsetd.remediation.records import read_records, to_record
from offsetd.remediation.skiprun.job import Coordinates, SkippedRun, SkipRunJob

__all__ = ["CopyResult", "RunCopier", "copier_for", "copy_headers"]

_TIMESTAMP_NAMES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def copy_headers(
    record: KafkaRecord, key: str, context: Mapping[str, str], now_ms: int
) -> list[tuple[str, str | bytes | None]]:
    """The headers of a quarantine copy, exactly as `Quarantine.copy` writes them: the record's
    own, then its coordinates and the context, then offsetd's saga key and bookkeeping."""
    return [
        *record.headers,
        *context_headers(record, context),
        (H_SAGA_KEY, key.encode()),
        (H_QUARANTINED_AT, str(now_ms).encode()),
        (H_TIMESTAMP_TYPE, _TIMESTAMP_NAMES.get(record.timestamp_type, "none").encode()),
        (H_ORIGINAL_HEADERS, str(len(record.headers)).encode()),
    ]


@dataclass(frozen=True)
class CopyResult:
    topic: str
    partition: int
    copied: int
    already: int  # copies an earlier application of the same plan made

    def describe(self) -> str:
        again = f" ({self.already:,} already there)" if self.already else ""
        return (
            f"quarantined {self.copied + self.already:,} records to "
            f"{self.topic}-{self.partition}{again}"
        )


class RunCopier:
    """Copies the runs of a skip-run plan to the quarantine topic. Blocking: run it in a thread.

    `conf` is the Kafka cluster of the quarantine topic (the daemon's), `source_conf` the
    cluster the connector reads (where the runs are).
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str,
        source_conf: Mapping[str, str],
        *,
        timeout_s: float = 30.0,
        chunk: int = 5_000,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._source_conf = dict(source_conf)
        self._timeout_s = timeout_s
        self._chunk = chunk
        self._now_ms = now_ms
        self._producer: Producer | None = None

    def copy(self, job: SkipRunJob, context: Mapping[str, str]) -> CopyResult:
        """Every record of every run in quarantine (acknowledged), or QuarantineFailed."""
        try:
            partition, end = self.target_partition(job.key)
            done = self.existing_copies(partition, end, job.key)
            copied = already = 0
            for run in job.runs:
                new, old = self._copy_run(job, run, partition, done, context)
                copied, already = copied + new, already + old
            return CopyResult(self.topic, partition, copied, already)
        finally:
            self.close()

    def _copy_run(
        self,
        job: SkipRunJob,
        run: SkippedRun,
        partition: int,
        done: set[Coordinates],
        context: Mapping[str, str],
    ) -> tuple[int, int]:
        position, seen, copied, already = run.first, 0, 0, 0
        first_seen: int | None = None
        while seen < run.records:
            chunk = [
                r
                for r in self.read_chunk(
                    run.topic, run.partition, position, min(self._chunk, run.records - seen)
                )
                if r.offset <= run.last
            ]
            if not chunk:
                break
            if first_seen is None:
                first_seen = chunk[0].offset
                if first_seen != run.first:
                    break  # its first record is gone: copy none of it
            seen += len(chunk)
            position = chunk[-1].offset + 1
            todo = [r for r in chunk if (r.topic, r.partition, r.offset) not in done]
            already += len(chunk) - len(todo)
            if todo:
                self.produce(partition, job.key, todo, context)
                copied += len(todo)
        if seen != run.records or first_seen != run.first or position != run.last + 1:
            raise QuarantineFailed(
                f"the run {run.describe()} cannot be quarantined whole: the partition no longer "
                f"holds exactly those records (first found: {first_seen}, records up to "
                f"{run.last}: {seen:,}); retention or compaction changed it since the plan was "
                "computed"
            )
        return copied, already

    # -- Kafka (overridden in unit tests) --------------------------------------------------------

    def target_partition(self, key: str) -> tuple[int, int]:
        """The quarantine partition of `key` (the topic is created if missing) and its end."""
        quarantine = Quarantine(self._conf, self.topic, timeout_s=self._timeout_s)
        try:
            mark = quarantine.mark(key)
        finally:
            quarantine.close()
        return int(mark["partition"]), int(mark["offset"])

    def existing_copies(self, partition: int, end: int, key: str) -> set[Coordinates]:
        """Original coordinates of the copies already in `partition` (before `end`) for `key`."""
        found: set[Coordinates] = set()
        if end <= 0:
            return found
        wanted = key.encode()
        consumer = Consumer(
            {
                **self._conf,
                "group.id": "offsetd-quarantine-reader",  # assign only: never joins or commits
                "enable.auto.commit": "false",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": "true",
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, partition, 0)])
            position = 0
            deadline = time.monotonic() + max(self._timeout_s, 60.0)
            while position < end:
                if time.monotonic() > deadline:
                    raise QuarantineFailed(
                        f"timed out reading {self.topic}-{partition} for earlier copies of {key}"
                    )
                for msg in consumer.consume(1000, timeout=0.5):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            position = end
                            break
                        raise QuarantineFailed(
                            f"cannot read {self.topic}-{partition}: {error.str()}"
                        )
                    position = int(msg.offset() or 0) + 1
                    coordinates = _copy_of(msg, wanted)
                    if coordinates is not None:
                        found.add(coordinates)
        except KafkaException as exc:
            raise QuarantineFailed(f"cannot read {self.topic}-{partition}: {exc}") from None
        finally:
            consumer.close()
        return found

    def read_chunk(self, topic: str, partition: int, start: int, limit: int) -> list[KafkaRecord]:
        try:
            return read_records(
                self._source_conf, topic, partition, start, limit, timeout_s=self._timeout_s
            )
        except OffsetdError as exc:
            raise QuarantineFailed(f"cannot read the run to quarantine: {exc}") from None

    def produce(
        self, partition: int, key: str, records: Sequence[KafkaRecord], context: Mapping[str, str]
    ) -> None:
        """Copy `records` into `partition`; returns once all were acknowledged (acks=all)."""
        errors: list[str] = []
        acked = 0

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal acked
            if err is not None:
                errors.append(err.str())
            else:
                acked += 1

        producer = self._get_producer()
        now = self._now_ms()
        try:
            for record in records:
                has_time = record.timestamp_type in _TIMESTAMP_NAMES and record.timestamp_ms >= 0
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            key=record.key,
                            value=record.value,
                            headers=copy_headers(record, key, context, now),
                            partition=partition,
                            timestamp=record.timestamp_ms if has_time else 0,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:  # the local queue is full: let it drain
                        producer.poll(0.5)
            remaining = producer.flush(self._timeout_s)
        except KafkaException as exc:
            errors.append(str(exc.args[0]) if exc.args else type(exc).__name__)
            remaining = 0
        if remaining or errors or acked != len(records):
            first, last = records[0], records[-1]
            raise QuarantineFailed(
                f"{len(records) - acked:,} of the records {first.coordinates}..{last.offset} were "
                f"not copied to quarantine topic {self.topic}: "
                f"{errors[0] if errors else 'not acknowledged in time'}"
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout_s)
            self._producer = None

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = durable_producer(self._conf, self._timeout_s, linger_ms=5)
        return self._producer


def _copy_of(msg: Message, key: bytes) -> Coordinates | None:
    """The original coordinates of a quarantine copy made with `key` (None: another copy)."""
    record = to_record(msg)
    last: dict[str, bytes | None] = {}
    for name, value in record.headers:  # ours come after the record's own: the last one wins
        last[name] = value
    if last.get(H_SAGA_KEY) != key:
        return None
    topic, partition, offset = last.get(H_TOPIC), last.get(H_PARTITION), last.get(H_OFFSET)
    if topic is None or partition is None or offset is None:
        return None
    try:
        return topic.decode(), int(partition), int(offset)
    except ValueError:
        return None


async def copier_for(
    settings: Settings | None,
    client: ConnectClient,
    worker: WorkerView,
    connector: str,
    kind: ConnectorKind,
) -> tuple[RunCopier, str]:
    """The copier for `connector`'s runs, and where the copies go (for people).

    Copies go to `remediation.quarantine_topic` on the daemon's Kafka cluster, as the skip
    saga's; the runs are read from the cluster the connector reads. Writes nothing.
    """
    if settings is None:
        raise ConfigError(
            "applying a skip-run plan quarantines its runs first, which needs the daemon's Kafka "
            "cluster from offsetd.yaml: pass --config; nothing was changed"
        )
    try:
        alias = settings.daemon_kafka_cluster()
    except ConfigError as exc:
        raise ConfigError(
            f"applying a skip-run plan quarantines its runs first: {exc}; nothing was changed"
        ) from None
    info = await client.info(connector)
    location = resolve_location(connector, info.config, kind, worker, settings)
    if location.data_cluster is None:
        raise ConfigError(
            f"cannot tell which Kafka cluster {connector}'s records are on, so its skip-run "
            "cannot be quarantined: set kafka_cluster for the Connect cluster in offsetd.yaml"
        )
    topic = settings.remediation.quarantine_topic
    copier = RunCopier(
        settings.kafka_clusters[alias].client_config(),
        topic,
        location.data_cluster.client_config(settings),
    )
    return copier, f"quarantine topic {topic} on Kafka cluster {alias}"
