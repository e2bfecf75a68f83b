"""Proof that a task ran and failed again, read from Connect's status topic.

After a restart, polling `GET /status` can miss a task that starts, reads one record and fails
within one poll (seen on a loaded machine with the poison record first in its batch: nothing is
delivered, so the committed offset does not move either). Every state change is also a record in
the status topic, in order, so reading it from a mark taken before the restart shows the RUNNING
and the FAILED however fast they came.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import Consumer, TopicPartition

from offsetd.events.decode import Malformed, raw_record
from offsetd.events.models import TaskStatusEvent
from offsetd.events.status import decode_status

__all__ = ["StatusTrail"]


class StatusTrail:
    """Task status records of one connector written to `topic` since `mark()` (assign only)."""

    def __init__(self, conf: Mapping[str, str], topic: str, connector: str) -> None:
        self.conf, self.topic, self.connector = dict(conf), topic, connector
        self._positions: dict[int, int] = {}
        self._running: set[int] = set()
        self._cycled: set[int] = set()

    def mark(self, timeout_s: float = 10.0) -> None:
        """Start from the current end of every partition of the status topic."""
        consumer = self._consumer()
        try:
            metadata = consumer.list_topics(self.topic, timeout=timeout_s).topics[self.topic]
            self._positions = {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout_s)[1]
                for p in metadata.partitions
            }
        finally:
            consumer.close()
        self._running.clear()
        self._cycled.clear()

    def ran_and_failed(self, tasks: frozenset[int], timeout_s: float = 10.0) -> bool:
        """Whether one of `tasks` went RUNNING and then FAILED since the mark."""
        consumer = self._consumer()
        try:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout_s)[1]
                for p in self._positions
            }
            pending = {p: o for p, o in self._positions.items() if o < ends[p]}
            if pending:
                consumer.assign([TopicPartition(self.topic, p, o) for p, o in pending.items()])
                deadline = time.monotonic() + timeout_s
                while pending and time.monotonic() < deadline:
                    for msg in consumer.consume(500, timeout=0.5):
                        if msg.error() is not None:
                            continue
                        partition = msg.partition() or 0
                        self._positions[partition] = (msg.offset() or 0) + 1
                        if self._positions[partition] >= ends[partition]:
                            pending.pop(partition, None)
                        self._take(msg)
        finally:
            consumer.close()
        return not self._cycled.isdisjoint(tasks)

    def _take(self, msg: object) -> None:
        try:
            event = decode_status("", raw_record(msg))  # type: ignore[arg-type]
        except Malformed:
            return
        if not isinstance(event, TaskStatusEvent) or event.connector != self.connector:
            return
        if event.state == "RUNNING":
            self._running.add(event.task_id)
        elif event.state == "FAILED" and event.task_id in self._running:
            self._cycled.add(event.task_id)

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                **self.conf,
                "group.id": f"offsetd-status-trail-{self.connector}",  # assign() only
                "enable.auto.commit": "false",
                "enable.partition.eof": "false",
            }
        )
