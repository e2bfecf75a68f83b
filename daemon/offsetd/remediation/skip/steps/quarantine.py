"""Step 2, quarantine: the record copied whole, with its error context, before anything moves.

The mark (where the copy will land) is made durable before the copy, so a resumed saga searches
from it and never copies twice. A copy not acknowledged aborts the saga: no copy, no skip.
The sink's config (which cluster it reads) is read here, through the backend's client, which
asks Connect again while it rebalances — a config change of another connector a moment before
must not abort the skip.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from offsetd.errors import OffsetdError
from offsetd.remediation.skip.context import SkipAborted
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    ctx = state.ctx
    mark = state.record.quarantine_mark
    if mark is None:
        mark = await asyncio.to_thread(ctx.quarantine.mark, state.record.key)
        # The mark is durable before the copy: recovery searches from here, never copies twice.
        state.record = await ctx.store.put(
            replace(state.record, quarantine_mark=mark, updated_at_ms=ctx.now_ms())
        )
    context = {
        **ctx.error_context,
        "saga.key": state.record.key,
        "decision.id": state.record.decision_id,
        "connect.cluster": state.record.connect_cluster,
    }
    try:
        config = await ctx.offsets.client.config(state.record.connector)
        ref = await asyncio.to_thread(
            ctx.quarantine.copy_once, state.record.key, mark, state.target, context, config
        )
    except OffsetdError as exc:
        raise SkipAborted(f"the record was not quarantined ({exc}): no copy, no skip") from None
    return {"quarantine_ref": ref}
