"""Step 6, resume: the connector back to its prior state (idempotent in Connect), the outcome
recorded on the snapshot. A resume whose answer was lost is looked at before anything is said:
still STOPPED -> left STOPPED; resumed -> the verify step decides."""

from __future__ import annotations

from typing import Any

from offsetd.errors import ChangeIncomplete, OffsetdError
from offsetd.remediation.skip.context import Escalate
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    ctx = state.ctx
    plan, snapshot = await state.restored_plan()
    try:
        final = await state.retrying("resume", lambda: ctx.offsets.restore_state(plan))
    except ChangeIncomplete as exc:
        # Resumed, but a task failed again at once: the skip did not heal it.
        await ctx.offsets.record_outcome(snapshot, "applied", state.actual, str(exc))
        raise Escalate("failed", f"resumed, but {exc}", verify_failed=True) from None
    except OffsetdError as exc:
        # A resume whose answer never came may still have been carried out: look first.
        try:
            status = await state.retrying("resume", lambda: ctx.client.status(plan.connector))
        except OffsetdError:
            status = None
        if status is None or status.state == "STOPPED":
            text = (
                f"the offsets of {plan.connector} were changed, but resuming it failed "
                f"({exc}); it is left STOPPED (undo id {snapshot.id})"
            )
            await ctx.offsets.record_outcome(snapshot, "left-stopped", state.actual, text)
            raise Escalate("left_stopped", text) from None
        # Connect did resume it; the verify step decides whether it runs.
        final = f"{status.state} (the resume was carried out; its answer was lost: {exc})"
    await ctx.offsets.record_outcome(snapshot, "applied", state.actual, f"now {final}")
    return {"resumed_at_ms": ctx.now_ms()}
