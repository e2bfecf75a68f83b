"""The `rest` offsets backend: the safe sequence for changing a connector's offsets through
Connect's REST API, shared by the CLI and the daemon.

record the connector's state -> snapshot the offsets (undo image, durable before anything moves)
-> stop -> wait until STOPPED with no tasks -> PATCH/DELETE -> read back and compare -> restore
the recorded state (RUNNING: resume and wait until the connector and every task run; PAUSED:
pause; STOPPED: leave) -> record the after-image.

A FAILED or UNASSIGNED connector is refused before anything is touched. After any failure past
the stop step the connector is put back as it was, or left STOPPED with a message that says so
and gives the undo id: never half-done and silent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Self

from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.errors import (
    ChangeIncomplete,
    ConnectorStateRefused,
    NotStoppedInTime,
    OffsetdError,
    UndoConflict,
)
from offsetd.offsets import documents
from offsetd.offsets.backend import BackendRequest, Feature, Refusal, Timeouts
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
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    apply_patch,
    as_map,
    connector_kind,
    same_offsets,
)
from offsetd.offsets.snapshots import Snapshot, SnapshotStore, new_snapshot_id

__all__ = ["CHANGEABLE_STATES", "UNDOABLE_STATUSES", "OffsetsService", "rest_backend"]

CHANGEABLE_STATES = ("RUNNING", "PAUSED", "STOPPED")
# Changes that wrote offsets (or may have): their before-image is worth restoring.
UNDOABLE_STATUSES = ("applied", "left-stopped", "restore-failed")


class OffsetsService:
    """Plans and executes offset changes on one Connect cluster (the `rest` backend)."""

    name = "rest"

    def __init__(
        self,
        client: ConnectClient,
        store: SnapshotStore,
        *,
        connect_cluster: str,
        timeouts: Timeouts | None = None,
        log: Callable[[str], None] = lambda _msg: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.store = store
        self.connect_cluster = connect_cluster
        self.timeouts = timeouts or Timeouts()
        self.log = log
        self.now = now

    @classmethod
    def for_request(cls, request: BackendRequest) -> Self:
        return cls(
            request.client,
            request.store,
            connect_cluster=request.connect_cluster,
            timeouts=request.timeouts,
            log=request.log,
        )

    # -- the backend protocol (offsetd.offsets.backend) ----------------------------------------

    def write_refusal(self) -> Refusal | None:
        return None

    def feature_refusal(self, feature: Feature) -> str | None:
        return None

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        await self.client.require_offsets_api()
        chosen = list(connectors) or await self.client.connector_names()
        return {name: await self.client.offsets(name) for name in chosen}

    async def plan_document(self, connector: str, entries: list[Any]) -> Plan:
        kind, _cls, _status = await self.describe(connector)
        return await self.plan_alter(
            connector, documents.validate_entries(connector, kind, entries)
        )

    async def apply(self, plan: Plan) -> Outcome:
        return await self.execute(plan)

    # -- planning -------------------------------------------------------------------------------

    async def describe(self, connector: str) -> tuple[ConnectorKind, str, ConnectorState]:
        info = await self.client.info(connector)
        status = await self.client.status(connector)
        return connector_kind(info.connector_class, info.type), info.connector_class, status

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> Plan:
        base = await self._base_plan(connector, "alter")
        after = tuple(apply_patch(base.before, patch))
        return replace(base, patch=tuple(patch), after=after, notes=plan_notes(base, "alter"))

    async def plan_reset(self, connector: str) -> Plan:
        base = await self._base_plan(connector, "reset")
        return replace(base, patch=None, after=(), notes=plan_notes(base, "reset"))

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
        return replace(
            base,
            patch=tuple(patch),
            after=after,
            undo_of=snapshot_id,
            notes=(f"restores the before-image of {snapshot_id} exactly",),
        )

    async def _base_plan(self, connector: str, operation: str) -> Plan:
        kind, connector_class, status = await self.describe(connector)
        if status.state not in CHANGEABLE_STATES:
            raise ConnectorStateRefused(
                f"{connector} is {status.state}: offsetd changes the offsets of RUNNING, PAUSED "
                "or STOPPED connectors only, and touched nothing; fix or restart it first"
            )
        await self.client.require_offsets_api()
        before = tuple(await self.client.offsets(connector))
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
        await self._recheck(plan)
        snapshot = await self.snapshot(plan)
        try:
            return await self._change(plan, snapshot)
        except _Aborted as aborted:
            raise aborted.error from None

    async def _change(self, plan: Plan, snapshot: Snapshot) -> Outcome:
        sid = snapshot.id
        try:
            if plan.prior_state != "STOPPED":
                self.log(f"stopping {plan.connector}")
                await self.request_state(plan.connector, "STOPPED")
            await self._wait_stopped(plan.connector)
            # A running connector moved on until it stopped: the undo image is the one at rest.
            plan = rebased(plan, tuple(await self.client.offsets(plan.connector)))
            snapshot = replace(snapshot, status="stopped", before=plan.before, after=plan.after)
            await self._record(snapshot)
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
        if (await self.client.status(plan.connector)).state != "STOPPED":
            self.log(f"stopping {plan.connector}")
            await self.request_state(plan.connector, "STOPPED")
        await self._wait_stopped(plan.connector)
        plan = rebased(plan, tuple(await self.client.offsets(plan.connector)))
        snapshot = replace(snapshot, status="stopped", before=plan.before, after=plan.after)
        await self._record(snapshot)
        return plan, snapshot

    async def write(self, plan: Plan, snapshot: Snapshot) -> str:
        """PATCH (or DELETE); a refused write is read back before anyone is told "unchanged".

        The PATCH carries only the partitions that move (`Plan.writes`, against the offsets at
        rest); when none does any more (the connector stopped right at the targets), nothing is
        sent: Connect refuses an empty PATCH, and there is nothing to tell it."""
        writes = plan.writes
        if writes is not None and not writes:
            return f"not written: {_already_there(plan)}"
        try:
            if writes is None:
                return await self.client.delete_offsets(plan.connector)
            return await self.client.patch_offsets(plan.connector, list(writes))
        except OffsetdError as exc:
            raise await self._after_failed_write(plan, snapshot, exc) from None

    async def read_back(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
        """The offsets as Connect now reports them; a difference leaves the connector STOPPED."""
        sid = snapshot.id
        try:
            actual = tuple(await self.read_back_offsets(plan.connector))
            differs = mismatch(plan, actual)
            settle = time.monotonic() + self.timeouts.read_back_s
            while differs and time.monotonic() < settle:  # see Timeouts.read_back_s
                await asyncio.sleep(max(self.timeouts.poll_s, 0.05))
                actual = tuple(await self.read_back_offsets(plan.connector))
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

    async def request_state(self, connector: str, state: str) -> None:
        """Ask for STOPPED, PAUSED or RUNNING; the caller waits for it (REST: stop/pause/resume;
        a backend that drives an orchestrator's resources asks there instead)."""
        if state == "STOPPED":
            await self.client.stop(connector)
        elif state == "PAUSED":
            await self.client.pause(connector)
        else:
            await self.client.resume(connector)

    async def write_offsets(self, connector: str, patch: list[OffsetEntry]) -> str:
        """One write of offsets, for a caller with its own retries (the skip saga)."""
        return await self.client.patch_offsets(connector, patch)

    async def restart_failed(self, connector: str) -> ConnectorState:
        """Restart what is FAILED (REST: onlyFailed, includeTasks); the instances restarted are
        marked RESTARTING in the answer."""
        return await self.client.restart_failed(connector)

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState:
        """Restart one task whatever its state, or the connector and all its tasks (None)."""
        return await self.client.restart_tasks(connector, task_id)

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        """Replace the connector's config (REST: PUT .../config)."""
        await self.client.put_config(connector, config)

    async def auto_restarted_by(self, connector: str) -> str | None:
        """Who restarts this connector on its own, so offsetd's restart rules stand down
        (None: nobody; REST has no such thing)."""
        return None

    async def read_back_offsets(self, connector: str) -> list[OffsetEntry]:
        """The offsets a written change is checked against (REST: GET .../offsets)."""
        return await self.client.offsets(connector)

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
            now = tuple(await self.client.offsets(plan.connector))
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
        """After an MM2 reset or rewind: every touched partition shows progress again.

        A reset partition must reappear (MM2 wrote a new offset for it); a moved one must show
        an offset at or past where it was set. A partition whose source log holds nothing new
        cannot show progress, so only partitions present before the change are waited for.
        """
        plan = outcome.plan
        touched = plan.before if plan.patch is None else (plan.writes or ())
        expected = {e.key: e for e in touched}
        pending = set(expected)

        async def progressed() -> bool:
            now = as_map(await self.client.offsets(plan.connector))
            for key in list(pending):
                seen, wanted = now.get(key), expected[key]
                if seen is None:
                    continue
                floor = (
                    -1 if plan.patch is None or wanted.offset is None else wanted.offset["offset"]
                )
                if int(seen.offset["offset"]) >= int(floor):  # type: ignore[index, arg-type]
                    pending.discard(key)
            return not pending

        deadline = time.monotonic() + self.timeouts.resume_s
        while not await progressed():
            if time.monotonic() >= deadline:
                raise ChangeIncomplete(
                    f"{plan.connector} is RUNNING but shows no replication progress within "
                    f"{self.timeouts.resume_s:g} s on {len(pending)} partitions "
                    f"(e.g. {sorted(pending)[0]}); snapshot {outcome.snapshot_id}"
                )
            await asyncio.sleep(self.timeouts.poll_s)
        self.log(f"{plan.connector} replicates again on all {len(expected)} touched partitions")

    async def _recheck(self, plan: Plan) -> None:
        """Right before acting: the connector is still in the state the plan was made for."""
        status = await self.client.status(plan.connector)
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
            status = await self.client.status(connector)
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


def rest_backend(request: BackendRequest) -> OffsetsService:
    """The `rest` backend of a Connect cluster (offsetd.offsets.registry)."""
    return OffsetsService.for_request(request)
