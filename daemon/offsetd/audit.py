"""The audit topic: one JSON record per decision, keyed by its id (suppressed ones counted).

The topic is compacted and every decision id is deterministic, so a decision written twice (a
replay after a crash) collapses to one record, and the writer also skips ids it has seen.
Decisions are written with a wait until fully acknowledged (acks=all), so a planned decision is
in the audit before anything acts on it. Suppressed decisions are not written one by one: their
tally (`offsetd.engine.tally`: one per rule, connector, reason, incident and window) is written
again under its id as its count grows, and compaction keeps the latest count.

A frame that only changed tallies does not wait (`write_soon`): nothing acts on a tally, its
truth is the count in the connector's durable state, and an awaited write per frame made the
broker's round trip the daemon's pace in a DLQ storm. A tally whose write failed is written
again (its latest version) with the next write; after a restart the daemon writes the tallies
of the states it owns once more (`app.decider`), so a crash between the state and the audit
leaves no short count behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from offsetd.engine.decision import audit_json
from offsetd.errors import OffsetdError
from offsetd.kafkaaccess import raise_if_denied
from offsetd.topics import ensure_compacted_topic

__all__ = ["DEFAULT_TOPIC", "AuditError", "AuditLog", "ensure_topic", "read_records"]

DEFAULT_TOPIC = "offsetd.audit"

log = logging.getLogger("offsetd.audit")


class AuditError(OffsetdError):
    exit_code = 19


def ensure_topic(conf: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> None:
    """Create the audit topic (compacted, one partition: decisions in order) if missing."""
    ensure_compacted_topic(conf, topic, what="audit topic", error=AuditError, timeout_s=timeout_s)


def read_records(
    conf: Mapping[str, str], topic: str, timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """Every decision in the audit topic, oldest first (the latest version of each id)."""
    consumer = Consumer({**conf, "group.id": "offsetd-audit-reader", "enable.auto.commit": "false"})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        if topic in metadata.topics and metadata.topics[topic].error is not None:
            # not readable is not empty: a missing ACL must not look like no decisions
            raise_if_denied(metadata.topics[topic].error, conf, topic=("READ", topic))
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            return []
        by_id: dict[str, dict[str, Any]] = {}
        for partition in metadata.topics[topic].partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, partition), timeout_s)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            position = low
            deadline = time.monotonic() + timeout_s
            while position < high and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=1.0):
                    if msg.error() is not None:
                        raise_if_denied(msg.error(), conf, topic=("READ", topic))
                        continue
                    position = (msg.offset() or 0) + 1
                    _collect(msg, by_id)
        return sorted(by_id.values(), key=lambda r: (r.get("decided_at_ms", 0), r.get("id", "")))
    finally:
        consumer.close()


# A partition that is being led by no broker yet answers these for a moment (a topic just
# created, a leader moving): asked again until the deadline.
_NOT_YET_LED = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def _watermarks(consumer: Consumer, partition: TopicPartition, timeout_s: float) -> Any:
    """The partition's low and high watermarks. A topic just created is listed with a leader
    before that broker leads it: the daemon's first start failed on NOT_LEADER_FOR_PARTITION
    (seen in a fresh-clone run), so that answer is asked again, not raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=timeout_s)
        except KafkaException as exc:
            reason = exc.args[0] if exc.args else None
            code = reason.code() if isinstance(reason, KafkaError) else None
            if code not in _NOT_YET_LED or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _collect(msg: Message, by_id: dict[str, dict[str, Any]]) -> None:
    value = msg.value()
    if not isinstance(value, bytes):
        return
    try:
        record = json.loads(value)
    except ValueError:
        return
    if isinstance(record, dict) and isinstance(record.get("id"), str):
        by_id[record["id"]] = record


class AuditLog:
    """Writes decisions; remembers the ids already in the topic so none is written twice."""

    def __init__(self, conf: Mapping[str, str], topic: str = DEFAULT_TOPIC) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._producer = Producer(
            {**self._conf, "acks": "all", "enable.idempotence": "true", "linger.ms": "0"}
        )
        self._seen: set[str] = set()
        # tallies written by `write_soon`: id -> the latest value not yet acknowledged
        self._unconfirmed: dict[str, bytes] = {}
        self._failed: set[str] = set()  # ids whose latest write failed: written again
        self._lock = threading.Lock()  # delivery reports come from either writing thread

    @property
    def conf(self) -> dict[str, str]:
        return dict(self._conf)

    def start(self) -> None:
        ensure_topic(self._conf, self.topic)
        self._seen = {r["id"] for r in read_records(self._conf, self.topic)}

    def seen(self, decision_id: str) -> bool:
        return decision_id in self._seen

    async def write(self, record: dict[str, Any]) -> bool:
        """Write one decision record and wait for its acknowledgement; False if already there."""
        return (await self.write_many([record]))[0]

    async def write_many(
        self, records: list[dict[str, Any]], updates: Sequence[dict[str, Any]] = ()
    ) -> list[bool]:
        """Write several decision records in order with one wait for all acknowledgements.

        A frame of events can make dozens of decisions; one flush per decision made the audit
        the daemon's ceiling (~0.5 ms each). Each flag says whether that record was new; an id
        seen before (or twice in `records`) is written once. `updates` (the tallies of
        suppressed decisions) are records whose latest version replaces the one before under
        the same id: always written, after `records`, the last one per id.
        """
        return await self.write_many_encoded(
            [(str(record["id"]), audit_json(record)) for record in records],
            [(str(update["id"]), audit_json(update)) for update in updates],
        )

    async def write_many_encoded(
        self, records: Sequence[tuple[str, bytes]], updates: Sequence[tuple[str, bytes]] = ()
    ) -> list[bool]:
        """`write_many` of records already encoded as the audit writes them (id, bytes): what
        the compiled owner path hands over (`offsetd.engine.compiled`)."""
        fresh: list[tuple[str, bytes]] = []
        flags: list[bool] = []
        batch_ids: set[str] = set()
        for decision_id, value in records:
            new = decision_id not in self._seen and decision_id not in batch_ids
            flags.append(new)
            if new:
                batch_ids.add(decision_id)
                fresh.append((decision_id, value))
        fresh += dict(updates).items()
        if fresh:
            await asyncio.to_thread(self._write_sync, fresh)
            self._seen.update(batch_ids)
        return flags

    def write_soon(self, updates: Sequence[dict[str, Any]]) -> None:
        """Write tallies (records replaced under their id) without waiting for them.

        Queued to the producer at once (no I/O here); their acknowledgements are collected by
        later calls. A failed one is written again, its latest version, by the next call."""
        self.write_soon_encoded([(str(update["id"]), audit_json(update)) for update in updates])

    def write_soon_encoded(self, updates: Sequence[tuple[str, bytes]]) -> None:
        """`write_soon` of tallies already encoded as the audit writes them (id, bytes)."""
        latest = dict(updates)
        with self._lock:
            for update_id in self._failed - latest.keys():
                value = self._unconfirmed.get(update_id)
                if value is not None:
                    latest[update_id] = value
            if self._failed:
                log.warning(
                    "writing %d tally record(s) again after a failed write", len(self._failed)
                )
            self._failed.clear()
            self._unconfirmed.update(latest)
        for update_id, value in latest.items():
            self._produce(update_id, value, self._confirm(update_id, value))
        self._producer.poll(0)  # delivery reports of earlier writes

    @property
    def unconfirmed(self) -> int:
        """Tally records written by `write_soon` and not acknowledged yet."""
        with self._lock:
            return len(self._unconfirmed)

    def _confirm(self, update_id: str, value: bytes) -> Any:
        def delivered(err: KafkaError | None, _msg: Message) -> None:
            with self._lock:
                if self._unconfirmed.get(update_id) is not value:
                    return  # a later version is on its way: it decides
                if err is None:
                    del self._unconfirmed[update_id]
                    return
                self._failed.add(update_id)
            log.error("the audit did not take tally %s: %s", update_id, err.str())

        return delivered

    def _produce(self, key: str, value: bytes, on_delivery: Any) -> None:
        while True:
            try:
                self._producer.produce(
                    self.topic, key=key.encode(), value=value, on_delivery=on_delivery
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.1)

    def _write_sync(self, items: list[tuple[str, bytes]], timeout_s: float = 30.0) -> None:
        errors: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        for key, value in items:
            self._produce(key, value, on_delivery)
        remaining = self._producer.flush(timeout_s)
        if errors:
            raise_if_denied(errors[0], self._conf, topic=("WRITE", self.topic))
        if remaining or errors:
            first = items[0][0] if len(items) == 1 else f"{items[0][0]} (+{len(items) - 1} more)"
            raise AuditError(
                f"decision {first} was not acknowledged by the audit topic {self.topic}: "
                f"{errors[0].str() if errors else 'timed out'}"
            )

    def close(self) -> None:
        self._producer.flush(10)
