"""The skip saga's driver: the table of steps, run in order, each recorded before the next.

Each step is idempotent and its completion is written to the sagas topic (awaited, acks=all)
before the next one starts, so a process killed anywhere resumes at the first step not recorded
as done and repeats nothing that matters twice. The crash points
(`offsetd.remediation.faults.point(step, phase)`: before, after-action, after-progress) are
here, between the steps, and nowhere else: the crash-matrix tests kill the daemon at each.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from offsetd.remediation import faults
from offsetd.remediation.sagas import STEPS, SagaRecord, Status
from offsetd.remediation.skip.context import Escalate, SkipAborted, SkipContext, SkipResult
from offsetd.remediation.skip.state import SkipState
from offsetd.remediation.skip.steps import (
    patch,
    quarantine,
    recheck,
    resume,
    snapshot,
    stop,
    verify,
)

__all__ = ["SKIP_STEPS", "SkipSaga"]

Step = Callable[[SkipState], Awaitable[dict[str, Any]]]

# recheck -> quarantine -> snapshot -> stop -> patch -> resume -> verify (`sagas.STEPS`)
SKIP_STEPS: tuple[tuple[str, Step], ...] = (
    ("recheck", recheck.run),
    ("quarantine", quarantine.run),
    ("snapshot", snapshot.run),
    ("stop", stop.run),
    ("patch", patch.run),
    ("resume", resume.run),
    ("verify", verify.run),
)
assert tuple(name for name, _ in SKIP_STEPS) == STEPS, "the table must follow sagas.STEPS"


class SkipSaga:
    """Runs (or resumes) one skip saga to a terminal status. Never raises for a failed step."""

    def __init__(self, ctx: SkipContext, record: SagaRecord) -> None:
        self.state = SkipState(ctx, record)

    @property
    def ctx(self) -> SkipContext:
        return self.state.ctx

    @property
    def record(self) -> SagaRecord:
        return self.state.record

    @property
    def target(self) -> dict[str, Any]:
        return self.state.target

    async def run(self) -> SkipResult:
        try:
            return await self._run()
        except SkipAborted as exc:
            return await self._end("aborted", str(exc))

    async def _run(self) -> SkipResult:
        state = self.state
        for name, action in SKIP_STEPS:
            if state.record.done(name):
                continue
            await state.ctx.store.check_owner(state.record)
            faults.point(name, "before")
            try:
                changes = await action(state)
            except Escalate as esc:
                return await self._end(esc.status, esc.message, esc)
            faults.point(name, "after-action")
            state.record = await state.ctx.store.put(
                state.record.step_done(name, state.ctx.now_ms(), **changes)
            )
            faults.point(name, "after-progress")
        return await self._end("done", self._done_message())

    def _done_message(self) -> str:
        return (
            f"skipped {self.state.where()} in {self.record.connector}: quarantined, offset set "
            f"to {int(self.target['offset']) + 1}, "
            f"RUNNING for {self.ctx.timings.verify_stable_for_s:g} s"
        )

    async def _end(self, status: Status, message: str, esc: Escalate | None = None) -> SkipResult:
        state = self.state
        now = state.ctx.now_ms()
        state.record = await state.ctx.store.put(state.record.ended(status, now, message))
        stopped_s = 0.0
        if state.record.stopped_at_ms is not None:
            until = state.record.resumed_at_ms or now
            stopped_s = max(until - state.record.stopped_at_ms, 0) / 1000
        snapshot = state.snapshot
        return SkipResult(
            state.record,
            status,
            message,
            before=snapshot.before if snapshot else (),
            after=state.actual or (snapshot.after if snapshot else ()),
            left_stopped=status == "left_stopped",
            verify_failed=bool(esc and esc.verify_failed),
            stopped_s=stopped_s,
        )
