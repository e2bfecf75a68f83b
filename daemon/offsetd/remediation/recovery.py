"""Resuming what earlier lives of the daemon left unfinished, as early as it is safe.

First, at once, the sagas whose owner provably ended (`owner_is_dead`: a daemon killed and
restarted in place, same host or pod): the consumer group keeps a SIGKILLed member for its whole
session timeout (faust: 60 s) before it assigns anything, and the connector that saga stopped
must not stay STOPPED that long. Then, once this worker owns its partitions of the events topic,
the unfinished sagas of the connectors it owns — never one this process runs already: its own
owner identity is unique to it — and the decisions that never got an outcome (a crash came
between the audit and the action), or whose approval was still awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from offsetd.audit import AuditLog, read_records
from offsetd.config import ConnectCluster
from offsetd.connect.client import ConnectClient
from offsetd.engine import Decision
from offsetd.outcomes import SUPPRESSED_KIND
from offsetd.remediation.actions.base import Services
from offsetd.remediation.actions.rewind import rewind_outcome
from offsetd.remediation.actions.skip import skip_context, skip_outcome
from offsetd.remediation.approvals import ApprovalWatch
from offsetd.remediation.locate import restore_override
from offsetd.remediation.recent_ids import RecentIds
from offsetd.remediation.sagas import SagaRecord, Superseded, owner_is_dead
from offsetd.remediation.skip import SkipSaga

__all__ = ["RESUBMIT_WITHIN_MS", "Recovery", "RecoveryHost", "decision_from_audit"]

log = logging.getLogger("offsetd.remediation")
RESUBMIT_WITHIN_MS = 3_600_000  # older decisions without an outcome are left to a person


class RecoveryHost(Services, Protocol):
    """The executor, as recovery uses it."""

    audit: AuditLog
    connect: dict[str, ConnectCluster]

    @property
    def submitted(self) -> RecentIds: ...

    @property
    def approvals(self) -> ApprovalWatch: ...

    def submit(self, decision: Decision) -> None: ...

    def client(
        self, cluster: ConnectCluster, calls: list[dict[str, Any]]
    ) -> contextlib.AbstractAsyncContextManager[ConnectClient]: ...

    async def finish(
        self, decision: Decision, outcome: str, message: str, extra: dict[str, Any]
    ) -> None: ...


class Recovery:
    def __init__(self, host: RecoveryHost) -> None:
        self.host = host
        self.tasks: list[asyncio.Task[None]] = []

    async def resume(
        self, owns: Callable[[str, str], bool], assigned: Awaitable[None] | None
    ) -> None:
        """See the module docstring; `assigned` is done once this worker owns partitions."""
        host = self.host
        await host.sagas.catch_up()
        recovering: set[str] = set()  # decision ids
        taken: set[str] = set()  # saga keys
        for record in host.sagas.unfinished():
            if owner_is_dead(record.owner):
                log.warning(
                    "saga %s: its owner %s has ended (its beacon is free); resuming it now",
                    record.key,
                    record.owner,
                )
                taken.add(record.key)
                recovering.add(record.decision_id)
                self.tasks.append(asyncio.create_task(self.recover(record)))
        if assigned is not None:
            await assigned
            await host.sagas.catch_up()
        for record in host.sagas.unfinished():
            if record.key in taken or record.owner == host.owner:
                continue  # resumed above, or started by this process since
            if owns(record.connect_cluster, record.connector):
                recovering.add(record.decision_id)
                self.tasks.append(asyncio.create_task(self.recover(record)))
        unhandled, waiting = await self._unhandled(owns)
        for decision in unhandled:
            if decision.id not in recovering and decision.id not in host.submitted:
                log.warning("decision %s has no outcome yet (crash?); handling it", decision.id)
                host.submit(decision)
        for decision in waiting:
            # Its approval (pending or already given) lives in the control topic; only the
            # decision itself was in the memory of the process that asked for it.
            host.approvals.wait_again(decision)

    async def _unhandled(
        self, owns: Callable[[str, str], bool]
    ) -> tuple[list[Decision], list[Decision]]:
        """Decisions of the audit still to handle: those with no remediation outcome at all
        (a crash came between the audit and the action) and those whose only outcome is
        `awaiting_approval` (the approval outlives a restart, so must the wait for it)."""
        host = self.host
        records = await asyncio.to_thread(read_records, host.audit.conf, host.audit.topic)
        outcomes: dict[str, set[str]] = {}
        for r in records:
            if r.get("kind") == "remediation":
                outcomes.setdefault(str(r.get("decision_id")), set()).add(str(r.get("outcome")))
        since = host.now_ms() - RESUBMIT_WITHIN_MS
        found, waiting = [], []
        for raw in records:
            if raw.get("kind") in ("remediation", SUPPRESSED_KIND):
                continue  # an outcome, or a tally of suppressed decisions: nothing to run
            seen = outcomes.get(str(raw.get("id")))
            owned = owns(str(raw.get("connect_cluster")), str(raw.get("connector")))
            if seen == {"awaiting_approval"} and raw.get("outcome") == "planned":
                if owned:
                    waiting.append(decision_from_audit(raw))
                continue
            recent = int(raw.get("decided_at_ms", 0)) >= since
            if not seen and raw.get("outcome") == "planned" and recent and owned:
                found.append(decision_from_audit(raw))
        return found, waiting

    async def recover(self, record: SagaRecord) -> None:
        """Finish (or roll back) a saga an earlier life of this worker started."""
        host = self.host
        cluster = host.connect.get(record.connect_cluster)
        if cluster is None:
            return
        if record.kind == "locate":
            # Killed while the connector read one-record batches: put its config back.
            original = (record.override or {}).get("original")
            async with host.client(cluster, []) as client:
                await restore_override(client, record.connector, original)
            await host.sagas.put(record.ended("done", host.now_ms(), "override restored"))
            log.warning("restored the max.poll.records override of %s", record.connector)
            return
        if record.kind == "rewind":
            await self._recover_rewind(cluster, record)
            return
        if record.kind != "skip" or record.record is None:
            return
        taken = await host.sagas.put(
            SagaRecord(**{**record.__dict__, "epoch": record.epoch + 1, "owner": host.owner})
        )
        log.warning("resuming saga %s after %s", taken.key, ",".join(taken.completed) or "start")
        decision = await self.decision_of(taken)
        calls: list[dict[str, Any]] = []
        async with host.client(cluster, calls) as client:
            try:
                result = await SkipSaga(skip_context(host, client, decision), taken).run()
            except Superseded as exc:  # another worker took it over as well: it finishes it
                log.warning("%s", exc)
                return
        if decision is not None:
            outcome, message, extra = await skip_outcome(host, decision, result)
            extra["http_calls"] = calls
            extra["recovered"] = True
            await host.finish(decision, outcome, message, extra)

    async def _recover_rewind(self, cluster: ConnectCluster, record: SagaRecord) -> None:
        """A rewind an earlier life of this worker left unfinished: restore or escalate."""
        host = self.host
        if host.rewind is None:
            log.error("rewind %s is unfinished, but this worker cannot rewind", record.key)
            host.metrics.left_stopped.labels(record.connect_cluster, record.connector).set(1)
            return
        decision = await self.decision_of(record)
        calls: list[dict[str, Any]] = []
        async with host.client(cluster, calls) as client:
            service = host.offsets_service(client, record.connect_cluster)
            result = await host.rewind.recover(service, host.sagas, record)
        log.warning("recovered rewind %s: %s", record.key, result.message)
        outcome, message, extra = await rewind_outcome(
            host, record.connect_cluster, record.connector, decision, result
        )
        if decision is not None:
            extra["http_calls"] = calls
            extra["recovered"] = True
            await host.finish(decision, outcome, message, extra)

    async def decision_of(self, record: SagaRecord) -> Decision | None:
        """The decision behind a saga, from the audit topic (it is written before any action)."""
        host = self.host
        records = await asyncio.to_thread(read_records, host.audit.conf, host.audit.topic)
        for raw in records:
            if raw.get("id") == record.decision_id and raw.get("kind") != "remediation":
                return decision_from_audit(raw)
        return None


def decision_from_audit(raw: dict[str, Any]) -> Decision:
    return Decision.model_validate({k: v for k, v in raw.items() if k != "rule_spec"})
