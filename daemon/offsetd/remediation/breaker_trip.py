"""Opening a connector's breaker, confirmed against the connector as it is now.

A failure soon after a skip of the same connector opens its breaker (the skip did not help).
The executor asks before every decision and for the failures the engine suppressed; the reads
that confirm a trip — and that tell whether a decision a pause held still applies — are
Connect's status and offsets, asked again when Connect does not answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.engine import Decision
from offsetd.engine.decision import Firing
from offsetd.errors import OffsetdError
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.model import ConnectorKind, next_offset_of
from offsetd.remediation.control import ControlStore
from offsetd.remediation.control_state import ControlState
from offsetd.remediation.guard_inputs import GuardReads
from offsetd.remediation.guards import open_breaker_if_recent_skip

__all__ = ["BreakerCheck", "BreakerHost", "BreakerTrip"]

log = logging.getLogger("offsetd.remediation")

_FAILED_SETTLE_S = 10.0  # how long a DLQ record's FAILED status may take to show


class BreakerHost(Protocol):
    """The executor's state the trip reads and writes (read at each call: tests tune it)."""

    settings: RemediationSettings
    connect: dict[str, ConnectCluster]
    metrics: RemediationMetrics
    control: ControlStore
    owner: str


@dataclass(frozen=True)
class BreakerCheck:
    """Suppressed failures of one connector that may open its breaker, queued behind a skip
    still pending there (`Remediator.note_suppressed`)."""

    failures: Sequence[Firing]

    @property
    def connect_cluster(self) -> str:
        return self.failures[0].connect_cluster

    @property
    def connector(self) -> str:
        return self.failures[0].connector


class BreakerTrip:
    def __init__(self, host: BreakerHost, reads: GuardReads) -> None:
        self.host = host
        self.reads = reads

    def may_trip(self, failures: Sequence[Firing]) -> bool:
        """Whether the control state this process knows has a recent skip that one of these
        failures would trip on (no read: asked per frame in a DLQ storm)."""
        return any(
            open_breaker_if_recent_skip(
                self.host.control.state,
                self.host.settings,
                decision.connect_cluster,
                decision.connector,
                decision.decided_at_ms,
                record=decision.record_text,
            )
            for decision in failures
        )

    async def trip(self, decisions: Sequence[Firing]) -> ControlState:
        """Open the connector's breaker if one of these failures came soon after a skip and did
        not move; the guard state as read now (and written, if it tripped).

        A DLQ record carries the failing record's own timestamp, not the failure's, so its time
        here is when it was decided; and since a DLQ record of the skipped failure itself may
        be decided late, a trip is confirmed against the connector as it is now: a task FAILED
        and the committed offset not past the record (`failing_at`)."""
        host = self.host
        state = await host.control.acatch_up()
        for decision in decisions:
            trips = decision.from_failure and open_breaker_if_recent_skip(
                state,
                host.settings,
                decision.connect_cluster,
                decision.connector,
                decision.decided_at_ms,
                record=decision.record_text,
                decision_id=decision.id,
                by=host.owner,
            )
            if trips and not await self.failing_at(decision):
                continue
            if trips:
                await host.control.awrite(trips)
                metric = host.metrics.breaker_open.labels(
                    decision.connect_cluster, decision.connector
                )
                metric.set(1)
                log.warning("breaker of %s opened: %s", decision.connector, trips.value["why"])
                return host.control.state
        return state

    async def failing_at(self, decision: Firing) -> bool:
        """Whether the connector fails at the decision's record now: a task FAILED, and its
        committed offset on that partition not past the record (unreadable: True, the breaker
        fails closed)."""
        cluster = self.host.connect.get(decision.connect_cluster)
        text = decision.record_text
        if cluster is None or text is None:
            return True
        where, _, offset = text.rpartition("@")
        topic, _, partition = where.rpartition("-")
        deadline = time.monotonic() + _FAILED_SETTLE_S
        try:
            while True:  # Connect writes the DLQ record ~0.5 s before it reports FAILED
                state = await self.reads.read(
                    cluster, "read status", lambda c: c.status(decision.connector)
                )
                if any(t.state == "FAILED" for t in state.tasks):
                    break
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(0.2)
            entries = await self.reads.read(
                cluster, "read offsets", lambda c: c.offsets(decision.connector)
            )
        except OffsetdError as exc:
            log.warning("could not tell where %s fails (%s)", decision.connector, exc)
            return True
        for entry in entries:
            part = entry.partition
            if (str(part.get("kafka_topic")), str(part.get("kafka_partition"))) == (
                topic,
                partition,
            ):
                committed = next_offset_of(ConnectorKind.SINK, entry.offset)
                return committed is None or committed <= int(offset)
        return True

    async def no_longer_failing(self, decision: Decision, cluster: ConnectCluster) -> str | None:
        """Why a decision a pause held no longer applies (None: it still does). A decision a
        failure caused acts only while the connector or the task it names is still FAILED."""
        if not decision.from_failure:
            return None
        try:
            state = await self.reads.read(
                cluster, "read status", lambda c: c.status(decision.connector)
            )
        except OffsetdError as exc:
            return f"its status could not be read ({exc})"
        task_id = decision.inputs.trigger.task_id
        if state.state == "FAILED" or any(
            t.state == "FAILED" and (task_id is None or t.id == task_id) for t in state.tasks
        ):
            return None
        tasks = ", ".join(f"{t.id}={t.state}" for t in state.tasks) or "none"
        return f"{decision.connector} is no longer failing (connector {state.state}, tasks {tasks})"
