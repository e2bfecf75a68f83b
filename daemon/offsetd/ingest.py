"""The ingest: Connect's topics -> one frame per connector and batch -> `<app_id>-events`.

Why not a faust agent: faust's aiokafka driver alone moves ~8k records/s on the development VM
(0.027x of a bare confluent-kafka loop; bench/README.md), with several event-loop turns and new
tasks per record. Here a confluent-kafka consumer in a thread takes batches
(`consume(num_messages=...)`, librdkafka fetching outside the GIL), routes each record to its
owner key (`<connect-cluster>/<connector>`, from its key or one header: `events.frames`), and
sends one internal record per owner key per batch, so the faust side (which keeps the Table)
handles tens of events per message.

At-least-once, as before: a batch's consumed offsets are committed only after every frame of it
is acknowledged (acks=all, idempotent producer), batches in order, while the next batches are
already being read (a flush per batch put gzip and the broker round trip on the critical path:
35k records/s for the ingest alone); after a crash the uncommitted batches are read again and
the owner's per-source high-water offsets skip what it already counted. Frames are
partitioned with murmur2 (`murmur2_random`, the Java client's and faust's partitioner), so each
connector keeps its partition of the internal topic, whose count is fixed in config.

A record that names no connector is counted, logged with its coordinates and skipped here; the
decoders on the owner's side judge the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.events.decode import Malformed, RawRecord, raw_record
from offsetd.events.frames import Router, encode_frame
from offsetd.offsets.offline import FETCH_TUNING

__all__ = ["Ingest", "IngestError", "Source", "ensure_events_topic"]

log = logging.getLogger("offsetd.ingest")


class IngestError(RuntimeError):
    """The ingest cannot go on (the internal topic is wrong, a produce was not acknowledged)."""


@dataclass(frozen=True)
class Source:
    """A topic the ingest reads: its Connect cluster and how its records find their owner."""

    connect_cluster: str
    route: Router
    dlq: bool = False  # frame only the `__connect.errors.*` headers


def ensure_events_topic(
    conf: Mapping[str, str], topic: str, partitions: int, replication: int, timeout_s: float = 30
) -> None:
    """Create the internal topic with exactly `partitions` partitions, or check it has them."""
    admin = AdminClient(dict(conf))
    metadata = admin.list_topics(timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None:
        future = admin.create_topics(
            [NewTopic(topic, partitions, replication)], operation_timeout=timeout_s
        )[topic]
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise IngestError(f"cannot create {topic}: {exc.args[0].str()}") from None
        return
    if len(found.partitions) != partitions:
        raise IngestError(
            f"{topic} has {len(found.partitions)} partitions, the config says {partitions}: "
            "one owner per connector needs the same count everywhere"
        )


@dataclass
class _Pending:
    """A batch whose frames are produced: how many are not acknowledged yet, where it ends."""

    outstanding: int
    positions: dict[tuple[str, int], int]
    failure: str | None = None


class Ingest:
    """Consume `sources` in batches, frame per owner key, produce, then commit. One thread."""

    def __init__(
        self,
        conf: Mapping[str, str],
        sources: Mapping[str, Source],
        events_topic: str,
        group_id: str,
        *,
        batch: int = 5000,
        poll_s: float = 0.02,
        max_frame_bytes: int = 256 * 1024,
        compression: str = "gzip",
        max_pending_batches: int = 4,
        on_malformed: Callable[[RawRecord, Malformed], None] | None = None,
        on_batch: Callable[[int, int], None] | None = None,
        on_lag: Callable[[str, int, int], None] | None = None,
        lag_every_s: float = 10.0,
    ) -> None:
        self.sources = dict(sources)
        self.events_topic = events_topic
        self.batch = batch
        self.poll_s = poll_s  # the longest a lone record waits for its batch
        # well below the producer's and broker's 1 MB message limit (sizes are estimates)
        self.max_frame_bytes = max_frame_bytes
        self.on_malformed = on_malformed
        self.on_batch = on_batch  # (records consumed, frames sent), after each commit
        self.on_lag = on_lag  # (topic, partition, records behind), every `lag_every_s`
        self.lag_every_s = lag_every_s
        self._dlq = frozenset(t for t, s in self.sources.items() if s.dlq)
        self._consumer_conf = {
            **FETCH_TUNING,
            **conf,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        self._producer_conf = {
            **conf,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": compression,  # faust (aiokafka) reads gzip without extras
            "compression.level": 1,  # gzip's fastest: traces still shrink ~8x
            "partitioner": "murmur2_random",
        }
        self.max_pending_batches = max_pending_batches  # batches produced, not yet committed
        self._pending: deque[_Pending] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.records = 0
        self.frames = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="offsetd-ingest", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            self.run(self._stop)
        except BaseException as exc:
            self.error = exc
            log.exception("the ingest stopped")

    def run(self, stop: threading.Event) -> None:
        """The loop (in the calling thread): until `stop` is set."""
        consumer = Consumer(self._consumer_conf)
        producer = Producer(self._producer_conf)
        try:
            consumer.subscribe(list(self.sources))
            next_lag = time.monotonic() + self.lag_every_s
            while not stop.is_set():
                batch = consumer.consume(num_messages=self.batch, timeout=self.poll_s)
                if batch:
                    self._handle(batch, consumer, producer)
                else:
                    producer.poll(0)
                    self._commit(consumer)
                if self.on_lag is not None and time.monotonic() >= next_lag:
                    next_lag = time.monotonic() + self.lag_every_s
                    self._report_lag(consumer)
        finally:
            producer.flush(10)
            try:
                self._commit(consumer)
            finally:
                consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        """Commit the consumed offsets of the oldest batches whose frames are all acknowledged.

        A frame that was not acknowledged stops the ingest with nothing more committed: the
        batch and those after it are read again after the restart (at-least-once)."""
        done: dict[tuple[str, int], int] = {}
        while self._pending and self._pending[0].outstanding <= 0:
            batch = self._pending.popleft()
            if batch.failure is not None:
                raise IngestError(
                    f"frames were not acknowledged by {self.events_topic}: {batch.failure}"
                )
            done.update(batch.positions)  # later batches have the later positions
        if done:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in done.items()],
                asynchronous=True,
            )

    def _report_lag(self, consumer: Consumer) -> None:
        """Records behind the high watermark (as last fetched: no request) per partition."""
        assert self.on_lag is not None
        for tp in consumer.position(consumer.assignment()):
            if tp.offset < 0:
                continue
            _low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                self.on_lag(tp.topic, tp.partition, max(high - tp.offset, 0))

    def _handle(self, batch: list[Message], consumer: Consumer, producer: Producer) -> None:
        # owner -> (its records, their size so far); frames stay below max_frame_bytes
        groups: dict[str, tuple[list[RawRecord], list[int]]] = {}
        frames: list[tuple[str, list[RawRecord]]] = []
        positions: dict[tuple[str, int], int] = {}
        sources = self.sources
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("consumer error: %s", err.str())
                continue
            raw = raw_record(msg)
            positions[(raw.topic, raw.partition)] = raw.offset + 1
            source = sources.get(raw.topic)
            if source is None:
                continue
            try:
                owner = source.route(source.connect_cluster, raw)
            except Malformed as bad:
                if self.on_malformed is not None:
                    self.on_malformed(raw, bad)
                continue
            size = len(raw.key or b"") + len(raw.value or b"") + 64
            for _name, data in raw.headers:
                size += len(data or b"") + 40
            group = groups.get(owner)
            if group is None:
                groups[owner] = group = ([], [0])
            elif group[1][0] + size > self.max_frame_bytes:
                frames.append((owner, group[0]))  # full: send it, start the next one
                groups[owner] = group = ([], [0])
            group[0].append(raw)
            group[1][0] += size
        frames.extend((owner, records) for owner, (records, _) in groups.items())
        pending = _Pending(len(frames), positions)
        self._pending.append(pending)

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            pending.outstanding -= 1
            if err is not None and pending.failure is None:
                pending.failure = err.str()

        for owner, records in frames:
            value = encode_frame(records, dlq_topics=self._dlq)
            while True:
                try:
                    producer.produce(
                        self.events_topic, key=owner.encode(), value=value, on_delivery=delivered
                    )
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.05)
        # No flush here: the next batch is consumed and framed while these are compressed and
        # acknowledged; batches are committed in order once all their frames are (`_commit`).
        producer.poll(0)
        self._commit(consumer)
        while len(self._pending) > self.max_pending_batches:
            producer.poll(0.05)
            self._commit(consumer)
        self.records += len(batch)
        self.frames += len(frames)
        if self.on_batch is not None:
            self.on_batch(len(batch), len(frames))
