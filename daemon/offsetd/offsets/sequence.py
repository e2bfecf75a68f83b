"""The safe sequence of an offsets change, over any backend's parts (`offsetd.offsets.backend`).

record the connector's state -> snapshot the offsets (undo image, durable before anything moves)
-> stop -> wait until STOPPED with no tasks -> write -> read back and compare -> restore the
recorded state (RUNNING: resume and wait until the connector and every task run; PAUSED:
pause; STOPPED: leave) -> record the after-image.

A FAILED or UNASSIGNED connector is refused before anything is touched. After any failure past
the stop step the connector is put back as it was, or left STOPPED with a message that says so
and gives the undo id: never half-done and silent.

Why one module: the sequence is one concern that must be read whole — each step's failure path
(put back quietly, left STOPPED with the undo id, a refused write read back before "unchanged")
names the steps before and after it, and the daemon's sagas call the same steps one by one.

`ChangeSequence` is every backend that works through running workers (`rest`, `strimzi`,
`strimzi-manual`): the sequence is written once, here; how a backend reads, writes and moves a
connector are its `Parts`. Reads of status, info and config go to Connect's REST API; `client`
hands callers those reads with the moving calls routed through the parts (`BackendClient`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Self

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.errors import (
    ChangeIncomplete,
    ConnectorStateRefused,
    InvalidDocument,
    NotStoppedInTime,
    OffsetdError,
    UndoConflict,
)
from offsetd.offsets import documents
from offsetd.offsets.backend import BackendRequest, Feature, Parts, Refusal, Timeouts
from offsetd.offsets.change import (
    Outcome,
    Plan,
    mismatch,
    nothing_to_change,
    plan_notes,
    rebased,
    three_way_text,
    warnings_of,
)
from offsetd.offsets.location import WorkerView, resolve_location
from offsetd.offsets.mm2_progress import replicating_again
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    apply_patch,
    as_map,
    connector_kind,
    same_offsets,
)
from offsetd.offsets.retarget import Selection, target_patch
from offsetd.offsets.routed import BackendClient
from offsetd.offsets.snapshots import Snapshot, SnapshotStore, new_snapshot_id
from offsetd.offsets.targets import Target

__all__ = ["CHANGEABLE_STATES", "UNDOABLE_STATUSES", "ChangeSequence"]

CHANGEABLE_STATES = ("RUNNING", "PAUSED", "STOPPED")
# Changes that wrote offsets (or may have): their before-image is worth restoring.
UNDOABLE_STATUSES = ("applied", "left-stopped", "restore-failed")


class ChangeSequence:
    """Plans and executes offset changes on one Connect cluster, through a backend's parts."""

    def __init__(
        self,
        parts: Parts,
        store: SnapshotStore,
        *,
        connect_cluster: str,
        timeouts: Timeouts | None = None,
        log: Callable[[str], None] = lambda _msg: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        settings: Settings | None = None,
        worker: WorkerView | None = None,
    ) -> None:
        self.parts = parts
        self.name = parts.name
        self.rest = parts.client  # Connect's REST API, for reads
        self.client: ConnectClient = BackendClient(parts.client, self)
        self.store = store
        self.connect_cluster = connect_cluster
        self.timeouts = timeouts or Timeouts()
        self.log = log
        self.now = now
        self.settings = settings
        self.worker = worker

    @classmethod
    def for_request(cls, request: BackendRequest, parts: Parts) -> Self:
        return cls(
            parts,
            request.store,
            connect_cluster=request.connect_cluster,
            timeouts=request.timeouts,
            log=request.log,
            settings=request.settings,
            worker=request.worker,
        )

    # -- the backend protocol (offsetd.offsets.backend) ----------------------------------------

    def write_refusal(self) -> Refusal | None:
        return self.parts.refusal

    def feature_refusal(self, feature: Feature) -> str | None:
        return None

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        return await self.parts.reader.list_offsets(connectors)

    async def plan_document(self, connector: str, entries: list[Any]) -> Plan:
        kind, _cls, _status = await self.describe(connector)
        return await self.plan_alter(
            connector, documents.validate_entries(connector, kind, entries)
        )

    async def plan_target(self, connector: str, target: Target, selection: Selection) -> Plan:
        if self.worker is None:  # the CLI always knows it; the daemon's rewinds locate their own
            raise InvalidDocument(f"a target needs the worker view of {self.connect_cluster}")
        info = await self.rest.info(connector)
        kind, _cls, _status = await self.describe(connector)
        location = resolve_location(connector, info.config, kind, self.worker, self.settings)
        current = await self.parts.reader.offsets(connector)
        self.log(f"{connector}: offsets in {location.describe()}; target: {target.describe()}")
        patch = await target_patch(
            kind, info.config, location, current, target, selection, self.settings
        )
        return await self.plan_alter(connector, patch)

    async def apply(self, plan: Plan) -> Outcome:
        return await self.execute(plan)

    # -- planning -------------------------------------------------------------------------------

    async def describe(self, connector: str) -> tuple[ConnectorKind, str, ConnectorState]:
        info = await self.rest.info(connector)
        status = await self.rest.status(connector)
        return connector_kind(info.connector_class, info.type), info.connector_class, status

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> Plan:
        base = await self._base_plan(connector, "alter")
        after = tuple(apply_patch(base.before, patch))
        plan = replace(base, patch=tuple(patch), after=after, notes=plan_notes(base, "alter"))
        return await self.parts.route.shown(plan)

    async def plan_reset(self, connector: str) -> Plan:
        base = await self._base_plan(connector, "reset")
        plan = replace(base, patch=None, after=(), notes=plan_notes(base, "reset"))
        return await self.parts.route.shown(plan)

    async def plan_undo(self, snapshot_id: str, *, force: bool = False) -> Plan:
        snap = await asyncio.to_thread(self.store.get, snapshot_id)
        if snap.connect_cluster != self.connect_cluster:
            raise UndoConflict(
                f"snapshot {snapshot_id} was taken on Connect cluster {snap.connect_cluster}, "
                f"not {self.connect_cluster}: undo it there"
            )
        if snap.status not in UNDOABLE_STATUSES and not force:
            raise UndoConflict(
                f"snapshot {snapshot_id} is {snap.status!r}: its change was not applied, so there "
                "is nothing certain to undo (use --force to restore its before-image anyway)"
            )
        base = await self._base_plan(snap.connector, "undo")
        current = as_map(base.before)
        if not same_offsets(base.before, snap.after) and not force:
            raise UndoConflict(
                f"the offsets of {snap.connector} moved since change {snapshot_id}; "
                "review the three-way diff and repeat with --force to restore the before-image:\n"
                + three_way_text(snap.before, snap.after, base.before)
            )
        target = as_map(snap.before)
        patch = [*target.values()]
        patch += [OffsetEntry(e.partition, None) for k, e in current.items() if k not in target]
        after = tuple(apply_patch(base.before, patch))
        plan = replace(
            base,
            patch=tuple(patch),
            after=after,
            undo_of=snapshot_id,
            notes=(f"restores the before-image of {snapshot_id} exactly",),
        )
        return await self.parts.route.shown(plan)

    async def _base_plan(self, connector: str, operation: str) -> Plan:
        await self.parts.route.admit(connector)
        kind, connector_class, status = await self.describe(connector)
        if status.state not in CHANGEABLE_STATES:
            raise ConnectorStateRefused(
                f"{connector} is {status.state}: offsetd changes the offsets of RUNNING, PAUSED "
                "or STOPPED connectors only, and touched nothing; fix or restart it first"
            )
        await self.parts.reader.require_api()
        before = tuple(await self.parts.reader.offsets(connector))
        return Plan(
            connector,
            operation,
            kind,
            connector_class,
            status.state,
            len(status.tasks),
            before,
            None,
            before,
        )

    # -- execution ------------------------------------------------------------------------------

    async def execute(self, plan: Plan) -> Outcome:
        nothing = nothing_to_change(plan)
        if nothing is not None:
            # Nothing to write (every partition already at its target, or a connector with no
            # offsets to reset): never stop it, and no snapshot of a change that is not one.
            self.log(f"{plan.connector}: {nothing}")
            if plan.undo_of is not None:  # its before-image holds: the change is undone
                original = await asyncio.to_thread(self.store.get, plan.undo_of)
                text = "undone: its before-image held already, nothing was written"
                await self._record(replace(original, status="undone", message=text))
            return Outcome(plan, "", plan.before, plan.prior_state, nothing)
        self.parts.route.refuse(plan)
        await self._recheck(plan)
        snapshot = await self.snapshot(plan)
        try:
            return await self._change(plan, snapshot)
        except _Aborted as aborted:
            raise aborted.error from None

    async def _change(self, plan: Plan, snapshot: Snapshot) -> Outcome:
        sid = snapshot.id
        try:
            plan, snapshot = await self._stopped(plan, snapshot, stop=plan.prior_state != "STOPPED")
        except OffsetdError as exc:  # nothing was written yet
            restored = await self._restore_quietly(plan)
            await self._record(replace(snapshot, status="failed", message=str(exc)))
            raise _Aborted(exc.reworded(f"{exc}; {restored}; offsets unchanged")) from None
        try:
            message = await self.write(plan, snapshot)
        except OffsetdError as exc:
            raise _Aborted(exc) from None
        actual = await self.read_back(plan, snapshot)
        warnings = warnings_of(plan, message)
        try:
            final_state = await self._restore(plan)
        except OffsetdError as exc:
            text = (
                f"offsets of {plan.connector} were changed (snapshot {sid}), but restoring its "
                f"{plan.prior_state} state failed: {exc}; undo with `offsetd offsets undo {sid}`"
            )
            await self._record(
                replace(snapshot, status="restore-failed", after=actual, message=text)
            )
            raise ChangeIncomplete(text) from None
        await self._record(replace(snapshot, status="applied", after=actual, message=message))
        if plan.undo_of is not None:
            original = await asyncio.to_thread(self.store.get, plan.undo_of)
            await self._record(replace(original, status="undone", message=f"undone by {sid}"))
        return Outcome(plan, sid, actual, final_state, message, warnings)

    # -- the same steps one by one, for a caller that records its own progress between them --
    # (the daemon's skip saga: it persists a durable record after each step and can resume at
    # any of them after a crash; `execute` above is these steps in one go for the CLI)

    async def snapshot(self, plan: Plan) -> Snapshot:
        """Record the before-image durably, before anything moves; its id is the undo id."""
        snapshot = Snapshot(
            id=new_snapshot_id(self.now()),
            created_at=self.now(),
            connect_cluster=self.connect_cluster,
            connector=plan.connector,
            operation=plan.operation,
            status="planned",
            before=plan.before,
            after=plan.after,
            undo_of=plan.undo_of,
        )
        await self._record(snapshot)
        return snapshot

    async def stop_and_wait(self, plan: Plan, snapshot: Snapshot) -> tuple[Plan, Snapshot]:
        """Stop (unless already STOPPED), wait for STOPPED with no tasks, rebase the images."""
        stop = (await self.rest.status(plan.connector)).state != "STOPPED"
        return await self._stopped(plan, snapshot, stop=stop)

    async def _stopped(
        self, plan: Plan, snapshot: Snapshot, *, stop: bool
    ) -> tuple[Plan, Snapshot]:
        if stop:
            self.log(f"stopping {plan.connector}")
            await self.request_state(plan.connector, "STOPPED")
        await self._wait_stopped(plan.connector)
        # A running connector moved on until it stopped: the undo image is the one at rest.
        plan = rebased(plan, tuple(await self.parts.reader.offsets(plan.connector)))
        snapshot = replace(snapshot, status="stopped", before=plan.before, after=plan.after)
        await self._record(snapshot)
        return plan, snapshot

    async def write(self, plan: Plan, snapshot: Snapshot) -> str:
        """Write (or delete); a refused write is read back before anyone is told "unchanged".

        The write carries only the partitions that move (`Plan.writes`, against the offsets at
        rest); when none does any more (the connector stopped right at the targets), nothing is
        sent: Connect refuses an empty PATCH, and there is nothing to tell it."""
        writes = plan.writes
        if writes is not None and not writes:
            return f"not written: {_already_there(plan)}"
        try:
            return await self.parts.writer.write(plan.connector, writes)
        except OffsetdError as exc:
            raise await self._after_failed_write(plan, snapshot, exc) from None

    async def read_back(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
        """The offsets as Connect now reports them; a difference leaves the connector STOPPED."""
        sid = snapshot.id
        try:
            actual = tuple(await self.parts.reader.read_back(plan.connector))
            differs = mismatch(plan, actual)
            settle = time.monotonic() + self.timeouts.read_back_s
            while differs and time.monotonic() < settle:  # see Timeouts.read_back_s
                await asyncio.sleep(max(self.timeouts.poll_s, 0.05))
                actual = tuple(await self.parts.reader.read_back(plan.connector))
                differs = mismatch(plan, actual)
        except OffsetdError as exc:
            text = (
                f"offsets of {plan.connector} were written but could not be read back ({exc}); "
                "the connector is left STOPPED; check them and undo with "
                f"`offsetd offsets undo {sid}`"
            )
            await self._record(replace(snapshot, status="left-stopped", message=text))
            raise ChangeIncomplete(text) from None
        if differs:
            text = (
                f"offsets of {plan.connector} read back differently ({differs}); the connector "
                f"is left STOPPED; inspect it and undo with `offsetd offsets undo {sid}`"
            )
            await self._record(replace(snapshot, status="left-stopped", after=actual, message=text))
            raise ChangeIncomplete(text)
        return actual

    # -- the connector moves, through the backend's mover ----------------------------------------

    async def request_state(self, connector: str, state: str) -> None:
        """Ask for STOPPED, PAUSED or RUNNING; the caller waits for it."""
        await self.parts.mover.request_state(connector, state)

    async def write_offsets(self, connector: str, patch: list[OffsetEntry]) -> str:
        """One write of offsets, for a caller with its own retries (the skip saga)."""
        return await self.parts.writer.write(connector, tuple(patch))

    async def restart_failed(self, connector: str) -> ConnectorState:
        """Restart what is FAILED; the instances restarted are marked RESTARTING."""
        return await self.parts.mover.restart_failed(connector)

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState:
        """Restart one task whatever its state, or the connector and all its tasks (None)."""
        return await self.parts.mover.restart_tasks(connector, task_id)

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        """Replace the connector's config."""
        await self.parts.mover.put_config(connector, config)

    async def auto_restarted_by(self, connector: str) -> str | None:
        """Who restarts this connector on its own, so offsetd's restart rules stand down."""
        return await self.parts.mover.auto_restarted_by(connector)

    async def restore_state(self, plan: Plan) -> str:
        """Put the connector back in the state it had before the stop (see `_restore`)."""
        return await self._restore(plan)

    async def record_outcome(
        self, snapshot: Snapshot, status: str, after: tuple[OffsetEntry, ...], message: str
    ) -> None:
        await self._record(replace(snapshot, status=status, after=after, message=message))

    async def load_snapshot(self, snapshot_id: str) -> Snapshot:
        return await asyncio.to_thread(self.store.get, snapshot_id)

    async def _after_failed_write(
        self, plan: Plan, snapshot: Snapshot, exc: OffsetdError
    ) -> OffsetdError:
        """A refused or timed-out write may still have happened: look before saying so."""
        try:
            now = tuple(await self.parts.reader.offsets(plan.connector))
        except OffsetdError:
            now = None
        if now is not None and same_offsets(now, plan.before):
            restored = await self._restore_quietly(plan)
            await self._record(replace(snapshot, status="failed", message=str(exc)))
            return exc.reworded(f"{exc}; {restored}; offsets unchanged (snapshot {snapshot.id})")
        text = (
            f"{exc}; the offsets of {plan.connector} "
            f"{'could not be read back' if now is None else 'changed nonetheless'}, so the "
            "connector is left STOPPED; inspect it and undo with "
            f"`offsetd offsets undo {snapshot.id}`"
        )
        await self._record(
            replace(snapshot, status="left-stopped", after=now or snapshot.after, message=text)
        )
        return ChangeIncomplete(text)

    async def verify_replicating(self, outcome: Outcome) -> None:
        """After an MM2 reset or rewind: every touched partition shows progress again."""
        await replicating_again(self.parts.reader, outcome, self.timeouts, self.log)

    async def _recheck(self, plan: Plan) -> None:
        """Right before acting: the connector is still in the state the plan was made for."""
        status = await self.rest.status(plan.connector)
        if status.state != plan.prior_state:
            raise ConnectorStateRefused(
                f"{plan.connector} changed from {plan.prior_state} to {status.state} since the "
                "plan was made; nothing was touched, plan again"
            )

    async def _record(self, snapshot: Snapshot) -> None:
        await asyncio.to_thread(self.store.put, snapshot)

    async def _wait_stopped(self, connector: str) -> None:
        await self._wait(
            connector,
            lambda s: s.state == "STOPPED" and not s.tasks,
            self.timeouts.stop_s,
            lambda s: NotStoppedInTime(
                f"{connector} did not reach STOPPED with no tasks within "
                f"{self.timeouts.stop_s:g} s (it is {s.state} with {len(s.tasks)} tasks)"
            ),
        )

    async def _restore(self, plan: Plan) -> str:
        connector = plan.connector
        if plan.prior_state == "STOPPED":
            return "STOPPED"
        min_tasks = 1 if plan.prior_tasks else 0
        if plan.prior_state == "PAUSED":
            # Pausing a STOPPED connector starts it paused *without tasks* (Connect creates task
            # configs only when it runs); resuming first would let records flow, so we don't.
            await self.request_state(connector, "PAUSED")
            await self._wait(
                connector,
                lambda s: s.state == "PAUSED" and all(t.state == "PAUSED" for t in s.tasks),
                self.timeouts.resume_s,
                lambda s: ChangeIncomplete(f"{connector} did not return to PAUSED ({s.state})"),
            )
            return "PAUSED"
        self.log(f"resuming {connector}")
        await self.request_state(connector, "RUNNING")

        def running(s: ConnectorState) -> bool:
            failed = s.failed_part()
            if failed:
                raise ChangeIncomplete(f"after resuming {connector}, {failed}")
            return s.all_running(min_tasks)

        await self._wait(
            connector,
            running,
            self.timeouts.resume_s,
            lambda s: ChangeIncomplete(
                f"{connector} and its tasks were not all RUNNING within "
                f"{self.timeouts.resume_s:g} s ({s.state}, tasks "
                f"{[t.state for t in s.tasks]})"
            ),
        )
        return "RUNNING"

    async def _restore_quietly(self, plan: Plan) -> str:
        """After a failure: put the connector back, and say where it ended up."""
        try:
            return f"{plan.connector} was put back to {await self._restore(plan)}"
        except OffsetdError as exc:
            return (
                f"{plan.connector} could not be put back to {plan.prior_state} ({exc}) "
                "and may be STOPPED"
            )

    async def _wait(
        self,
        connector: str,
        done: Callable[[ConnectorState], bool],
        timeout_s: float,
        on_timeout: Callable[[ConnectorState], OffsetdError],
    ) -> ConnectorState:
        deadline = time.monotonic() + timeout_s
        while True:
            status = await self.rest.status(connector)
            if done(status):
                return status
            if time.monotonic() >= deadline:
                raise on_timeout(status)
            await asyncio.sleep(self.timeouts.poll_s)


def _already_there(plan: Plan) -> str:
    count = len(plan.patch or ())
    what = "the partition is" if count == 1 else f"all {count} partitions are"
    return f"{what} already at the target once {plan.connector} stopped"


class _Aborted(Exception):
    """Carries the operator-facing error out of a failed change, after cleanup was recorded."""

    def __init__(self, error: OffsetdError) -> None:
        super().__init__(str(error))
        self.error = error
