"""The audit topic: one JSON record per decision, keyed by its id (suppressed ones counted).

The topic is compacted and every decision id is deterministic, so a decision written twice (a
replay after a crash) collapses to one record, and the writer also skips ids it has seen. Writes
are awaited until fully acknowledged (acks=all), so a decision is in the audit before the daemon
moves on. Suppressed decisions are not written one by one: their tally (`offsetd.engine.tally`:
one per rule, connector, reason, incident and window) is written again under its id as its count
grows, and compaction keeps the latest count.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from offsetd.errors import OffsetdError
from offsetd.kafkaaccess import raise_if_denied
from offsetd.topics import ensure_compacted_topic

__all__ = ["DEFAULT_TOPIC", "AuditError", "AuditLog", "ensure_topic", "read_records"]

DEFAULT_TOPIC = "offsetd.audit"


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
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
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
        fresh: list[tuple[str, bytes]] = []
        flags: list[bool] = []
        batch_ids: set[str] = set()
        for record in records:
            decision_id = str(record["id"])
            new = decision_id not in self._seen and decision_id not in batch_ids
            flags.append(new)
            if new:
                batch_ids.add(decision_id)
                fresh.append((decision_id, json.dumps(record).encode()))
        latest = {str(update["id"]): update for update in updates}
        fresh += [(update_id, json.dumps(update).encode()) for update_id, update in latest.items()]
        if fresh:
            await asyncio.to_thread(self._write_sync, fresh)
            self._seen.update(batch_ids)
        return flags

    def _write_sync(self, items: list[tuple[str, bytes]], timeout_s: float = 30.0) -> None:
        errors: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        for key, value in items:
            while True:
                try:
                    self._producer.produce(
                        self.topic, key=key.encode(), value=value, on_delivery=on_delivery
                    )
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    self._producer.poll(0.1)
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
