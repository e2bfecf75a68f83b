"""Runs decisions: guards first, then the actions, one connector at a time, everything audited.

The decide agent only enqueues (`submit`): each connector has its own queue and its own asyncio
task, so a 2-minute skip saga on one connector never holds up the stream or another connector,
and two remediations of one connector never overlap. A restart that is not yet due is dropped
when a skip for the same connector arrives (the skip stops and resumes the connector anyway).

Observe mode cannot write by construction: the guard verdict for an observe decision is
`dry_run`, and `_act` — the only path that reaches a writing call — is never entered for it.
Observe still reads (the failing-connector count, the connector's class) so that its `would_be`
says what enforce would really have done.

A decision is handled once per process (its id is kept a day, `recent_ids`): the stream and the
start-up scan for decisions without an outcome can both hand over the same one (a decision
audited just before `start` ran), and handling it twice would restart twice or eat a second
unit of the skip budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx

from offsetd.audit import AuditLog, read_records
from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.connect.transport import httpx_options
from offsetd.engine import ConnectorMeta, Decision
from offsetd.errors import OffsetdError
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.backend import BackendRequest, Timeouts
from offsetd.offsets.operations import OffsetsService
from offsetd.offsets.registry import connect_backend_for, write_refusal_for
from offsetd.offsets.snapshots import SnapshotStore
from offsetd.remediation.control import ControlStore
from offsetd.remediation.guards import (
    OFFSET_ACTIONS,
    WRITING_ACTIONS,
    GuardContext,
    StatusSample,
    WritePermit,
    evaluate,
    failing_now,
    failing_within,
    open_breaker_if_recent_skip,
)
from offsetd.remediation.locate import restore_override
from offsetd.remediation.notify import notify
from offsetd.remediation.recent_ids import RecentIds
from offsetd.remediation.rewind import RewindResult, RewindRunner
from offsetd.remediation.sagas import (
    SagaRecord,
    SagaStore,
    Superseded,
    owner_is_dead,
    skip_key,
)
from offsetd.remediation.skip import (
    Quarantine,
    SkipContext,
    SkipResult,
    SkipSaga,
    SkipTimings,
)
from offsetd.retry import retry_call
from offsetd.scope import labels_of, scope_of

log = logging.getLogger("offsetd.remediation")
RESUBMIT_WITHIN_MS = 3_600_000  # older decisions without an outcome are left to a person
T = TypeVar("T")


class Locator(Protocol):
    """Finds the failing record exactly, or says why not (see `offsetd.remediation.locate`)."""

    async def locate(
        self, client: ConnectClient, decision: Decision, sagas: SagaStore
    ) -> tuple[dict[str, Any] | None, str, str]: ...


@dataclass
class Remediator:
    """The remediation layer of one `offsetd run` worker."""

    settings: RemediationSettings
    connect: dict[str, ConnectCluster]
    metrics: RemediationMetrics
    audit: AuditLog
    sagas: SagaStore
    snapshots: Callable[[str], SnapshotStore]  # per Connect cluster
    quarantine: Quarantine
    control: ControlStore
    locator: Locator
    meta: Callable[[str, str], ConnectorMeta | None]
    owner: str = "offsetd"
    rewind: RewindRunner | None = None
    # (Connect cluster, since ms) -> its status records since then (blast radius); None: REST only
    failures: Callable[[str, int], list[StatusSample]] | None = None
    now_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    http_timeout_s: float = 15.0
    poll_s: float = 1.0
    retry_delays_s: tuple[float, ...] = (1.0, 3.0)  # guard reads, single actions: 3 tries
    # told every outcome once it is audited (decision, outcome, the audit's extra fields): the
    # app hands it to the engine, which gives back the limits of a decision that did not run
    on_outcome: Callable[[Decision, str, dict[str, Any]], Awaitable[None]] | None = None
    _queues: dict[str, asyncio.Queue[Decision]] = field(default_factory=dict)
    _workers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _skip_pending: dict[str, asyncio.Event] = field(default_factory=dict)
    _waiting_approval: dict[str, Decision] = field(default_factory=dict)
    _submitted: RecentIds = field(init=False)
    _background: list[asyncio.Task[None]] = field(default_factory=list)
    _recovering: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._submitted = RecentIds(self.now_ms)

    # -- entry points ---------------------------------------------------------------------------

    def submit(self, decision: Decision) -> None:
        """Enqueue a decision for its connector's worker task; never blocks the stream.

        A decision already handed over in this process is ignored (see the module docstring).
        """
        if decision.id in self._submitted:
            log.info("decision %s was already handed over; not handling it twice", decision.id)
            return
        self._submitted.add(decision.id)
        self._enqueue(decision)

    def _enqueue(self, decision: Decision) -> None:
        owner = f"{decision.connect_cluster}/{decision.connector}"
        if "skip-record" in decision.action_types and decision.outcome == "planned":
            self._skip_pending.setdefault(owner, asyncio.Event()).set()
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = asyncio.Queue()
            self._workers[owner] = asyncio.create_task(self._work(owner, queue), name=owner)
        queue.put_nowait(decision)

    async def start(
        self, owns: Callable[[str, str], bool], assigned: Awaitable[None] | None = None
    ) -> None:
        """Resume what earlier lives left unfinished; watch approvals.

        First, at once, the sagas whose owner provably ended (`owner_is_dead`: a daemon killed
        and restarted in place, same host or pod): the consumer group keeps a SIGKILLed member
        for its whole session timeout (faust: 60 s) before it assigns anything, and the
        connector that saga stopped must not stay STOPPED that long. Then, once `assigned` is
        done (this worker owns its partitions of the events topic), the unfinished sagas of the
        connectors it owns — never one this process runs already: its own owner identity is
        unique to it — and the decisions that never got an outcome.
        """
        await self.sagas.catch_up()
        recovering: set[str] = set()  # decision ids
        taken: set[str] = set()  # saga keys
        for record in self.sagas.unfinished():
            if owner_is_dead(record.owner):
                log.warning(
                    "saga %s: its owner %s has ended (its beacon is free); resuming it now",
                    record.key,
                    record.owner,
                )
                taken.add(record.key)
                recovering.add(record.decision_id)
                self._recovering.append(asyncio.create_task(self._recover(record)))
        if assigned is not None:
            await assigned
            await self.sagas.catch_up()
        for record in self.sagas.unfinished():
            if record.key in taken or record.owner == self.owner:
                continue  # resumed above, or started by this process since
            if owns(record.connect_cluster, record.connector):
                recovering.add(record.decision_id)
                self._recovering.append(asyncio.create_task(self._recover(record)))
        unhandled, waiting = await self._unhandled(owns)
        for decision in unhandled:
            if decision.id not in recovering and decision.id not in self._submitted:
                log.warning("decision %s has no outcome yet (crash?); handling it", decision.id)
                self.submit(decision)
        for decision in waiting:
            # Its approval (pending or already given) lives in the control topic; only the
            # decision itself was in the memory of the process that asked for it.
            self._waiting_approval.setdefault(decision.id, decision)
        self._background.append(asyncio.create_task(self._approvals_loop()))

    async def _unhandled(
        self, owns: Callable[[str, str], bool]
    ) -> tuple[list[Decision], list[Decision]]:
        """Decisions of the audit still to handle: those with no remediation outcome at all
        (a crash came between the audit and the action) and those whose only outcome is
        `awaiting_approval` (the approval outlives a restart, so must the wait for it)."""
        records = await asyncio.to_thread(read_records, self.audit.conf, self.audit.topic)
        outcomes: dict[str, set[str]] = {}
        for r in records:
            if r.get("kind") == "remediation":
                outcomes.setdefault(str(r.get("decision_id")), set()).add(str(r.get("outcome")))
        since = self.now_ms() - RESUBMIT_WITHIN_MS
        found, waiting = [], []
        for raw in records:
            if raw.get("kind") == "remediation":
                continue
            seen = outcomes.get(str(raw.get("id")))
            if seen == {"awaiting_approval"} and raw.get("outcome") == "planned":
                if owns(str(raw.get("connect_cluster")), str(raw.get("connector"))):
                    waiting.append(_decision_from_audit(raw))
                continue
            if seen:
                continue
            if raw.get("outcome") != "planned" or int(raw.get("decided_at_ms", 0)) < since:
                continue
            if not owns(str(raw.get("connect_cluster")), str(raw.get("connector"))):
                continue
            found.append(_decision_from_audit(raw))
        return found, waiting

    async def stop(self) -> None:
        tasks = [*self._workers.values(), *self._background, *self._recovering]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def idle(self) -> None:
        """Wait until recoveries and every queued decision are done (tests, shutdown)."""
        await asyncio.gather(*self._recovering, return_exceptions=True)
        for queue in list(self._queues.values()):
            await queue.join()

    # -- per connector --------------------------------------------------------------------------

    async def _work(self, owner: str, queue: asyncio.Queue[Decision]) -> None:
        while True:
            decision = await queue.get()
            try:
                await self.handle(decision)
            except Exception as exc:  # one bad remediation must not stop the connector's queue
                log.exception("remediation of %s failed unexpectedly", decision.id)
                # Every decision gets an outcome in the audit, an unexpected failure too.
                await self._finish(decision, "failed", f"unexpected error: {exc!r}", {})
            finally:
                queue.task_done()

    async def handle(self, decision: Decision) -> str:
        """Guard, act, audit. Returns the final outcome."""
        state = await self.control.acatch_up()
        cluster = self.connect.get(decision.connect_cluster)
        orchestrator = cluster.orchestrator if cluster is not None else "none"
        offsets_refusal = write_refusal_for(decision.connect_cluster, orchestrator)
        trips = _failure_trigger(decision) and open_breaker_if_recent_skip(
            state,
            self.settings,
            decision.connect_cluster,
            decision.connector,
            decision.event_time_ms,
            decision_id=decision.id,
            by=self.owner,
        )
        if trips:
            await self.control.awrite(trips)
            self.metrics.breaker_open.labels(decision.connect_cluster, decision.connector).set(1)
            state = self.control.state
        failing: int | None = 0
        failing_names: tuple[str, ...] = ()
        writes = set(decision.action_types) & WRITING_ACTIONS
        if cluster is not None and writes:  # a read: observe counts too, for its would_be
            await self._settle(decision)
            failing, failing_names = await self._failing_connectors(
                decision.connect_cluster, cluster
            )
        meta = await self._meta(decision, cluster)
        verdict = evaluate(
            decision,
            GuardContext(
                settings=self.settings,
                control=state,
                connector_class=meta.connector_class if meta else None,
                connector_type=meta.connector_type if meta else None,
                offsets_refusal=offsets_refusal,
                failing_connectors=failing,
                now_ms=self.now_ms(),
                failing_names=failing_names,
                scope=scope_of(self.settings, decision.connect_cluster, cluster),  # offsetd.scope
                connector_labels=meta.labels if meta else None,
            ),
        )
        if verdict.outcome == "suppressed_blast_radius":
            self.metrics.blast_radius_holds.labels(decision.connect_cluster).inc()
        if verdict.permit is None or not verdict.proceed:
            if verdict.outcome == "awaiting_approval":
                self._waiting_approval[decision.id] = decision
                await asyncio.to_thread(
                    self.control.request_approval,
                    decision.id,
                    decision.rule,
                    decision.connect_cluster,
                    decision.connector,
                    decision.summary(),
                )
            extra: dict[str, Any] = {"guard": verdict.guard}
            if verdict.would_be:
                extra["would_be"] = verdict.would_be
            await self._notify_only(decision, verdict.outcome)
            await self._finish(decision, verdict.outcome, verdict.detail, extra)
            return verdict.outcome
        if cluster is None:
            await self._finish(decision, "failed", "unknown Connect cluster", {})
            return "failed"
        return await self._act(decision, cluster, verdict.permit, verdict.guard, verdict.detail)

    async def _meta(
        self, decision: Decision, cluster: ConnectCluster | None
    ) -> ConnectorMeta | None:
        """The connector's class, type and labels: from the cache, else read from Connect now.

        The cache fills from status records, which a daemon started after the connector's
        failure may not have read yet when the DLQ record decides: without this, the
        allowlist would refuse a sink as "an unknown class".
        """
        meta = self.meta(decision.connect_cluster, decision.connector)
        moves = set(decision.action_types) & OFFSET_ACTIONS
        # a scope by labels needs them (offsetd.scope): read them rather than not act
        labelled = bool(scope_of(self.settings, decision.connect_cluster, cluster).labels)
        if meta is not None or cluster is None or not (moves or labelled):
            return meta
        try:
            info = await self._guard_read(
                cluster, f"read {decision.connector}'s class", lambda c: c.info(decision.connector)
            )
        except OffsetdError as exc:
            log.warning("could not read %s's class: %s", decision.connector, exc)
            return None
        return ConnectorMeta(
            connector_class=info.connector_class,
            connector_type=info.type,
            labels=labels_of(info.config),
        )

    async def _notify_only(self, decision: Decision, outcome: str) -> None:
        """A held-back decision still tells people when its rule says notify (not for dry runs)."""
        if outcome in ("dry_run", "suppressed_out_of_scope") or decision.outcome == "suppressed":
            return
        for action in decision.actions:
            if action.type == "notify":
                await self._notify(decision, action.params, outcome)

    async def _notify(self, decision: Decision, params: dict[str, Any], outcome: str) -> None:
        await notify(
            decision,
            params,
            outcome,
            metrics=self.metrics,
            timeout_ms=self.settings.webhook_timeout,
        )

    async def _act(
        self,
        decision: Decision,
        cluster: ConnectCluster,
        permit: WritePermit,
        guard: str = "none",
        verdict: str = "",
    ) -> str:
        """The only path to a writing call; it needs the guards' permit for this decision."""
        if permit.decision_id != decision.id:
            raise ValueError(f"permit {permit} is not for decision {decision.id}")
        calls: list[dict[str, Any]] = []
        started = time.monotonic()
        outcome, message = "executed", ""
        extra: dict[str, Any] = {"guard": guard, "verdict": verdict}
        async with self._client(cluster, calls) as client:
            for action in decision.actions:
                try:
                    outcome, message, more = await self._action(
                        client, cluster, decision, action.type, action.params
                    )
                except OffsetdError as exc:
                    outcome, message, more = "failed", str(exc), {}
                extra.update(more)
                if outcome != "executed":
                    break
        extra["http_calls"] = calls
        action_name = "+".join(decision.action_types)
        self.metrics.duration.labels(action_name, outcome).observe(time.monotonic() - started)
        await self._finish(decision, outcome, message, extra)
        return outcome

    async def _action(
        self,
        client: ConnectClient,
        cluster: ConnectCluster,
        decision: Decision,
        kind: str,
        params: dict[str, Any],
    ) -> tuple[str, str, dict[str, Any]]:
        name = decision.connector
        owner = f"{decision.connect_cluster}/{name}"
        if kind == "restart-failed-tasks":
            delay_s = max(int(params.get("not_before_ms") or 0) - self.now_ms(), 0) / 1000
            pending = self._skip_pending.setdefault(owner, asyncio.Event())
            if delay_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pending.wait(), timeout=delay_s)
            if pending.is_set():
                return "suppressed_skip_pending", "a skip of this connector is planned", {}
            # onlyFailed: a retry after a lost answer restarts only what is still FAILED
            tries = 0

            async def restart() -> ConnectorState:
                nonlocal tries
                tries += 1
                return await client.restart_failed(name)

            state = await self._again("restart failed tasks", restart)
            restarting = _restarting(state)
            if not restarting and tries == 1:
                # Connect answers 202 with every instance it restarts marked RESTARTING; none
                # marked means nothing was FAILED any more (someone restarted it, or it healed).
                return "not_needed", f"nothing to restart: {_states(state)}", {}
            if not restarting:  # an earlier try may have restarted it and its answer was lost
                return "executed", f"restart sent {tries} times; now {_states(state)}", {}
            return "executed", f"restarted {', '.join(restarting)}", {}
        if kind == "pause":
            await self._again("pause", lambda: client.pause(name))
            return "executed", "paused", {}
        if kind == "stop":
            await self._again("stop", lambda: client.stop(name))
            return "executed", "stopped", {}
        if kind == "resume":
            await self._again("resume", lambda: client.resume(name))
            return "executed", "resumed", {}
        if kind == "notify":
            await self._notify(decision, params, "executed")
            return "executed", "notified", {}
        if kind == "rewind":
            if self.rewind is None:
                return "failed", "rewind is not available in this worker", {}
            service = self._offsets_service(client, decision.connect_cluster)
            result = await self.rewind.run(service, self.sagas, decision, params)
            return await self._rewind_outcome(
                decision.connect_cluster, decision.connector, decision, result
            )
        if kind == "skip-record":
            return await self._skip(client, decision, params)
        return "failed", f"unknown action {kind}", {}

    # -- skip -----------------------------------------------------------------------------------

    async def _skip(
        self, client: ConnectClient, decision: Decision, params: dict[str, Any]
    ) -> tuple[str, str, dict[str, Any]]:
        owner = f"{decision.connect_cluster}/{decision.connector}"
        try:
            record, how, why = await self.locator.locate(client, decision, self.sagas)
            if record is None:  # counted once, by _finish, like every outcome
                return "not_located", why, {"not_located": how}
            key = skip_key(
                decision.connect_cluster,
                decision.connector,
                str(record["topic"]),
                int(record["partition"]),
                int(record["offset"]),
            )
            await self.sagas.catch_up()
            existing = self.sagas.get(key)
            if existing is not None and existing.status == "done":
                return "executed", f"already skipped by saga {key}", {"saga": key}
            now = self.now_ms()
            saga = SagaRecord(
                key=key,
                kind="skip",
                connect_cluster=decision.connect_cluster,
                connector=decision.connector,
                decision_id=decision.id,
                rule=decision.rule,
                epoch=(existing.epoch + 1) if existing else 1,
                owner=self.owner,
                record=dict(record),
                located_by=how,
                started_at_ms=now,
                updated_at_ms=now,
                # A retry of a rolled-back skip of the same record finds the copy made then
                # (same saga key) instead of quarantining the record a second time.
                quarantine_mark=existing.quarantine_mark if existing else None,
            )
            await self.sagas.put(saga)
            result = await SkipSaga(self._skip_context(client, decision), saga).run()
            outcome, message, extra = await self._skip_outcome(decision, result)
            extra["located"] = why
            return outcome, message, extra
        finally:
            self._skip_pending.pop(owner, None)

    async def _recover(self, record: SagaRecord) -> None:
        """Finish (or roll back) a saga an earlier life of this worker started."""
        cluster = self.connect.get(record.connect_cluster)
        if cluster is None:
            return
        if record.kind == "locate":
            # Killed while the connector read one-record batches: put its config back.
            original = (record.override or {}).get("original")
            async with self._client(cluster, []) as client:
                await restore_override(client, record.connector, original)
            await self.sagas.put(record.ended("done", self.now_ms(), "override restored"))
            log.warning("restored the max.poll.records override of %s", record.connector)
            return
        if record.kind == "rewind":
            await self._recover_rewind(cluster, record)
            return
        if record.kind != "skip" or record.record is None:
            return
        taken = await self.sagas.put(
            SagaRecord(**{**record.__dict__, "epoch": record.epoch + 1, "owner": self.owner})
        )
        log.warning("resuming saga %s after %s", taken.key, ",".join(taken.completed) or "start")
        decision = await self._decision_of(taken)
        calls: list[dict[str, Any]] = []
        async with self._client(cluster, calls) as client:
            ctx = self._skip_context(client, decision)
            try:
                result = await SkipSaga(ctx, taken).run()
            except Superseded as exc:  # another worker took it over as well: it finishes it
                log.warning("%s", exc)
                return
        if decision is not None:
            outcome, message, extra = await self._skip_outcome(decision, result)
            extra["http_calls"] = calls
            extra["recovered"] = True
            await self._finish(decision, outcome, message, extra)

    async def _skip_outcome(
        self, decision: Decision | None, result: SkipResult
    ) -> tuple[str, str, dict[str, Any]]:
        rec = result.record
        labels = (rec.connect_cluster, rec.connector)
        extra: dict[str, Any] = {
            "saga": rec.key,
            "saga_status": result.status,
            "located_by": rec.located_by,  # dlq | single_record_batches | check
            "steps": list(rec.events),
            "quarantine": rec.quarantine_ref,
            "snapshot_id": rec.snapshot_id,
            "before": [e.as_json() for e in result.before],
            "after": [e.as_json() for e in result.after],
        }
        if result.stopped_s:
            self.metrics.stopped_seconds.labels(*labels).inc(result.stopped_s)
        topic = str((rec.record or {}).get("topic", ""))
        # What happened counts, whatever came after: a copy made is a record quarantined, an
        # offset written past the record is a skip (for the metric, the budget and the breaker),
        # even when the connector then failed again and the saga ended `failed`.
        if rec.done("quarantine"):
            self.metrics.quarantined.labels(*labels, topic).inc()
        if rec.done("patch"):
            self.metrics.skipped.labels(*labels, topic).inc()
            keep = max(self.settings.skip_budget.per, self.settings.breaker_window)
            await asyncio.to_thread(
                self.control.record_skip, rec.connect_cluster, rec.connector, keep
            )
        if result.status == "done":
            self.metrics.left_stopped.labels(*labels).set(0)
            return "executed", result.message, extra
        if result.left_stopped:
            self.metrics.left_stopped.labels(*labels).set(1)
            log.error("LEFT STOPPED: %s: %s", rec.key, result.message)
        if result.verify_failed:
            await asyncio.to_thread(
                lambda: self.control.set_breaker(
                    rec.connect_cluster,
                    rec.connector,
                    open=True,
                    by=self.owner,
                    why=f"the skip of {rec.key} did not help: {result.message}",
                    decision_id=rec.decision_id,
                )
            )
            self.metrics.breaker_open.labels(*labels).set(1)
        if decision is not None and result.status in ("failed", "left_stopped"):
            await self._notify(decision, {"severity": "critical"}, result.status)
        outcome = "aborted" if result.status == "aborted" else "failed"
        return outcome, result.message, extra

    def _skip_context(self, client: ConnectClient, decision: Decision | None) -> SkipContext:
        trigger = decision.inputs.trigger if decision is not None else None
        error: dict[str, str] = {}
        if decision is not None:
            error["connector.name"] = decision.connector
            if decision.task_id is not None:
                error["task.id"] = str(decision.task_id)
        if trigger is not None:
            if trigger.stage:
                error["stage"] = trigger.stage
            if trigger.exception_class:
                error["exception.class.name"] = trigger.exception_class
        expected = None
        if trigger is not None and trigger.kind == "task_status":
            expected = trigger.root_cause_class or trigger.exception_class
        cluster = decision.connect_cluster if decision is not None else ""
        return SkipContext(
            client=client,
            offsets=self._offsets_service(client, cluster),
            store=self.sagas,
            quarantine=self.quarantine,
            timings=SkipTimings(
                verify_stable_for_s=self.settings.verify_stable_for / 1000,
                poll_s=self.poll_s,
                max_retries=self.settings.max_retries,
            ),
            error_context=error,
            expected_error=expected,
            now_ms=self.now_ms,
        )

    # -- rewind ---------------------------------------------------------------------------------

    async def _rewind_outcome(
        self, connect_cluster: str, connector: str, decision: Decision | None, result: RewindResult
    ) -> tuple[str, str, dict[str, Any]]:
        """Metrics and escalation for a rewind's end; the outcome for the audit."""
        labels = (connect_cluster, connector)
        if result.stopped_s:
            self.metrics.stopped_seconds.labels(*labels).inc(result.stopped_s)
        self.metrics.left_stopped.labels(*labels).set(1 if result.left_stopped else 0)
        if result.left_stopped:
            log.error("LEFT STOPPED: %s: %s", connector, result.message)
        if decision is not None and result.outcome == "failed":
            await self._notify(decision, {"severity": "critical"}, "failed")
        return result.outcome, result.message, dict(result.extra)

    async def _recover_rewind(self, cluster: ConnectCluster, record: SagaRecord) -> None:
        """A rewind an earlier life of this worker left unfinished: restore or escalate."""
        if self.rewind is None:
            log.error("rewind %s is unfinished, but this worker cannot rewind", record.key)
            self.metrics.left_stopped.labels(record.connect_cluster, record.connector).set(1)
            return
        decision = await self._decision_of(record)
        calls: list[dict[str, Any]] = []
        async with self._client(cluster, calls) as client:
            service = self._offsets_service(client, record.connect_cluster)
            result = await self.rewind.recover(service, self.sagas, record)
        log.warning("recovered rewind %s: %s", record.key, result.message)
        outcome, message, extra = await self._rewind_outcome(
            record.connect_cluster, record.connector, decision, result
        )
        if decision is not None:
            extra["http_calls"] = calls
            extra["recovered"] = True
            await self._finish(decision, outcome, message, extra)

    # -- plumbing -------------------------------------------------------------------------------

    def _offsets_service(self, client: ConnectClient, connect_cluster: str) -> OffsetsService:
        cluster = self.connect.get(connect_cluster)
        return connect_backend_for(
            BackendRequest(
                connect_cluster,
                cluster.orchestrator if cluster is not None else "none",
                client,
                self.snapshots(connect_cluster),
                timeouts=Timeouts(
                    stop_s=self.settings.stop_timeout / 1000,
                    resume_s=self.settings.resume_timeout / 1000,
                    # waiting for STOPPED / RUNNING: a GET /status per poll, for a second or two
                    poll_s=0.05,
                ),
                log=lambda msg: log.info("%s", msg),
            )
        )

    @contextlib.asynccontextmanager
    async def _client(self, cluster: ConnectCluster, calls: list[dict[str, Any]]) -> Any:
        """A Connect client whose every answer is logged for the audit (no bodies, no auth)."""

        async def on_response(response: httpx.Response) -> None:
            request = response.request
            call = {
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
            }
            if request.url.query:
                call["query"] = request.url.query.decode()
            calls.append(call)
            self.metrics.connect_requests.labels(request.method, str(response.status_code)).inc()

        http = httpx.AsyncClient(
            timeout=self.http_timeout_s,
            event_hooks={"response": [on_response]},
            **httpx_options(cluster),
        )
        client = ConnectClient(http)
        try:
            yield client
        finally:
            await client.aclose()

    async def _settle(self, decision: Decision) -> None:
        """Wait until `blast_radius.settle` after the decision's event: connectors failing
        together report FAILED a moment apart, and the first decision must see them all."""
        settle = self.settings.blast_radius.settle
        wait_ms = min(decision.event_time_ms + settle - self.now_ms(), settle)
        if wait_ms > 0:
            await asyncio.sleep(wait_ms / 1000)

    async def _failing_connectors(
        self, name: str, cluster: ConnectCluster
    ) -> tuple[int | None, tuple[str, ...]]:
        """The blast radius's count: connectors of the cluster failing now (REST) or FAILED
        within `blast_radius.within` (the status topic), and their names; None if unreadable."""
        try:
            expanded = await self._guard_read(
                cluster, "count failing connectors", lambda c: c.statuses()
            )
        except OffsetdError as exc:
            log.warning("could not count failing connectors: %s", exc)
            return None, ()
        now, within = self.now_ms(), self.settings.blast_radius.within
        samples: list[StatusSample] = []
        if self.failures is not None:
            read = self.failures

            def said(exc: Exception, attempt: int, _delay: float) -> None:
                log.warning("could not read recent failures (%s); try %d", exc, attempt + 2)

            try:  # the status topic: any failure to read it to its end is worth a second look
                samples = await retry_call(
                    lambda: asyncio.to_thread(read, name, now - within),
                    self.retry_delays_s,
                    retriable=lambda exc: isinstance(exc, OffsetdError),
                    before_retry=said,
                )
            except OffsetdError as exc:
                log.warning("could not read recent failures of %s: %s", name, exc)
                return None, ()
        names = failing_within(
            samples, now, within, existing=set(expanded), failing=failing_now(expanded)
        )
        self.metrics.blast_radius_failing.labels(name).set(len(names))
        return len(names), tuple(sorted(names))

    async def _guard_read(
        self,
        cluster: ConnectCluster,
        what: str,
        read: Callable[[ConnectClient], Awaitable[T]],
    ) -> T:
        """A read a guard needs. The guard fails closed without it, and the decision that needs
        it comes only once: one lost answer would leave a connector FAILED for good."""
        async with ConnectClient.for_cluster(cluster, timeout_s=self.http_timeout_s) as client:
            return await self._again(what, lambda: read(client))

    async def _again(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        return await call_again(what, call, self.retry_delays_s)

    async def _finish(
        self, decision: Decision, outcome: str, message: str, extra: dict[str, Any]
    ) -> None:
        self.metrics.outcomes.labels(decision.rule, outcome).inc()
        record = {
            "id": f"{decision.id}:{outcome}",
            "kind": "remediation",
            "decision_id": decision.id,
            "rule": decision.rule,
            "mode": decision.mode,
            "connect_cluster": decision.connect_cluster,
            "connector": decision.connector,
            "actions": [a.model_dump(mode="json") for a in decision.actions],
            "record": decision.record.model_dump() if decision.record else None,
            "outcome": outcome,
            "message": message,
            "decided_at_ms": self.now_ms(),
            **extra,
        }
        # A located record is in the saga, whatever its end: failed and aborted skips name it too.
        saga = self.sagas.get(str(extra["saga"])) if "saga" in extra else None
        if saga is not None and saga.record is not None:
            record["record"] = saga.record
        try:
            await self.audit.write(record)
        except OffsetdError as exc:
            log.error("could not audit the outcome of %s (%s): %s", decision.id, outcome, exc)
        level = logging.WARNING if outcome in ("failed", "aborted") else logging.INFO
        log.log(level, "remediation %s: %s %s", decision.id, outcome, message)
        if self.on_outcome is not None and decision.outcome == "planned":
            try:
                await self.on_outcome(decision, outcome, extra)
            except Exception:  # the outcome is audited; the engine's limits then just expire
                log.exception("could not report the outcome of %s to the engine", decision.id)

    async def _decision_of(self, record: SagaRecord) -> Decision | None:
        """The decision behind a saga, from the audit topic (it is written before any action)."""
        records = await asyncio.to_thread(read_records, self.audit.conf, self.audit.topic)
        for raw in records:
            if raw.get("id") == record.decision_id and raw.get("kind") != "remediation":
                return _decision_from_audit(raw)
        return None

    async def _approvals_loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                state = await self.control.acatch_up()
            except OffsetdError as exc:
                log.warning("could not read approvals: %s", exc)
                continue
            for decision_id in list(self._waiting_approval):
                approval = state.approval(decision_id)
                if approval is None or approval.status == "pending":
                    continue
                decision = self._waiting_approval.pop(decision_id, None)
                if decision is not None:
                    log.info("decision %s was %s; handling it", decision_id, approval.status)
                    self._submitted.add(decision_id)
                    self._enqueue(decision)  # a second handling, on purpose: the answer


async def call_again(
    what: str,
    call: Callable[[], Awaitable[T]],
    delays_s: Sequence[float],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """`call` (idempotent), tried again after each of `delays_s` when Connect did not answer,
    was busy or failed on its side; any other error is raised at once, the last one too."""

    def said(error: Exception, _attempt: int, delay: float) -> None:
        log.warning("could not %s (%s); trying again in %g s", what, error, delay)

    return await retry_call(call, delays_s, before_retry=said, sleep=sleep)


def _restarting(state: ConnectorState) -> list[str]:
    """The instances a restart answer marks RESTARTING: 'connector', 'task N'."""
    found = ["connector"] if state.state == "RESTARTING" else []
    return found + [f"task {t.id}" for t in state.tasks if t.state == "RESTARTING"]


def _states(state: ConnectorState) -> str:
    tasks = ", ".join(f"{t.id}={t.state}" for t in state.tasks) or "none"
    return f"connector {state.state}, tasks {tasks}"


def _failure_trigger(decision: Decision) -> bool:
    """Decisions caused by a failure (a FAILED status or a DLQ record) can trip the breaker."""
    trigger = decision.inputs.trigger
    return trigger.kind == "dlq_record" or trigger.state == "FAILED"


def _decision_from_audit(raw: dict[str, Any]) -> Decision:
    return Decision.model_validate({k: v for k, v in raw.items() if k != "rule_spec"})
