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

The executor queues, guards, dispatches and records; what each action does is its handler's
(`offsetd.remediation.actions`), what the guards read is `guard_inputs`, resuming earlier lives'
work is `recovery`, waiting for approvals is `approvals`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.connect.client import ConnectClient
from offsetd.engine import ConnectorMeta, Decision
from offsetd.engine.decision import Firing
from offsetd.errors import OffsetdError
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.backend import StepwiseBackend
from offsetd.offsets.registry import write_refusal_for
from offsetd.offsets.snapshots import SnapshotStore
from offsetd.remediation.actions import dispatch
from offsetd.remediation.actions.base import ActionCall, Locator
from offsetd.remediation.approvals import ApprovalWatch, PauseWatch
from offsetd.remediation.audit_record import outcome_record
from offsetd.remediation.breaker_trip import BreakerCheck, BreakerTrip
from offsetd.remediation.clients import Clients, call_again
from offsetd.remediation.control import ControlStore
from offsetd.remediation.guard_inputs import GuardReads
from offsetd.remediation.guards import (
    GuardContext,
    StatusSample,
    Verdict,
    WritePermit,
    evaluate,
)
from offsetd.remediation.kube_events.publisher import KubeEvents
from offsetd.remediation.notify import named_webhook, notify
from offsetd.remediation.recent_ids import RecentIds
from offsetd.remediation.recovery import Recovery
from offsetd.remediation.rewind import RewindRunner
from offsetd.remediation.sagas import SagaStore
from offsetd.remediation.skip import Quarantine
from offsetd.scope import scope_of

__all__ = ["Remediator", "call_again"]

log = logging.getLogger("offsetd.remediation")
T = TypeVar("T")


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
    # Kubernetes Events of the outcomes on Strimzi's resources, queued, written off this path
    events: KubeEvents | None = None
    _queues: dict[str, asyncio.Queue[Decision | BreakerCheck]] = field(default_factory=dict)
    _workers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _skip_pending: dict[str, asyncio.Event] = field(default_factory=dict)
    _breaker_checks: set[str] = field(default_factory=set)  # connectors with one queued
    _submitted: RecentIds = field(init=False)
    _approvals: ApprovalWatch = field(default_factory=ApprovalWatch)
    _pauses: PauseWatch = field(default_factory=PauseWatch)
    _after_pause: set[str] = field(default_factory=set)  # decisions handed back by a resume
    _recovery: Recovery = field(init=False)
    _reads: GuardReads = field(init=False)
    _clients: Clients = field(init=False)
    _breaker: BreakerTrip = field(init=False)
    _background: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._submitted = RecentIds(self.now_ms)
        self._recovery = Recovery(self)
        self._reads = GuardReads(self)
        self._clients = Clients(self)
        self._breaker = BreakerTrip(self, self._reads)

    # -- what the handlers, recovery and guard reads use ----------------------------------------

    @property
    def skip_pending(self) -> dict[str, asyncio.Event]:
        return self._skip_pending

    @property
    def submitted(self) -> RecentIds:
        return self._submitted

    @property
    def approvals(self) -> ApprovalWatch:
        return self._approvals

    def offsets_service(self, client: ConnectClient, connect_cluster: str) -> StepwiseBackend:
        return self._clients.backend(client, connect_cluster)  # offsetd.remediation.clients

    async def again(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        return await call_again(what, call, self.retry_delays_s)

    async def notify(self, decision: Decision, params: dict[str, Any], outcome: str) -> None:
        await notify(
            decision,
            named_webhook(params, self.settings.webhooks),
            outcome,
            metrics=self.metrics,
            timeout_ms=self.settings.webhook_timeout,
        )

    def client(
        self, cluster: ConnectCluster, calls: list[dict[str, Any]]
    ) -> contextlib.AbstractAsyncContextManager[ConnectClient]:
        """A Connect client whose every answer is logged for the audit; its moves go through
        the cluster's offsets backend (offsetd.remediation.clients)."""
        return self._clients.open(cluster, calls)

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

    def note_suppressed(self, decisions: Sequence[Firing]) -> None:
        """Decisions the engine suppressed (counted in the audit's tallies, never handled
        here) still carry news for one guard: a failure soon after a skip opens the breaker.

        The check runs in the connector's queue, behind a skip still pending there, after a
        fresh read of the control state. It is queued only when it can trip: a skip of the
        connector is pending, or the control state this process knows has a recent one (no
        queue, no read per frame in a DLQ storm), and at most one waits per connector.
        """
        failures = [d for d in decisions if d.from_failure]
        owner = f"{failures[0].connect_cluster}/{failures[0].connector}" if failures else ""
        if not failures or owner in self._breaker_checks:
            return
        if owner in self._skip_pending or self._breaker.may_trip(failures):
            self._breaker_checks.add(owner)
            self._enqueue(BreakerCheck(failures))

    def _enqueue(self, decision: Decision | BreakerCheck) -> None:
        owner = f"{decision.connect_cluster}/{decision.connector}"
        if (
            isinstance(decision, Decision)
            and decision.effects.skips_record
            and decision.outcome == "planned"
        ):
            self._skip_pending.setdefault(owner, asyncio.Event()).set()
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = asyncio.Queue()
            self._workers[owner] = asyncio.create_task(self._work(owner, queue), name=owner)
        queue.put_nowait(decision)

    async def start(
        self, owns: Callable[[str, str], bool], assigned: Awaitable[None] | None = None
    ) -> None:
        """Resume what earlier lives left unfinished (`recovery`); watch approvals."""
        await self._recovery.resume(owns, assigned)
        self._background.append(
            asyncio.create_task(
                self._approvals.run(self.control, lambda: self.poll_s, self._answered)
            )
        )
        self._background.append(
            asyncio.create_task(self._pauses.run(self.control, lambda: self.poll_s, self._resumed))
        )

    def _answered(self, decision: Decision) -> None:
        self._submitted.add(decision.id)
        self._enqueue(decision)  # a second handling, on purpose: the answer

    def _resumed(self, decision: Decision) -> None:
        self._after_pause.add(decision.id)
        self._answered(decision)  # a second handling: the resume is the new input

    async def stop(self) -> None:
        tasks = [*self._workers.values(), *self._background, *self._recovery.tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.events is not None:  # what is queued gets a few seconds, then is dropped
            await self.events.close()

    async def idle(self) -> None:
        """Wait until recoveries and every queued decision are done (tests, shutdown)."""
        await asyncio.gather(*self._recovery.tasks, return_exceptions=True)
        for queue in list(self._queues.values()):
            await queue.join()
        if self.events is not None:
            await self.events.flush()

    # -- per connector --------------------------------------------------------------------------

    async def _work(self, owner: str, queue: asyncio.Queue[Decision | BreakerCheck]) -> None:
        while True:
            item = await queue.get()
            try:
                if isinstance(item, BreakerCheck):
                    self._breaker_checks.discard(owner)
                    await self._breaker.trip(item.failures)
                else:
                    await self.handle(item)
            except Exception as exc:  # one bad remediation must not stop the connector's queue
                if isinstance(item, BreakerCheck):
                    log.exception("the breaker check of %s failed", item.connector)
                else:
                    log.exception("remediation of %s failed unexpectedly", item.id)
                    # Every decision gets an outcome in the audit, an unexpected failure too.
                    await self.finish(item, "failed", f"unexpected error: {exc!r}", {})
            finally:
                queue.task_done()

    async def handle(self, decision: Decision) -> str:
        """Guard, act, audit. Returns the final outcome."""
        cluster = self.connect.get(decision.connect_cluster)
        if decision.id in self._after_pause and cluster is not None:
            self._after_pause.discard(decision.id)
            gone = await self._breaker.no_longer_failing(decision, cluster)
            if gone is not None:
                await self.finish(decision, "not_needed", f"after the pause: {gone}", {})
                return "not_needed"
        verdict = await self._verdict(decision, cluster)
        if verdict.outcome == "suppressed_blast_radius":
            self.metrics.blast_radius_holds.labels(decision.connect_cluster).inc()
        if verdict.permit is None or not verdict.proceed:
            await self._held(decision, verdict)
            return verdict.outcome
        if cluster is None:
            await self.finish(decision, "failed", "unknown Connect cluster", {})
            return "failed"
        return await self._act(decision, cluster, verdict.permit, verdict.guard, verdict.detail)

    async def _verdict(self, decision: Decision, cluster: ConnectCluster | None) -> Verdict:
        """Every guard's say, with what they read now (control topic, Connect, status topic)."""
        state = await self._breaker.trip([decision])
        failing: int | None = 0
        failing_names: tuple[str, ...] = ()
        writes = decision.effects.writes
        if cluster is not None and writes:  # a read: observe counts too, for its would_be
            await self._reads.settle(decision)
            failing, failing_names = await self._reads.failing_connectors(
                decision.connect_cluster, cluster
            )
            stuck = decision.inputs.trigger.stuck_with  # progress: many stuck is an outage too
            if stuck and failing is not None:
                names = sorted({*failing_names, *stuck})
                failing, failing_names = len(names), tuple(names)
        meta = await self._reads.meta(decision, cluster)
        return evaluate(
            decision,
            GuardContext(
                settings=self.settings,
                control=state,
                connector_class=meta.connector_class if meta else None,
                connector_type=meta.connector_type if meta else None,
                offsets_refusal=write_refusal_for(decision.connect_cluster, cluster),
                failing_connectors=failing,
                now_ms=self.now_ms(),
                failing_names=failing_names,
                scope=scope_of(self.settings, decision.connect_cluster, cluster),  # offsetd.scope
                connector_labels=meta.labels if meta else None,
            ),
        )

    async def _held(self, decision: Decision, verdict: Verdict) -> None:
        """A decision the guards hold back: recorded (and its approval asked for), not run."""
        if verdict.outcome == "awaiting_approval":
            self._approvals.wait_for(decision)
            await asyncio.to_thread(
                self.control.request_approval,
                decision.id,
                decision.rule,
                decision.connect_cluster,
                decision.connector,
                decision.summary(),
            )
        if (
            verdict.outcome == "suppressed_paused"
            and decision.outcome == "planned"
            and decision.effects.writes
        ):
            self._pauses.hold(decision)  # acted on after the resume, if it still holds
        extra: dict[str, Any] = {"guard": verdict.guard}
        if verdict.would_be:
            extra["would_be"] = verdict.would_be
        await self._notify_only(decision, verdict.outcome)
        await self.finish(decision, verdict.outcome, verdict.detail, extra)

    async def _notify_only(self, decision: Decision, outcome: str) -> None:
        """A held-back decision still tells people when its rule says notify (not for dry runs)."""
        if outcome in ("dry_run", "suppressed_out_of_scope") or decision.outcome == "suppressed":
            return
        for action in decision.actions:
            if action.effects.tells_people:
                await self.notify(decision, action.params, outcome)

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
        outcome, said = "executed", []
        extra: dict[str, Any] = {"guard": guard, "verdict": verdict}
        async with self.client(cluster, calls) as client:
            call = ActionCall(client, cluster, decision)
            for action in decision.actions:
                try:
                    outcome, message, more = await dispatch(self, call, action)
                except OffsetdError as exc:
                    outcome, message, more = "failed", str(exc), {}
                extra.update(more)
                said.append(message)
                if outcome != "executed":
                    break
        message = "; ".join(m for m in said if m)  # every action's sentence, in order
        extra["http_calls"] = calls
        action_name = "+".join(decision.action_types)
        self.metrics.duration.labels(action_name, outcome).observe(time.monotonic() - started)
        await self.finish(decision, outcome, message, extra)
        return outcome

    async def finish(
        self, decision: Decision, outcome: str, message: str, extra: dict[str, Any]
    ) -> None:
        """The outcome, audited (and counted, logged, told to the engine)."""
        self.metrics.outcomes.labels(decision.rule, outcome).inc()
        # A located record is in the saga, whatever its end: failed and aborted skips name it too.
        saga = self.sagas.get(str(extra["saga"])) if "saga" in extra else None
        located = saga.record if saga is not None else None
        record = outcome_record(decision, outcome, message, self.now_ms(), extra, located)
        try:
            await self.audit.write(record)
        except OffsetdError as exc:
            log.error("could not audit the outcome of %s (%s): %s", decision.id, outcome, exc)
        if self.events is not None:  # queued only: never slows or fails the remediation
            self.events.publish(decision, outcome, message, extra, located)
        level = logging.WARNING if outcome in ("failed", "aborted") else logging.INFO
        log.log(level, "remediation %s: %s %s", decision.id, outcome, message)
        if self.on_outcome is not None and decision.outcome == "planned":
            try:
                await self.on_outcome(decision, outcome, extra)
            except Exception:  # the outcome is audited; the engine's limits then just expire
                log.exception("could not report the outcome of %s to the engine", decision.id)
