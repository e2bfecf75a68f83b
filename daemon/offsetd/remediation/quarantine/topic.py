"""The quarantine topic: created to keep records forever, a mark per saga, and exactly one
copy of a record per saga, found again after a crash by scanning from the mark (the package's
docstring).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.config import Settings
from offsetd.errors import OffsetdError
from offsetd.events.models import RecordRef
from offsetd.kafkaaccess import raise_if_denied
from offsetd.recordchecks import (
    KafkaRecord,
)
from offsetd.remediation.quarantine_format import (
    H_ORIGINAL_HEADERS,
    H_QUARANTINED_AT,
    H_SAGA_KEY,
    H_TIMESTAMP_TYPE,
    TIMESTAMP_NAMES,
    QuarantineRef,
    context_headers,
    partition_for,
)
from offsetd.remediation.records import read_record

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_TOPIC",
    "Quarantine",
    "QuarantineFailed",
    "durable_producer",
]

DEFAULT_TOPIC = "offsetd.quarantine"
DEFAULT_PARTITIONS = 3


def durable_producer(conf: Mapping[str, str], timeout_s: float, *, linger_ms: int) -> Producer:
    """A producer for quarantine copies: acknowledged by every in-sync replica, never duplicated
    by its own retries, and given up on after `timeout_s` so the caller can fail closed."""
    return Producer(
        {
            **conf,
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": str(linger_ms),
            "message.timeout.ms": str(int(timeout_s * 1000)),
        }
    )


class QuarantineFailed(OffsetdError):
    """The record could not be copied (or read, or found): the skip must not go on."""

    exit_code = 40


class Quarantine:
    """Copies records to the quarantine topic, once per saga (see the module docstring).

    Blocking calls (the saga runs them in a thread). `conf` is the daemon's Kafka cluster,
    `source_conf` the cluster the records are read from (a sink's consumer cluster; see
    `offsetd.remediation.locate.source_config`), needed only by `copy_once` with coordinates.
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str = DEFAULT_TOPIC,
        *,
        source_conf: Mapping[str, str] | None = None,
        partitions: int = DEFAULT_PARTITIONS,
        timeout_s: float = 30.0,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._source_conf = dict(source_conf) if source_conf is not None else None
        self._partitions = partitions
        self._timeout_s = timeout_s
        self._now_ms = now_ms
        self._producer: Producer | None = None
        # The partition count once the topic is known, and one consumer for end offsets,
        # shared by the daemon's sagas (threads): ~0.1 s per remediation otherwise.
        self._known_partitions: int | None = None
        self._offsets_consumer: Consumer | None = None
        self._offsets_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, settings: Settings, source_conf: Mapping[str, str] | None = None
    ) -> Quarantine:
        kafka = settings.kafka_clusters[settings.daemon_kafka_cluster()]
        return cls(
            kafka.client_config(), settings.remediation.quarantine_topic, source_conf=source_conf
        )

    def ensure_topic(self) -> int:
        """Create the topic if missing (not compacted, no time limit); returns its partitions."""
        if self._known_partitions is None:
            self._known_partitions = self._ensure_topic()
        return self._known_partitions

    def _ensure_topic(self) -> int:
        admin = AdminClient(dict(self._conf))
        try:
            metadata = admin.list_topics(timeout=self._timeout_s)
            existing = metadata.topics.get(self.topic)
            if existing is not None and existing.error is None:
                return len(existing.partitions)
            replicas = min(3, len(metadata.brokers)) or 1
            config = {
                "cleanup.policy": "delete",
                "retention.ms": "-1",
                "message.timestamp.type": "CreateTime",
            }
            if replicas > 1:
                config["min.insync.replicas"] = "2"
            future = admin.create_topics(
                [NewTopic(self.topic, self._partitions, replicas, config=config)],
                operation_timeout=self._timeout_s,
            )[self.topic]
            try:
                future.result(timeout=self._timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            return self._partition_count()
        except KafkaException as exc:
            raise QuarantineFailed(
                f"cannot create the quarantine topic {self.topic}: {exc.args[0].str()}"
            ) from None

    def mark(self, saga_key: str) -> dict[str, int]:
        """`{"partition", "offset"}`: where this saga's copy will land, and that partition's end
        now. Store it durably before copying; `find_copy` searches from it."""
        partitions = self.ensure_topic()
        partition = partition_for(saga_key, partitions)
        _low, high = self._watermarks(partition)
        return {"partition": partition, "offset": high}

    def find_copy(self, saga_key: str, mark: Mapping[str, int]) -> QuarantineRef | None:
        """The copy made for `saga_key` after `mark`, if one was acknowledged."""
        wanted = saga_key.encode()
        for msg in self._scan(int(mark["partition"]), int(mark["offset"])):
            if _last_header(msg, H_SAGA_KEY) == wanted:
                return QuarantineRef(self.topic, int(msg.partition() or 0), int(msg.offset() or 0))
        return None

    def copy(
        self,
        saga_key: str,
        mark: Mapping[str, int],
        record: KafkaRecord,
        context: Mapping[str, str],
    ) -> QuarantineRef:
        """Copy `record` into the mark's partition; returns once acks=all acknowledged it."""
        headers: list[tuple[str, str | bytes | None]] = [
            *record.headers,
            *context_headers(record, context),
            (H_SAGA_KEY, saga_key.encode()),
            (H_QUARANTINED_AT, str(self._now_ms()).encode()),
            (H_TIMESTAMP_TYPE, TIMESTAMP_NAMES.get(record.timestamp_type, "none").encode()),
            (H_ORIGINAL_HEADERS, str(len(record.headers)).encode()),
        ]
        has_time = record.timestamp_type in TIMESTAMP_NAMES and record.timestamp_ms >= 0
        refs: list[QuarantineRef] = []
        errors: list[str] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                refs.append(
                    QuarantineRef(self.topic, int(msg.partition() or 0), int(msg.offset() or 0))
                )

        producer = self._get_producer()
        try:
            producer.produce(
                self.topic,
                key=record.key,
                value=record.value,
                headers=headers,
                partition=int(mark["partition"]),
                # A LogAppendTime cannot be set by a producer: its value is kept as CreateTime.
                timestamp=record.timestamp_ms if has_time else 0,
                on_delivery=on_delivery,
            )
            remaining = producer.flush(self._timeout_s)
        except (KafkaException, BufferError) as exc:
            errors.append(str(exc.args[0]) if exc.args else type(exc).__name__)
            remaining = 0
        if remaining or errors or not refs:
            raise QuarantineFailed(
                f"the record {record.coordinates} was not copied to quarantine topic "
                f"{self.topic}: {errors[0] if errors else 'not acknowledged in time'}"
            )
        return refs[0]

    def copy_once(
        self,
        saga_key: str,
        mark: Mapping[str, int],
        record: Mapping[str, Any] | KafkaRecord,
        context: Mapping[str, str],
        *,
        source_conf: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """`find_copy`, else read the record (if given as coordinates, from `source_conf` or the
        constructor's) and `copy` it. Returns the copy's ref as JSON (for the saga record)."""
        found = self.find_copy(saga_key, mark)
        if found is not None:
            return found.as_dict()
        if not isinstance(record, KafkaRecord):
            record = self._read(record, source_conf or self._source_conf)
        return self.copy(saga_key, mark, record, context).as_dict()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout_s)
            self._producer = None
        with self._offsets_lock:
            if self._offsets_consumer is not None:
                self._offsets_consumer.close()
                self._offsets_consumer = None

    # -- plumbing -------------------------------------------------------------------------------

    def _read(
        self, coordinates: Mapping[str, Any], source_conf: Mapping[str, str] | None
    ) -> KafkaRecord:
        ref = RecordRef(
            topic=str(coordinates["topic"]),
            partition=int(coordinates["partition"]),
            offset=int(coordinates["offset"]),
        )
        where = f"{ref.topic}-{ref.partition}@{ref.offset}"
        if source_conf is None:
            raise QuarantineFailed(f"cannot read {where}: its Kafka cluster was not given")
        try:
            found = read_record(source_conf, ref, timeout_s=self._timeout_s)
        except OffsetdError as exc:
            raise QuarantineFailed(f"cannot read the record to quarantine: {exc}") from None
        if found is None:
            raise QuarantineFailed(f"there is no record at {where} to quarantine")
        return found

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = durable_producer(self._conf, self._timeout_s, linger_ms=0)
        return self._producer

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                **self._conf,
                "group.id": "offsetd-quarantine-reader",  # assign only: never joins or commits
                "enable.auto.commit": "false",
                "auto.offset.reset": "earliest",
            }
        )

    def _partition_count(self) -> int:
        """The partitions of a topic just created (or created by someone else a moment ago): a
        broker may not list it for a few milliseconds after CreateTopics answered."""
        consumer = self._consumer()
        deadline = time.monotonic() + self._timeout_s
        try:
            while True:
                metadata = consumer.list_topics(self.topic, timeout=self._timeout_s)
                topic = metadata.topics.get(self.topic)
                if topic is not None and topic.error is None and topic.partitions:
                    return len(topic.partitions)
                if time.monotonic() >= deadline:
                    raise QuarantineFailed(f"the quarantine topic {self.topic} has no partitions")
                time.sleep(0.05)
        finally:
            consumer.close()

    def _watermarks(self, partition: int) -> tuple[int, int]:
        # Right after the topic is created its partitions may have no leader yet: retry a while.
        deadline = time.monotonic() + self._timeout_s
        with self._offsets_lock:
            if self._offsets_consumer is None:
                self._offsets_consumer = self._consumer()
            consumer = self._offsets_consumer
            while True:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(self.topic, partition), timeout=self._timeout_s
                    )
                    return int(low), int(high)
                except KafkaException as exc:
                    raise_if_denied(exc, self._conf, topic=("READ", self.topic))
                    if time.monotonic() > deadline:
                        raise QuarantineFailed(
                            f"cannot read the end of {self.topic}-{partition}: {exc.args[0].str()}"
                        ) from None
                    time.sleep(0.2)

    def _scan(self, partition: int, start: int) -> Iterator[Message]:
        """Every record of one partition from `start` to its end as of now."""
        _low, high = self._watermarks(partition)
        if start >= high:
            return
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(self.topic, partition, start)])
            position = start
            deadline = time.monotonic() + self._timeout_s
            while position < high:
                if time.monotonic() > deadline:
                    raise QuarantineFailed(
                        f"timed out reading {self.topic}-{partition} from {start} to {high}"
                    )
                for msg in consumer.consume(500, timeout=0.5):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise_if_denied(error, self._conf, topic=("READ", self.topic))
                        raise QuarantineFailed(
                            f"cannot read {self.topic}-{partition}: {error.str()}"
                        )
                    position = int(msg.offset() or 0) + 1
                    yield msg
        finally:
            consumer.close()


def _last_header(msg: Message, name: str) -> bytes | None:
    raw = msg.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    found: bytes | None = None
    for key, value in pairs:
        if key == name and isinstance(value, bytes):
            found = value
    return found
