"""A rewind's durable run: snapshot, stop, write, read back, resume, each recorded on the sagas
topic before the next, with the crash points (`offsetd.remediation.faults`) between them.

Why not `StepwiseBackend.execute` in one go: a PATCH reply that only the framework-managed
offsets changed must leave the connector STOPPED (the rewind is unverified), and `execute`
would resume it. And why a saga record: a daemon killed between the stop and the resume must
not leave the connector STOPPED without anyone knowing; its recovery is `rewind.recovery`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX
from offsetd.errors import ChangeIncomplete, OffsetdError
from offsetd.offsets.backend import StepwiseBackend
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry
from offsetd.offsets.snapshots import Snapshot
from offsetd.remediation import faults
from offsetd.remediation.sagas import SagaRecord, SagaStore, Status

__all__ = ["RewindResult", "RewindSaga", "Stop", "entries_json", "moves", "put_back"]

log = logging.getLogger("offsetd.remediation")


@dataclass(frozen=True)
class RewindResult:
    """How a rewind ended, for the executor's audit record and metrics."""

    outcome: Literal["executed", "failed", "aborted"]
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    left_stopped: bool = False
    stopped_s: float = 0.0


class Stop(Exception):
    """Ends a rewind early with this status and message (after cleanup was done)."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status: Status = status
        self.message = message


class RewindSaga:
    """One rewind: its saga record and the offsets service's steps in between."""

    def __init__(
        self,
        now_ms: Callable[[], int],
        service: StepwiseBackend,
        store: SagaStore,
        record: SagaRecord,
        target: str,
    ) -> None:
        self.now_ms, self.service, self.store = now_ms, service, store
        self.record = record
        self.target = target
        self.before: tuple[OffsetEntry, ...] = ()
        self.after: tuple[OffsetEntry, ...] = ()
        self.snapshot_id: str | None = record.snapshot_id

    async def step(self, step: str, **changes: Any) -> None:
        await self.store.check_owner(self.record)
        self.record = await self.store.put(self.record.step_done(step, self.now_ms(), **changes))

    async def run(self, plan: Plan) -> RewindResult:
        service, connector = self.service, plan.connector
        try:
            faults.point("snapshot", "before")
            snapshot = await service.snapshot(plan)
            self.snapshot_id, self.before, self.after = snapshot.id, plan.before, plan.after
            faults.point("snapshot", "after-action")
            await self.step("snapshot", snapshot_id=snapshot.id)
            faults.point("snapshot", "after-progress")
            faults.point("stop", "before")
            try:
                plan, snapshot = await service.stop_and_wait(plan, snapshot)
            except OffsetdError as exc:
                restored = await put_back(service, plan)
                await service.record_outcome(snapshot, "failed", plan.before, str(exc))
                status: Status = "left_stopped" if "may be STOPPED" in restored else "failed"
                raise Stop(status, f"stopping {connector} failed ({exc}); {restored}") from None
            self.before, self.after = plan.before, plan.after
            faults.point("stop", "after-action")
            await self.step("stop", stopped_at_ms=self.now_ms())
            faults.point("stop", "after-progress")
            faults.point("patch", "before")
            actual = await self._write(plan, snapshot)
            faults.point("patch", "after-action")
            await self.step("patch")
            faults.point("patch", "after-progress")
            faults.point("resume", "before")
            final = await self._resume(plan, snapshot, actual)
            faults.point("resume", "after-action")
            await self.step("resume", resumed_at_ms=self.now_ms())
            faults.point("resume", "after-progress")
        except Stop as stop:
            return await self.end(stop.status, stop.message)
        except OffsetdError as exc:  # the saga store (or snapshot store) failed between steps
            text = f"rewind of {connector} failed: {exc}"
            if self.record.done("stop") and not self.record.done("resume"):
                restored = await put_back(service, plan)
                text = f"{text}; {restored} (undo id {self.snapshot_id})"
                if "may be STOPPED" in restored:
                    return await self.end("left_stopped", text)
            return await self.end("failed", text)
        message = (
            f"rewound {connector} to {self.target}: {moves(self.before, self.after)}; "
            f"{final} again (undo: offsetd offsets undo {snapshot.id})"
        )
        return await self.end("done", message)

    async def _write(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
        service, connector = self.service, plan.connector
        try:
            message = await service.write(plan, snapshot)
        except ChangeIncomplete as exc:
            raise Stop("left_stopped", str(exc)) from None
        except OffsetdError as exc:  # read back unchanged, and the connector was put back
            raise Stop("failed", f"the rewind of {connector} was refused: {exc}") from None
        if message.startswith(FRAMEWORK_ONLY_PREFIX):
            text = (
                f"Connect changed only the framework-managed offsets of {connector} "
                f'("{message[:160]}"): the rewind is unverified, so the connector is left '
                f"STOPPED; check its external offsets, then resume it (undo id {snapshot.id})"
            )
            await service.record_outcome(snapshot, "left-stopped", plan.after, text)
            raise Stop("left_stopped", text)
        try:
            actual = await service.read_back(plan, snapshot)
        except ChangeIncomplete as exc:
            raise Stop("left_stopped", str(exc)) from None
        self.after = actual
        return actual

    async def _resume(self, plan: Plan, snapshot: Snapshot, actual: tuple[OffsetEntry, ...]) -> str:
        service, connector = self.service, plan.connector
        try:
            final = await service.restore_state(plan)
        except ChangeIncomplete as exc:
            # Resumed, but not all RUNNING in time: it is not STOPPED, and the offsets moved.
            await service.record_outcome(snapshot, "applied", actual, str(exc))
            raise Stop(
                "failed", f"{connector} was rewound (undo id {snapshot.id}), but {exc}"
            ) from None
        except OffsetdError as exc:
            text = (
                f"the offsets of {connector} were rewound, but restoring its {plan.prior_state} "
                f"state failed ({exc}); it is left STOPPED (undo id {snapshot.id})"
            )
            await service.record_outcome(snapshot, "restore-failed", actual, text)
            raise Stop("left_stopped", text) from None
        await service.record_outcome(snapshot, "applied", actual, f"now {final}")
        if plan.kind is ConnectorKind.MIRROR_SOURCE and final == "RUNNING":
            outcome = Outcome(plan, snapshot.id, actual, final, "")
            try:
                await service.verify_replicating(outcome)
            except OffsetdError as exc:
                raise Stop("failed", f"{connector} was rewound but: {exc}") from None
        return final

    async def end(self, status: Status, message: str) -> RewindResult:
        now = self.now_ms()
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
            "before": entries_json(self.before),
            "after": entries_json(self.after),
        }
        return RewindResult(outcome, message, extra, status == "left_stopped", stopped_s)


async def put_back(service: StepwiseBackend, plan: Plan) -> str:
    try:
        return f"{plan.connector} is {await service.restore_state(plan)} again"
    except OffsetdError as exc:
        return f"putting {plan.connector} back failed ({exc}): it may be STOPPED"


def entries_json(entries: Sequence[OffsetEntry]) -> list[dict[str, Any]]:
    return [e.as_json() for e in entries]


def moves(before: Sequence[OffsetEntry], after: Sequence[OffsetEntry]) -> str:
    was = {e.key: e.offset for e in before}
    parts = [
        f"{e.key}: {was.get(e.key)} -> {e.offset}" for e in after if was.get(e.key) != e.offset
    ]
    return ", ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "") or (
        "no partition moved"
    )
