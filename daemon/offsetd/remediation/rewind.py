"""The daemon's `rewind` action: move a connector back to a time, or to a plan file, safely.

The target is resolved by the offsets toolkit, never here: a time by one batched ListOffsets
(`offsetd.offsets.retarget.target_patch`, exactly what `offsetd offsets alter --to-timestamp`
does), a plan file by `offsetd.offsets.rewind_plan.load_plan` (what `offsetd rewind plan`
wrote, its hash checked). The change itself goes through `OffsetsService`'s steps — snapshot
(the undo id), stop, wait STOPPED with no tasks, write, read back, restore the prior state —
the same steps the skip saga uses, so `offsetd offsets undo <id>` works for a rewind like
for any change.

Why not `OffsetsService.execute` in one go: a PATCH reply that only the framework-managed
offsets changed must leave the connector STOPPED (the rewind is unverified), and `execute`
would resume it. And why a saga record: a daemon killed between the stop and the resume must
not leave the connector STOPPED without anyone knowing. Progress goes to the sagas topic
(`rewind/<cluster>/<connector>/<decision id>`) before the stop and after each step; a restarted
daemon finishes it (`recover`): offsets still the before-image or already the target -> the
prior state is restored; anything else -> left STOPPED, loudly.

Why one module of ~600 lines: resolving the target, the steps and their recovery are one state
machine, like the skip saga's, and are read against the same sequence; the action's handler is
`actions.rewind`, the offsets work is the `rest` backend's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from offsetd.config import Settings
from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX
from offsetd.engine import Decision
from offsetd.errors import ChangeIncomplete, InvalidDocument, OffsetdError
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, OffsetEntry, entries_from_json, same_offsets
from offsetd.offsets.operations import OffsetsService
from offsetd.offsets.retarget import Selection, target_patch
from offsetd.offsets.rewind_plan import load_plan  # plain JSON: reading a plan needs no pyspark
from offsetd.offsets.snapshots import Snapshot
from offsetd.offsets.targets import Target, TargetKind, parse_timestamp
from offsetd.remediation import faults
from offsetd.remediation.sagas import SagaRecord, SagaStore, Status
from offsetd.remediation.skiprun import (
    CopyResult,
    RunCopier,
    SkipRunJob,
    check_positions,
    copier_for,
    quarantine_context,
    skip_run_job,
)

__all__ = [
    "REWIND_STEPS",
    "RewindRefused",
    "RewindResult",
    "RewindRunner",
    "RewindSpec",
    "plan_entries",
    "recovery_step",
    "rewind_key",
    "rewind_spec",
]

log = logging.getLogger("offsetd.remediation")

#: The rewind's durable steps, in order (the saga record's `completed`).
REWIND_STEPS = ("snapshot", "stop", "patch", "resume")


class RewindRefused(OffsetdError):
    """The rewind cannot be done as asked (bad target, a plan for another connector, ...);
    nothing was touched."""

    exit_code = 55


def rewind_key(connect_cluster: str, connector: str, decision_id: str) -> str:
    """One saga per decision: a rule may rewind the same connector again, later."""
    return f"rewind/{connect_cluster}/{connector}/{decision_id}"


# -- the target (pure) --------------------------------------------------------------------------


@dataclass(frozen=True)
class RewindSpec:
    """Exactly one of a time (epoch ms) or a plan file, from the decision's action params."""

    timestamp_ms: int | None = None
    plan_file: str | None = None

    def describe(self) -> str:
        if self.plan_file is not None:
            return f"the plan {self.plan_file}"
        return Target(TargetKind.TIMESTAMP, timestamp_ms=self.timestamp_ms).describe()


def rewind_spec(params: Mapping[str, Any]) -> RewindSpec:
    """The target of a rewind action (`to_timestamp_ms` or `to_timestamp`, or `plan_file`).

    The rule model already demands exactly one; this checks again because a decision may come
    from the audit topic (recovery) or a hand-written file, not only from a validated rule.
    """
    plan = params.get("plan_file")
    stamp: int | None = None
    raw_ms = params.get("to_timestamp_ms")
    if raw_ms is not None:
        if isinstance(raw_ms, bool) or not isinstance(raw_ms, int) or raw_ms < 0:
            raise RewindRefused(f"rewind: to_timestamp_ms {raw_ms!r} is not epoch milliseconds")
        stamp = raw_ms
    elif params.get("to_timestamp") is not None:
        try:
            stamp = parse_timestamp(str(params["to_timestamp"]))
        except InvalidDocument as exc:
            raise RewindRefused(
                f"rewind: {exc}".replace("--to-timestamp", "to_timestamp")
            ) from None
    if (stamp is None) == (plan is None):
        raise RewindRefused("rewind: give exactly one of to_timestamp or plan_file")
    if plan is not None and (not isinstance(plan, str) or not plan.strip()):
        raise RewindRefused(f"rewind: plan_file {plan!r} is not a path")
    return RewindSpec(stamp, plan)


def plan_entries(
    plan_connector: str,
    plan_kind: str | None,
    entries: Sequence[OffsetEntry],
    connector: str,
    kind: ConnectorKind,
    source: str,
) -> list[OffsetEntry]:
    """The patch of a loaded plan, once it is certain the plan is for this very connector.

    A plan computed for another connector (or another kind of connector under the same name)
    would move offsets that mean something else: refused, nothing touched.
    """
    if plan_connector != connector:
        raise RewindRefused(
            f"{source} is the rewind plan of {plan_connector}, not of {connector}: not applied"
        )
    if plan_kind is not None and plan_kind != str(kind):
        raise RewindRefused(
            f"{source} was computed for a {plan_kind} connector, but {connector} is a {kind} "
            "connector now: not applied"
        )
    if not entries:
        raise RewindRefused(f"{source} changes no partition of {connector}: nothing to rewind")
    return list(entries)


RecoveryStep = Literal["done", "restore", "left_stopped", "gone"]


def recovery_step(
    record: SagaRecord,
    state: str | None,
    current: Sequence[OffsetEntry] | None,
    before: Sequence[OffsetEntry],
    after: Sequence[OffsetEntry],
) -> tuple[RecoveryStep, bool]:
    """What a restarted daemon does with an unfinished rewind, and whether offsets moved.

    `state` is the connector's state now (None: it no longer exists), `current` its offsets
    now (None: unreadable). Offsets are only trusted when they are exactly the before-image
    (nothing written) or exactly the target (written): then the prior state is restored.
    Anything else — unreadable, or moved by someone else — leaves a STOPPED connector STOPPED
    for a person, with the undo id.
    """
    if state is None:
        return "gone", False
    # A recorded `patch` was written and read back: the rewind happened, even when a resumed
    # sink has since committed past the target (its offsets are no longer the after-image).
    moved = record.done("patch") or (
        current is not None and same_offsets(current, after) and not same_offsets(after, before)
    )
    if record.done("resume"):
        return "done", True
    if state != "STOPPED" or record.prior_state == "STOPPED":
        # Never stopped by us (killed before the stop), someone already put it back, or it
        # was STOPPED before the rewind and stays so: nothing to restore.
        return "done", moved
    if current is None:
        return "left_stopped", False
    if same_offsets(current, after) or same_offsets(current, before):
        return "restore", moved
    return "left_stopped", False


# -- running it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewindResult:
    """How a rewind ended, for the executor's audit record and metrics."""

    outcome: Literal["executed", "failed", "aborted"]
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    left_stopped: bool = False
    stopped_s: float = 0.0


class _Stop(Exception):
    """Ends a rewind early with this status and message (after cleanup was done)."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status: Status = status
        self.message = message


class RewindRunner:
    """Resolves a rewind decision's target and applies it through `OffsetsService`, durably."""

    def __init__(
        self,
        settings: Settings,
        *,
        owner: str = "offsetd",
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self.owner = owner
        self.now_ms = now_ms

    async def patch_for(
        self, service: OffsetsService, connector: str, spec: RewindSpec
    ) -> list[OffsetEntry]:
        """The entries to write: from the plan file, or the time resolved by ListOffsets."""
        patch, _job = await self.target_for(service, connector, spec)
        return patch

    async def target_for(
        self, service: OffsetsService, connector: str, spec: RewindSpec
    ) -> tuple[list[OffsetEntry], SkipRunJob | None]:
        """The entries to write, and for a skip-run plan the runs to quarantine first."""
        kind, _cls, _status = await service.describe(connector)
        if spec.plan_file is not None:
            path = Path(spec.plan_file).expanduser()
            plan = load_plan(path)
            entries = plan_entries(
                plan.connector,
                plan.summary.get("connector_kind"),
                plan.entries,
                connector,
                kind,
                str(path),
            )
            return entries, skip_run_job(plan)
        info = await service.client.info(connector)
        location = resolve_location(
            connector,
            info.config,
            kind,
            worker_view(self.settings, service.connect_cluster),
            self.settings,
        )
        current = await service.client.offsets(connector)
        target = Target(TargetKind.TIMESTAMP, timestamp_ms=spec.timestamp_ms)
        patch = await target_patch(
            kind, info.config, location, current, target, Selection(), self.settings
        )
        return patch, None

    async def copier(
        self, service: OffsetsService, connector: str, kind: ConnectorKind
    ) -> tuple[RunCopier, str]:
        """Where a skip-run's records are copied: the skip saga's quarantine topic."""
        worker = worker_view(self.settings, service.connect_cluster)
        return await copier_for(self.settings, service.client, worker, connector, kind)

    async def quarantine_runs(
        self, service: OffsetsService, job: SkipRunJob, plan: Plan, decision_id: str
    ) -> CopyResult:
        """Copy every record of a skip-run plan's runs to quarantine, before anything else is
        touched; raises (QuarantineFailed, InvalidDocument) when that cannot be done whole."""
        check_positions(job, plan.before)
        copier, where = await self.copier(service, job.connector, job.kind)
        log.info("%s: quarantining %d skip-run records to %s", job.connector, job.records, where)
        context = quarantine_context(job, service.connect_cluster, decision_id)
        return await asyncio.to_thread(copier.copy, job, context)

    async def run(
        self,
        service: OffsetsService,
        store: SagaStore,
        decision: Decision,
        params: Mapping[str, Any],
    ) -> RewindResult:
        """Resolve, plan, snapshot, stop, write, read back, restore; never raises OffsetdError."""
        connector = decision.connector
        try:
            spec = rewind_spec(params)
            patch, job = await self.target_for(service, connector, spec)
            plan = await service.plan_alter(connector, patch)
        except OffsetdError as exc:  # nothing was touched yet
            return RewindResult("aborted", f"rewind of {connector} not started: {exc}")
        copied: CopyResult | None = None
        if job is not None:
            # skip-run: the records it skips are kept whole first; no copy, no change. Also when
            # the offsets are there already (applied before): what is missing is copied now.
            try:
                copied = await self.quarantine_runs(service, job, plan, decision.id)
            except OffsetdError as exc:
                return RewindResult(
                    "aborted",
                    f"rewind of {connector} not started: the skipped runs were not all "
                    f"quarantined ({exc}); nothing was stopped or patched",
                    {"target": spec.describe(), "before": _json(plan.before), "after": []},
                )
        quarantined = {} if copied is None or job is None else {"quarantine": _copies(job, copied)}
        if plan.patch is not None and same_offsets(plan.after, plan.before):
            return RewindResult(
                "executed",
                f"{connector} is already at {spec.describe()}: nothing to change",
                {
                    "target": spec.describe(),
                    "before": _json(plan.before),
                    "after": [],
                    **quarantined,
                },
            )
        now = self.now_ms()
        record = SagaRecord(
            key=rewind_key(decision.connect_cluster, connector, decision.id),
            kind="rewind",
            connect_cluster=decision.connect_cluster,
            connector=connector,
            decision_id=decision.id,
            rule=decision.rule,
            epoch=1,
            owner=self.owner,
            prior_state=plan.prior_state,
            prior_tasks=plan.prior_tasks,
            connector_kind=str(plan.kind),
            connector_class=plan.connector_class,
            patch=tuple(e.as_json() for e in patch),
            started_at_ms=now,
            updated_at_ms=now,
        )
        result = await _Rewind(self, service, store, record, spec.describe()).run(plan)
        return replace(result, extra={**result.extra, **quarantined}) if quarantined else result

    async def recover(
        self, service: OffsetsService, store: SagaStore, record: SagaRecord
    ) -> RewindResult:
        """Finish a rewind an earlier life of the daemon started (see `recovery_step`)."""
        taken = await store.put(replace(record, epoch=record.epoch + 1, owner=self.owner))
        rewind = _Rewind(self, service, store, taken, "the recorded target")
        return await rewind.recover()


class _Rewind:
    """One rewind: its saga record and the offsets service's steps in between."""

    def __init__(
        self,
        runner: RewindRunner,
        service: OffsetsService,
        store: SagaStore,
        record: SagaRecord,
        target: str,
    ) -> None:
        self.runner, self.service, self.store = runner, service, store
        self.record = record
        self.target = target
        self.before: tuple[OffsetEntry, ...] = ()
        self.after: tuple[OffsetEntry, ...] = ()
        self.snapshot_id: str | None = record.snapshot_id

    async def _step(self, step: str, **changes: Any) -> None:
        await self.store.check_owner(self.record)
        self.record = await self.store.put(
            self.record.step_done(step, self.runner.now_ms(), **changes)
        )

    async def run(self, plan: Plan) -> RewindResult:
        service, connector = self.service, plan.connector
        try:
            faults.point("snapshot", "before")
            snapshot = await service.snapshot(plan)
            self.snapshot_id, self.before, self.after = snapshot.id, plan.before, plan.after
            faults.point("snapshot", "after-action")
            await self._step("snapshot", snapshot_id=snapshot.id)
            faults.point("snapshot", "after-progress")
            faults.point("stop", "before")
            try:
                plan, snapshot = await service.stop_and_wait(plan, snapshot)
            except OffsetdError as exc:
                restored = await _put_back(service, plan)
                await service.record_outcome(snapshot, "failed", plan.before, str(exc))
                status: Status = "left_stopped" if "may be STOPPED" in restored else "failed"
                raise _Stop(status, f"stopping {connector} failed ({exc}); {restored}") from None
            self.before, self.after = plan.before, plan.after
            faults.point("stop", "after-action")
            await self._step("stop", stopped_at_ms=self.runner.now_ms())
            faults.point("stop", "after-progress")
            faults.point("patch", "before")
            actual = await self._write(plan, snapshot)
            faults.point("patch", "after-action")
            await self._step("patch")
            faults.point("patch", "after-progress")
            faults.point("resume", "before")
            final = await self._resume(plan, snapshot, actual)
            faults.point("resume", "after-action")
            await self._step("resume", resumed_at_ms=self.runner.now_ms())
            faults.point("resume", "after-progress")
        except _Stop as stop:
            return await self._end(stop.status, stop.message)
        except OffsetdError as exc:  # the saga store (or snapshot store) failed between steps
            text = f"rewind of {connector} failed: {exc}"
            if self.record.done("stop") and not self.record.done("resume"):
                restored = await _put_back(service, plan)
                text = f"{text}; {restored} (undo id {self.snapshot_id})"
                if "may be STOPPED" in restored:
                    return await self._end("left_stopped", text)
            return await self._end("failed", text)
        message = (
            f"rewound {connector} to {self.target}: {_moves(self.before, self.after)}; "
            f"{final} again (undo: offsetd offsets undo {snapshot.id})"
        )
        return await self._end("done", message)

    async def _write(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
        service, connector = self.service, plan.connector
        try:
            message = await service.write(plan, snapshot)
        except ChangeIncomplete as exc:
            raise _Stop("left_stopped", str(exc)) from None
        except OffsetdError as exc:  # read back unchanged, and the connector was put back
            raise _Stop("failed", f"the rewind of {connector} was refused: {exc}") from None
        if message.startswith(FRAMEWORK_ONLY_PREFIX):
            text = (
                f"Connect changed only the framework-managed offsets of {connector} "
                f'("{message[:160]}"): the rewind is unverified, so the connector is left '
                f"STOPPED; check its external offsets, then resume it (undo id {snapshot.id})"
            )
            await service.record_outcome(snapshot, "left-stopped", plan.after, text)
            raise _Stop("left_stopped", text)
        try:
            actual = await service.read_back(plan, snapshot)
        except ChangeIncomplete as exc:
            raise _Stop("left_stopped", str(exc)) from None
        self.after = actual
        return actual

    async def _resume(self, plan: Plan, snapshot: Snapshot, actual: tuple[OffsetEntry, ...]) -> str:
        service, connector = self.service, plan.connector
        try:
            final = await service.restore_state(plan)
        except ChangeIncomplete as exc:
            # Resumed, but not all RUNNING in time: it is not STOPPED, and the offsets moved.
            await service.record_outcome(snapshot, "applied", actual, str(exc))
            raise _Stop(
                "failed", f"{connector} was rewound (undo id {snapshot.id}), but {exc}"
            ) from None
        except OffsetdError as exc:
            text = (
                f"the offsets of {connector} were rewound, but restoring its {plan.prior_state} "
                f"state failed ({exc}); it is left STOPPED (undo id {snapshot.id})"
            )
            await service.record_outcome(snapshot, "restore-failed", actual, text)
            raise _Stop("left_stopped", text) from None
        await service.record_outcome(snapshot, "applied", actual, f"now {final}")
        if plan.kind is ConnectorKind.MIRROR_SOURCE and final == "RUNNING":
            outcome = Outcome(plan, snapshot.id, actual, final, "")
            try:
                await service.verify_replicating(outcome)
            except OffsetdError as exc:
                raise _Stop("failed", f"{connector} was rewound but: {exc}") from None
        return final

    async def recover(self) -> RewindResult:
        rec, service = self.record, self.service
        if rec.snapshot_id is None or rec.prior_state is None:
            # Killed before the snapshot was recorded: nothing was stopped or written.
            return await self._end("aborted", f"{rec.connector}: the rewind never started")
        try:
            snapshot = await service.load_snapshot(rec.snapshot_id)
        except OffsetdError as exc:
            # Without the images nothing can be compared: whatever state it is in, it stays.
            return await self._end(
                "left_stopped",
                f"a rewind of {rec.connector} was interrupted and its snapshot "
                f"{rec.snapshot_id} cannot be read ({exc}); it may be left STOPPED: check it",
            )
        self.before, self.after = snapshot.before, snapshot.after
        try:
            status = await service.client.status(rec.connector)
            state: str | None = status.state
        except OffsetdError as exc:
            log.warning("recovering %s: status unreadable (%s)", rec.key, exc)
            state = "STOPPED"  # assume the worst: it stays as it is, and we say so
        try:
            current: tuple[OffsetEntry, ...] | None = tuple(
                await service.client.offsets(rec.connector)
            )
        except OffsetdError:
            current = None
        step, moved = recovery_step(rec, state, current, snapshot.before, snapshot.after)
        undo = f"undo id {snapshot.id}"
        if step == "gone":
            return await self._end("aborted", f"{rec.connector} no longer exists ({undo})")
        if step == "done":
            what = "rewound" if moved else "left unchanged"
            return await self._end("done" if moved else "aborted", f"{rec.connector} was {what}")
        if step == "left_stopped":
            text = (
                f"a rewind of {rec.connector} was interrupted after it stopped the connector, "
                "and its offsets are neither the before-image nor the target; left STOPPED "
                f"for a person ({undo})"
            )
            await service.record_outcome(snapshot, "left-stopped", current or (), text)
            return await self._end("left_stopped", text)
        plan = Plan(
            rec.connector,
            "alter",
            ConnectorKind(rec.connector_kind or "sink"),
            rec.connector_class or "",
            rec.prior_state,
            rec.prior_tasks,
            snapshot.before,
            tuple(entries_from_json(rec.patch)),
            snapshot.after,
        )
        try:
            final = await service.restore_state(plan)
        except OffsetdError as exc:
            text = f"recovering the rewind of {rec.connector}: could not restore it ({exc}); {undo}"
            return await self._end("left_stopped" if state == "STOPPED" else "failed", text)
        if moved:
            await service.record_outcome(snapshot, "applied", current or (), f"now {final}")
            return await self._end("done", f"rewound {rec.connector} (recovered); {final} again")
        await service.record_outcome(snapshot, "failed", snapshot.before, "interrupted")
        return await self._end(
            "aborted",
            f"the rewind of {rec.connector} was interrupted before it wrote; {final} again",
        )

    async def _end(self, status: Status, message: str) -> RewindResult:
        now = self.runner.now_ms()
        try:
            self.record = await self.store.put(self.record.ended(status, now, message))
        except OffsetdError as exc:
            log.error("could not record the end of %s: %s", self.record.key, exc)
        stopped_s = 0.0
        if self.record.stopped_at_ms is not None:
            until = self.record.resumed_at_ms or now
            stopped_s = max(until - self.record.stopped_at_ms, 0) / 1000
        outcome: Literal["executed", "failed", "aborted"] = (
            "executed" if status == "done" else "aborted" if status == "aborted" else "failed"
        )
        extra: dict[str, Any] = {
            "saga": self.record.key,
            "saga_status": status,
            "steps": list(self.record.events),
            "target": self.target,
            "snapshot_id": self.snapshot_id,
            "before": _json(self.before),
            "after": _json(self.after),
        }
        return RewindResult(outcome, message, extra, status == "left_stopped", stopped_s)


async def _put_back(service: OffsetsService, plan: Plan) -> str:
    try:
        return f"{plan.connector} is {await service.restore_state(plan)} again"
    except OffsetdError as exc:
        return f"putting {plan.connector} back failed ({exc}): it may be STOPPED"


def _copies(job: SkipRunJob, copied: CopyResult) -> dict[str, Any]:
    """Where a skip-run's records were quarantined (for the audit record)."""
    return {
        "topic": copied.topic,
        "partition": copied.partition,
        "key": job.key,
        "copied": copied.copied,
        "already": copied.already,
        "runs": job.describe(),
    }


def _json(entries: Sequence[OffsetEntry]) -> list[dict[str, Any]]:
    return [e.as_json() for e in entries]


def _moves(before: Sequence[OffsetEntry], after: Sequence[OffsetEntry]) -> str:
    was = {e.key: e.offset for e in before}
    parts = [
        f"{e.key}: {was.get(e.key)} -> {e.offset}" for e in after if was.get(e.key) != e.offset
    ]
    return ", ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "") or (
        "no partition moved"
    )
