"""Reading the offsets topic offline: every partition from the beginning to the end offsets
taken at the start (assigned, no group membership, no commits), folded into an `OffsetsView`
(`view`): the latest offset of every logical partition, the key bytes and topic partition it
lives in, conflicts, malformed records, optionally the whole history.
"""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Mapping
from typing import cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.offline.view import (
    OfflineError,
    OffsetsView,
    RawRecord,
    build_view,
)

__all__ = ["FETCH_TUNING", "offline_consumer", "partitions_of", "read_offsets"]

FETCH_TUNING = {"fetch.queue.backoff.ms": "10", "max.partition.fetch.bytes": str(8 << 20)}

_RETRIABLE_READ_ERRORS = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


def offline_consumer(conf: Mapping[str, str]) -> Consumer:
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


def partitions_of(
    client: Consumer, topic: str, timeout_s: float, conf: Mapping[str, str]
) -> list[int]:
    metadata = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is not None and metadata.error is not None:
        raise_if_denied(metadata.error, conf, topic=("READ", topic))
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
    consumer = offline_consumer(conf)
    collecting = gc.isenabled()
    gc.disable()  # a million short-lived Messages would trigger thousands of collections
    try:
        try:
            partitions = partitions_of(consumer, topic, min(timeout_s, 30.0), conf)
            ends: dict[int, int] = {}
            for p in partitions:
                _low, ends[p] = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=min(timeout_s, 30.0), cached=False
                )
            reader = _Reader(topic, ends, history, conf)
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

    def __init__(
        self, topic: str, ends: Mapping[int, int], history: bool, conf: Mapping[str, str]
    ) -> None:
        self.topic = topic
        self.conf = conf  # names the principal when the broker refuses a fetch
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
                raise_if_denied(err, self.conf, topic=("READ", self.topic))
                raise OfflineError(f"reading {self.topic} failed: {err.str()}")
        return records

    def records(self) -> list[RawRecord]:
        if self.history:
            return self.log
        return [
            RawRecord(p, cast(int, m.offset()), _timestamp(m), key, m.value())
            for (p, key), m in self.latest.items()
        ]
