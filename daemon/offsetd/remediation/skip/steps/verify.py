"""Step 7, verify: RUNNING, every task RUNNING, for the whole window, and the partition's
offset past the record. A failure here is the breaker's input (`verify_failed`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from offsetd.connect.client import ConnectorState
from offsetd.remediation.skip.context import Escalate
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    """RUNNING, every task RUNNING, for the whole window; the partition's offset past N."""
    ctx = state.ctx
    connector = state.record.connector
    window = ctx.timings.verify_stable_for_s
    deadline = time.monotonic() + window
    status: ConnectorState | None = None
    while True:
        status = await state.retrying("verify", lambda: ctx.client.status(connector))
        failed = status.failed_part()
        if failed or status.state not in ("RUNNING", "UNASSIGNED"):
            raise Escalate(
                "failed",
                f"after the skip, {connector} did not stay RUNNING: {failed or status.state}",
                verify_failed=True,
            )
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(ctx.timings.poll_s)
    if not status.all_running(1 if state.record.prior_tasks else 0):
        raise Escalate(
            "failed",
            f"{connector} was not RUNNING with all tasks at the end of the {window:g} s "
            f"window ({status.state}, {[t.state for t in status.tasks]})",
            verify_failed=True,
        )
    entries = await state.retrying("verify", lambda: ctx.client.offsets(connector))
    committed = state.committed_next(entries)
    if committed is None or committed <= int(state.target["offset"]):
        raise Escalate(
            "failed",
            f"{connector} is RUNNING but its offset for {state.where()} is {committed}, "
            "not past the skipped record",
            verify_failed=True,
        )
    return {}
