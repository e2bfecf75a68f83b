"""The guard state that must outlive the daemon: pause, breakers, approvals, skips, opt-outs.

It lives in a compacted topic (`remediation.control_topic`, one partition, on the daemon's Kafka
cluster), one JSON record per key, because a budget or a breaker kept in memory is forgotten by a
restart, and an operator's `offsetd pause` must reach every daemon process. Keys::

    pause                               the global pause (paused or not, who, when, why)
    breaker/<cluster>/<connector>       a breaker, open or reset
    approval/<decision id>              pending, approved or rejected, with the decision's summary
    skips/<cluster>/<connector>         the recent skip times (the whole list: compaction keeps it)
    optout/<cluster>/<connector>        a per-connector opt-out, set or lifted

Records are never deleted by offsetd: lifting a pause or resetting a breaker writes a record that
says who did it and when, so the topic is also the trail of operator actions. Every write is a
produce with acks=all that is awaited until acknowledged; a write that is not acknowledged raises,
and the caller must not act as if it happened.

`ControlState` (in `control_state`) is pure: built from records, queried by the guards;
`ControlStore` here does the I/O.
The running daemon calls `catch_up()` before each decision, which reads only what is new, so an
`offsetd approve` typed in another shell takes effect at the next decision.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from offsetd.config import Settings
from offsetd.errors import ControlStoreUnavailable
from offsetd.kafkaaccess import raise_if_denied
from offsetd.kafkalogin import checked_config
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.remediation.control_state import (
    Approval,
    ControlRecord,
    ControlState,
    approval_record,
    breaker_record,
    optout_record,
    pause_record,
    skips_record,
)
from offsetd.retry import doubling, retry_blocking
from offsetd.topics import ensure_compacted_topic

__all__ = ["ControlStore", "ensure_topic", "publish_gauges"]


def _kafka_retriable(exc: BaseException) -> bool:
    reason = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(reason, KafkaError) and reason.retriable()


def ensure_topic(conf: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> None:
    """Create the control topic if missing: compacted, one partition (one order for all keys)."""
    ensure_compacted_topic(
        conf, topic, what="control topic", error=ControlStoreUnavailable, timeout_s=timeout_s
    )


class ControlStore:
    """Reads and writes the control topic; keeps the folded `ControlState`.

    Not shared between threads: the async wrappers run the blocking calls in a worker thread
    one at a time (a lock serialises them).
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str,
        *,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._clock = clock
        self._timeout_s = timeout_s
        self._state = ControlState()
        self._position = 0  # next offset to read in partition 0
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> ControlStore:
        """The store on the daemon's Kafka cluster (`Settings.daemon_kafka_cluster()`)."""
        conf = checked_config(settings, settings.daemon_kafka_cluster())
        return cls(conf, settings.remediation.control_topic)

    @property
    def state(self) -> ControlState:
        return self._state

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> ControlState:
        """Create the topic if needed and read it whole, from the beginning."""
        with self._lock:
            ensure_topic(self._conf, self.topic, self._timeout_s)
            self._state = ControlState()
            self._position = 0
            self._read_to_end()
            return self._state

    def catch_up(self) -> ControlState:
        """Read only the records written since the last read (by anyone, any process)."""
        with self._lock:
            if self._consumer is None:
                ensure_topic(self._conf, self.topic, self._timeout_s)
            self._read_to_end()
            return self._state

    async def aload(self) -> ControlState:
        return await asyncio.to_thread(self.load)

    async def acatch_up(self) -> ControlState:
        return await asyncio.to_thread(self.catch_up)

    def _consumer_for_reading(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **self._conf,
                    "group.id": "offsetd-control-reader",  # never committed: assign() only
                    "enable.auto.commit": "false",
                    "enable.partition.eof": "false",
                    # catch_up runs before every decision: a fetch the broker holds open
                    # (default 500 ms) would delay the next watermark request by that much
                    "fetch.wait.max.ms": "20",
                }
            )
        return self._consumer

    def _read_to_end(self) -> None:
        consumer = self._consumer_for_reading()
        partition = TopicPartition(self.topic, 0)
        try:
            # A topic just made can answer NOT_LEADER for a moment after its leader shows in the
            # metadata (another worker may have created it): librdkafka marks that retriable.
            low, high = retry_blocking(
                lambda: consumer.get_watermark_offsets(
                    partition, timeout=self._timeout_s, cached=False
                ),
                doubling(0.1, 1.0, 8),
                retriable=_kafka_retriable,
            )
        except KafkaException as exc:
            raise_if_denied(exc, self._conf, topic=("READ", self.topic))
            raise ControlStoreUnavailable(
                f"cannot read control topic {self.topic}: {_kafka_text(exc)}"
            ) from None
        start = max(self._position, low)
        if start >= high:
            self._position = max(self._position, high)
            return
        consumer.assign([TopicPartition(self.topic, 0, start)])
        position = start
        deadline = time.monotonic() + self._timeout_s
        while position < high:
            if time.monotonic() > deadline:
                raise ControlStoreUnavailable(
                    f"timed out reading control topic {self.topic} (at offset {position} of {high})"
                )
            # poll, not consume(n): consume waits for n records or its timeout, and a
            # compacted topic has fewer records than offsets
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                raise_if_denied(msg.error(), self._conf, topic=("READ", self.topic))
            if msg is None or msg.error() is not None:
                continue
            position = max(position, (msg.offset() or 0) + 1)
            self._fold(msg)
        # stop fetching in the background: a pending long-poll fetch would delay the next
        # catch_up's watermark request by fetch.wait.max.ms
        consumer.unassign()
        self._position = position

    def _fold(self, msg: Message) -> None:
        key = msg.key()
        if not isinstance(key, bytes):
            self._state.ignored += 1
            return
        raw = msg.value()
        value: Any = None
        if raw is not None:
            try:
                value = json.loads(raw)
            except ValueError:
                self._state.ignored += 1
                return
            if not isinstance(value, dict):
                self._state.ignored += 1
                return
        self._state.apply(key.decode(errors="replace"), value)

    # -- writing --------------------------------------------------------------------------------

    def write(self, record: ControlRecord) -> None:
        """Produce one record (acks=all) and wait for its acknowledgement, then fold it in."""
        with self._lock:
            self._write_locked(record)

    async def awrite(self, record: ControlRecord) -> None:
        await asyncio.to_thread(self.write, record)

    def _write_locked(self, record: ControlRecord) -> None:
        if self._producer is None:
            self._producer = Producer(
                {**self._conf, "acks": "all", "enable.idempotence": "true", "linger.ms": "0"}
            )
        errors: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        key, value = record.encoded()
        try:
            self._producer.produce(self.topic, key=key, value=value, on_delivery=on_delivery)
        except (KafkaException, BufferError) as exc:
            raise ControlStoreUnavailable(
                f"{record.key} was not written to {self.topic}: {exc}"
            ) from None
        remaining = self._producer.flush(self._timeout_s)
        if errors:
            raise_if_denied(errors[0], self._conf, topic=("WRITE", self.topic))
        if remaining or errors:
            raise ControlStoreUnavailable(
                f"{record.key} was not acknowledged by the control topic {self.topic}: "
                f"{errors[0].str() if errors else 'timed out'}"
            )
        self._state.apply_record(record)

    # -- operations (each one acknowledged write) -----------------------------------------------

    def set_pause(self, paused: bool, by: str, reason: str = "") -> ControlRecord:
        record = pause_record(paused, by, self.now_ms(), reason)
        self.write(record)
        return record

    def set_breaker(
        self,
        connect_cluster: str,
        connector: str,
        *,
        open: bool,
        by: str,
        why: str,
        decision_id: str | None = None,
    ) -> ControlRecord:
        record = breaker_record(
            connect_cluster,
            connector,
            open=open,
            by=by,
            at_ms=self.now_ms(),
            why=why,
            decision_id=decision_id,
        )
        self.write(record)
        return record

    def request_approval(
        self, decision_id: str, rule: str, connect_cluster: str, connector: str, summary: str
    ) -> Approval:
        """Write a pending approval once; an existing one (any status) is returned unchanged."""
        existing = self._state.approval(decision_id)
        if existing is not None:
            return existing
        approval = Approval(
            decision_id, "pending", rule, connect_cluster, connector, summary, self.now_ms()
        )
        self.write(approval_record(approval))
        return approval

    def decide_approval(self, decision_id: str, approve: bool, by: str) -> Approval:
        """Approve or reject a pending approval. The caller checks that it is pending."""
        existing = self._state.approval(decision_id)
        if existing is None:
            raise KeyError(decision_id)
        decided = Approval(
            existing.decision_id,
            "approved" if approve else "rejected",
            existing.rule,
            existing.connect_cluster,
            existing.connector,
            existing.summary,
            existing.requested_at_ms,
            by=by,
            at_ms=self.now_ms(),
        )
        self.write(approval_record(decided))
        return decided

    def record_skip(
        self,
        connect_cluster: str,
        connector: str,
        keep_ms: int,
        at_ms: int | None = None,
        record: str | None = None,
    ) -> ControlRecord:
        """Count one completed skip for the budget and the breaker (keep `keep_ms` of history);
        `record`: the record it moved past, `topic-partition@offset`."""
        at = self.now_ms() if at_ms is None else at_ms
        written = skips_record(self._state, connect_cluster, connector, at, keep_ms, record)
        self.write(written)
        return written

    def set_opt_out(
        self, connect_cluster: str, connector: str, opted_out: bool, by: str, reason: str = ""
    ) -> ControlRecord:
        record = optout_record(
            connect_cluster,
            connector,
            opted_out=opted_out,
            by=by,
            at_ms=self.now_ms(),
            reason=reason,
        )
        self.write(record)
        return record

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush(10)
                self._producer = None
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    def __enter__(self) -> ControlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _kafka_text(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else exc
    return error.str() if isinstance(error, KafkaError) else str(error)


def publish_gauges(state: ControlState, metrics: RemediationMetrics) -> None:
    """Set `offsetd_automation_paused` and `offsetd_breaker_open` from the state.

    Call it after `load`/`catch_up`: the gauges then follow operator commands typed anywhere.
    A reset breaker is set to 0 (not removed), so a dashboard sees it close.
    """
    metrics.paused.set(1 if state.paused is not None else 0)
    for (cluster, connector), breaker in state.breakers.items():
        metrics.breaker_open.labels(connect_cluster=cluster, connector=connector).set(
            1 if breaker.open else 0
        )
