"""The skip saga's way back when a step fails after the connector was stopped.

docs/guards.md's policy, in one place: nothing written -> put the connector back to its prior state
(`rollback`, outcome `failed`); written, or not known -> leave it STOPPED (`left_stopped`:
the outcome recorded on the snapshot, the undo id in the message). A connector whose task fails
again on the unskipped record after being put back *is* back in its prior state (RUNNING with a
FAILED task): that is a rollback, not a connector left STOPPED.
"""

from __future__ import annotations

from typing import NoReturn

from offsetd.errors import OffsetdError
from offsetd.offsets.change import Plan
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.snapshots import Snapshot
from offsetd.remediation.skip.context import Escalate
from offsetd.remediation.skip.state import SkipState

__all__ = ["left_stopped", "offsets_or_escalate", "rollback"]


async def rollback(state: SkipState, plan: Plan, why: str) -> Escalate:
    """Nothing was written: put the connector back as it was, or say it is STOPPED."""
    ctx = state.ctx
    try:
        final = await state.retrying("rollback", lambda: ctx.offsets.restore_state(plan))
    except OffsetdError as exc:
        # Resumed, and its task failed again on the record that was not skipped: that is the
        # state it had before the saga. Only a connector still STOPPED was left STOPPED.
        try:
            status = await state.retrying("rollback", lambda: ctx.client.status(plan.connector))
        except OffsetdError:
            status = None
        if status is not None and status.state != "STOPPED":
            return Escalate(
                "failed",
                f"{why}; {plan.connector} was put back: it is {status.state} with tasks "
                f"{[t.state for t in status.tasks]} ({exc}), offsets unchanged",
            )
        return Escalate(
            "left_stopped",
            f"{why}; putting {plan.connector} back to {plan.prior_state} failed ({exc}): "
            "it may be left STOPPED, offsets unchanged",
        )
    return Escalate("failed", f"{why}; {plan.connector} is {final} again, offsets unchanged")


async def left_stopped(
    state: SkipState, snapshot: Snapshot, now: tuple[OffsetEntry, ...], why: str
) -> NoReturn:
    """Written, or not known: the connector stays STOPPED, said on the snapshot and raised."""
    text = (
        f"{why}; {state.record.connector} is left STOPPED: inspect it and undo with "
        f"`offsetd offsets undo {snapshot.id}`, or resume it"
    )
    await state.ctx.offsets.record_outcome(snapshot, "left-stopped", now, text)
    raise Escalate("left_stopped", text)


async def offsets_or_escalate(
    state: SkipState, plan: Plan, snapshot: Snapshot, what: str
) -> tuple[OffsetEntry, ...]:
    """The connector's offsets now (retried); unreadable after a write: left STOPPED."""
    try:
        entries = await state.retrying("patch", lambda: state.ctx.client.offsets(plan.connector))
    except OffsetdError as exc:
        await left_stopped(
            state, snapshot, snapshot.after, f"{what}, but they could not be read back ({exc})"
        )
    return tuple(entries)
