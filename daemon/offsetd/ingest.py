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
decoders on the owner's side judge the rest. So is a record too large for any frame: the internal
topic is created with `max.message.bytes` = `EVENTS_MAX_MESSAGE_BYTES` (8x the broker default, so
a status record with a long trace or a DLQ record with a long stack trace header passes whole),
the producer's `message.max.bytes` is derived from the topic's actual limit, and a record whose
frame would exceed it (sizes are exact, uncompressed: `events.frames.framed_size`) is counted as
malformed ("too large", with its coordinates and size, never its content) and skipped; its offset
is committed with its batch, so the stream moves on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from offsetd.events.decode import Malformed, RawRecord, raw_record
from offsetd.events.frames import (
    Router,
    decode_frame,
    encode_frame,
    frame_head_size,
    plan_frames,
    route_dlq,
    route_status,
    route_status_or_dlq,
)
from offsetd.events_topic import (
    EVENTS_MAX_MESSAGE_BYTES,
    KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
    IngestError,
    ensure_events_topic,
)
from offsetd.offsets.offline import FETCH_TUNING

if TYPE_CHECKING:
    from offsetd_native import Framer

try:  # the compiled framing (native/): built where Rust is, the same frames as the Python's
    from offsetd_native import Framer as _CompiledFramer

    COMPILED_FRAMER: type[Framer] | None = _CompiledFramer
except ImportError:  # an install without it (the demo's, the image's) frames in Python
    COMPILED_FRAMER = None

__all__ = [
    "EVENTS_MAX_MESSAGE_BYTES",
    "Ingest",
    "IngestError",
    "Source",
    "ensure_events_topic",
    "producer_message_limit",
]

log = logging.getLogger("offsetd.ingest")

_KEY_ALLOWANCE = 1024  # the frame's key (`<connect-cluster>/<connector>`) and record framing


@dataclass(frozen=True)
class Source:
    """A topic the ingest reads: its Connect cluster and how its records find their owner."""

    connect_cluster: str
    route: Router
    dlq: bool = False  # frame only the `__connect.errors.*` headers


def producer_message_limit(topic_max_message_bytes: int) -> int:
    """The producer's `message.max.bytes` for a topic with this `max.message.bytes`.

    The producer checks a message's uncompressed size; the broker checks the compressed batch
    (a lone large frame is a batch of its own: `batch.size` is 1 MB). lz4 may grow
    incompressible data (by at most n/255 + 16 bytes in its block format; gzip by ~0.03%), and
    the batch has its own header: keep that margin.
    """
    return topic_max_message_bytes - topic_max_message_bytes // 128 - 1024


# The routers the compiled framer knows; it calls back into the Python for any other.
_COMPILED_ROUTES: dict[Router, str] = {
    route_status: "status",
    route_dlq: "dlq",
    route_status_or_dlq: "status_or_dlq",
}


def _framer(sources: Mapping[str, Source], max_frame_bytes: int, max_record_bytes: int) -> Framer:
    assert COMPILED_FRAMER is not None
    return COMPILED_FRAMER(
        {
            topic: (s.connect_cluster, _COMPILED_ROUTES.get(s.route, "python"), s.dlq)
            for topic, s in sources.items()
        },
        max_frame_bytes,
        max_record_bytes,
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
        max_batch_records: int = 20_000,
        max_batch_bytes: int = 32 << 20,
        poll_s: float = 0.02,
        max_frame_bytes: int = 1024 * 1024,
        max_message_bytes: int = KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
        compression: str = "lz4",
        max_pending_batches: int = 4,
        on_malformed: Callable[[RawRecord, Malformed], None] | None = None,
        on_batch: Callable[[int, int], None] | None = None,
        on_lag: Callable[[str, int, int], None] | None = None,
        lag_every_s: float = 10.0,
        compiled: bool | None = None,
    ) -> None:
        self.sources = dict(sources)
        self.events_topic = events_topic
        self.batch = batch
        # In a storm (full batches back to back) up to this many records and bytes are framed
        # at once: fewer, larger frames (the owner's cost is per frame, bench/README.md)
        self.max_batch_records = max(max_batch_records, batch)
        self.max_batch_bytes = max_batch_bytes
        self.poll_s = poll_s  # the longest a lone record waits for its batch
        # frames of several records stay this small; one larger record travels alone
        self.max_frame_bytes = max_frame_bytes
        # the internal topic's `max.message.bytes` (`ensure_events_topic` says; set before
        # `start`): the producer's limit, and which records no frame can carry, follow from it
        self.max_message_bytes = max_message_bytes
        self._head_bytes = frame_head_size(self.sources)
        self.too_large = 0  # records skipped because no frame could carry them
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
            # lz4: the cheapest codec both librdkafka and aiokafka (with cramjam) speak
            "compression.type": compression,
            "partitioner": "murmur2_random",
        }
        self.max_pending_batches = max_pending_batches  # batches produced, not yet committed
        self._pending: deque[_Pending] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.records = 0
        self.frames = 0
        # Frame with the compiled framer (None: where it is installed; False: never).
        self.compiled = COMPILED_FRAMER is not None if compiled is None else compiled
        if self.compiled and COMPILED_FRAMER is None:
            raise IngestError("the compiled framer (offsetd-native) is not installed")
        self._framer: Framer | None = None

    @property
    def max_record_bytes(self) -> int:
        """The largest record (`framed_size`) a frame can carry to the internal topic."""
        producer_limit = producer_message_limit(self.max_message_bytes)
        return producer_limit - _KEY_ALLOWANCE - self._head_bytes

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
        producer = Producer(
            {
                **self._producer_conf,
                "message.max.bytes": producer_message_limit(self.max_message_bytes),
            }
        )
        if self.compiled:
            self._framer = _framer(self.sources, self.max_frame_bytes, self.max_record_bytes)
        try:
            consumer.subscribe(list(self.sources))
            next_lag = time.monotonic() + self.lag_every_s
            while not stop.is_set():
                batch = self._consume(consumer)
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

    def _consume(self, consumer: Consumer) -> list[Message]:
        """One batch: what `consume` brings within `poll_s` and, while it keeps coming back
        full (the topics hold more: a storm), more at once without waiting, up to
        `max_batch_records` and `max_batch_bytes` of values. Fewer, larger frames then; a quiet
        topic's records wait no longer than before."""
        batch = consumer.consume(num_messages=self.batch, timeout=self.poll_s)
        last, size = len(batch), sum(map(len, batch))
        while (
            last == self.batch
            and len(batch) + self.batch <= self.max_batch_records
            and size < self.max_batch_bytes
        ):
            more = consumer.consume(num_messages=self.batch, timeout=0)
            if not more:
                break
            batch += more
            last, size = len(more), size + sum(map(len, more))
        return batch

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

    def _skip(self, raw: RawRecord, bad: Malformed) -> None:
        if self.on_malformed is not None:
            self.on_malformed(raw, bad)
        else:
            log.warning("skipped a malformed record: %s", bad)

    def _too_large(self, raw: RawRecord, size: int, limit: int) -> None:
        """Count, log (coordinates and size, never the content) and skip one record."""
        self.too_large += 1
        reason = f"too large: {size} bytes framed, the internal topic takes at most {limit}"
        self._skip(raw, Malformed(reason, raw.topic, raw.partition, raw.offset))

    def _handle(self, batch: list[Message], consumer: Consumer, producer: Producer) -> None:
        if self._framer is not None:
            frames, positions = self._plan_compiled(batch, self._framer)
        else:
            frames, positions = self._plan(batch)
        # Skipped records are still in `positions`: committed with their batch, in order.
        pending = _Pending(len(frames), positions)
        self._pending.append(pending)
        sent = self._send_frames(frames, pending, producer)
        # No flush here: the next batch is consumed and framed while these are compressed and
        # acknowledged; batches are committed in order once all their frames are (`_commit`).
        producer.poll(0)
        self._commit(consumer)
        while len(self._pending) > self.max_pending_batches:
            producer.poll(0.05)
            self._commit(consumer)
        self.records += len(batch)
        self.frames += sent
        if self.on_batch is not None:
            self.on_batch(len(batch), sent)

    def _plan(
        self, batch: list[Message]
    ) -> tuple[deque[tuple[str, bytes]], dict[tuple[str, int], int]]:
        """The batch's frames (owner, value) and positions, framed by `events.frames`."""
        routed, positions = self._route(batch)
        max_record_bytes = self.max_record_bytes
        plan = plan_frames(
            routed,
            max_frame_bytes=self.max_frame_bytes,
            max_record_bytes=max_record_bytes,
            dlq_topics=self._dlq,
        )
        for raw, size in plan.too_large:
            self._too_large(raw, size, max_record_bytes)
        frames = deque(
            (owner, encode_frame(records, dlq_topics=self._dlq, encoded=encoded))
            for (owner, records), encoded in zip(plan.frames, plan.encoded, strict=True)
        )
        return frames, positions

    def _plan_compiled(
        self, batch: list[Message], framer: Framer
    ) -> tuple[deque[tuple[str, bytes]], dict[tuple[str, int], int]]:
        """`_plan` by the compiled framer (native/src/ingest): the same frames, byte for byte.
        The records it cannot route itself are routed here, so a refusal keeps its words."""
        sources = self.sources

        def route(index: int) -> str | None:
            raw = raw_record(batch[index], consumed=True)
            source = sources[raw.topic]
            try:
                return source.route(source.connect_cluster, raw)
            except Malformed as bad:
                if self.on_malformed is not None:
                    self.on_malformed(raw, bad)
                return None

        made, too_large, errors, positions = framer.plan(batch, route)
        for index in errors:
            err = batch[index].error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer error: %s", err.str())
        for index, size in too_large:
            self._too_large(raw_record(batch[index], consumed=True), size, self.max_record_bytes)
        return deque((owner, value) for owner, value, _count in made), positions

    def _route(
        self, batch: list[Message]
    ) -> tuple[list[tuple[str, RawRecord]], dict[tuple[str, int], int]]:
        """Each record with its owner, and the next position of every partition in the batch."""
        routed: list[tuple[str, RawRecord]] = []
        positions: dict[tuple[str, int], int] = {}
        sources = self.sources
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("consumer error: %s", err.str())
                continue
            raw = raw_record(msg, consumed=True)
            positions[(raw.topic, raw.partition)] = raw.offset + 1
            source = sources.get(raw.topic)
            if source is None:
                continue
            try:
                routed.append((source.route(source.connect_cluster, raw), raw))
            except Malformed as bad:
                if self.on_malformed is not None:
                    self.on_malformed(raw, bad)
        return routed, positions

    def _send_frames(
        self,
        frames: deque[tuple[str, bytes]],
        pending: _Pending,
        producer: Producer,
    ) -> int:
        """Produce every frame (asynchronously; `pending` counts their acknowledgements)."""

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            pending.outstanding -= 1
            if err is not None and pending.failure is None:
                pending.failure = err.str()

        sent = 0
        while frames:
            owner, value = frames.popleft()
            if self._send_frame(producer, owner, value, delivered):
                sent += 1
                continue
            # Refused before sending (no delivery report will come): only a frame over the
            # producer's limit, which the sizes above should rule out (a very long key). One
            # record alone is skipped; several are sent one by one, in order.
            pending.outstanding -= 1
            records = decode_frame(value)
            if len(records) == 1:
                limit = producer_message_limit(self.max_message_bytes)
                self._too_large(records[0], len(value), limit)
            else:
                pending.outstanding += len(records)
                frames.extendleft(
                    (owner, encode_frame([raw], dlq_topics=self._dlq)) for raw in reversed(records)
                )
        return sent

    def _send_frame(
        self,
        producer: Producer,
        owner: str,
        value: bytes,
        delivered: Callable[[KafkaError | None, Message], None],
    ) -> bool:
        """True once queued; False if the producer refuses it as too large."""
        while True:
            try:
                producer.produce(
                    self.events_topic, key=owner.encode(), value=value, on_delivery=delivered
                )
                return True
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.05)
            except KafkaException as exc:
                error = exc.args[0]
                if not (
                    isinstance(error, KafkaError) and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
                ):
                    raise
                return False
