"""Step 1, recheck: right before acting, the task still FAILED, the record not yet passed, and
the same error as when it was decided. Nothing is touched; a changed world aborts the saga."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from offsetd.remediation.skip.context import SkipAborted
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    """Right before acting: the task still FAILED, the record not yet passed, same error."""
    ctx = state.ctx
    connector = state.record.connector
    # A task restarted a moment ago (e.g. its config was just restored after locating the
    # record) is RUNNING until it reaches the poison record again: give it time to settle.
    deadline = time.monotonic() + ctx.timings.settle_s
    while True:
        status = await state.retrying("recheck", lambda: ctx.client.status(connector))
        failed = [t for t in status.tasks if t.state == "FAILED"]
        if failed or time.monotonic() >= deadline:
            break
        await asyncio.sleep(ctx.timings.settle_poll_s)
    if not failed:
        raise SkipAborted(
            f"{connector} has no FAILED task any more ({status.state}, tasks "
            f"{[t.state for t in status.tasks]}): nothing to skip, nothing touched"
        )
    expected = ctx.expected_error
    if expected and not any(expected in (t.trace or "") for t in failed):
        raise SkipAborted(
            f"the failed task of {connector} no longer reports {expected}: the error changed "
            "since the decision, nothing touched"
        )
    entries = await state.retrying("recheck", lambda: ctx.client.offsets(connector))
    committed = state.committed_next(entries)
    offset = int(state.target["offset"])
    if committed is not None and committed > offset:
        raise SkipAborted(
            f"{connector} already moved past {state.where()} (next offset {committed}): "
            "nothing to skip, nothing touched"
        )
    return {}
