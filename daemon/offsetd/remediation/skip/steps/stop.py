"""Step 4, stop: the connector STOPPED with no tasks (idempotent in Connect). A stop that
cannot be done puts the connector back (`offsetd.remediation.skip.rollback`)."""

from __future__ import annotations

from typing import Any

from offsetd.errors import OffsetdError
from offsetd.remediation.skip.rollback import rollback
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    ctx = state.ctx
    plan, snapshot = await state.restored_plan()
    stopped_at = ctx.now_ms()
    try:
        plan, snapshot = await state.retrying(
            "stop", lambda: ctx.offsets.stop_and_wait(plan, snapshot)
        )
    except OffsetdError as exc:
        raise await rollback(state, plan, f"stopping failed: {exc}") from None
    state.plan, state.snapshot = plan, snapshot
    return {"stopped_at_ms": state.record.stopped_at_ms or stopped_at}
