"""Step 3, snapshot: the offsets to write (N+1 on the record's partition, in the connector
kind's own terms) planned through `StepwiseBackend`, and the undo image saved before any stop.

Only sink connectors and MirrorSourceConnector are skipped; any other kind aborts here, with
nothing touched.
"""

from __future__ import annotations

from typing import Any

from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    mirror_partition,
    offset_for_next,
    sink_partition,
)
from offsetd.remediation.skip.context import SkipAborted
from offsetd.remediation.skip.state import SkipState

__all__ = ["run", "skip_entry"]


async def run(state: SkipState) -> dict[str, Any]:
    kind, entry = await skip_entry(state)
    ctx, connector = state.ctx, state.record.connector
    plan = await state.retrying("snapshot", lambda: ctx.offsets.plan_alter(connector, [entry]))
    snapshot = await ctx.offsets.snapshot(plan)
    state.plan, state.snapshot = plan, snapshot
    return {
        "snapshot_id": snapshot.id,
        "prior_state": plan.prior_state,
        "prior_tasks": plan.prior_tasks,
        "connector_kind": str(kind),
        "connector_class": plan.connector_class,
        "patch": (entry.as_json(),),
    }


async def skip_entry(state: SkipState) -> tuple[ConnectorKind, OffsetEntry]:
    """The connector's kind and the one offset that moves it past the record."""
    kind_text = state.record.connector_kind
    if kind_text is None:
        kind, _cls, _state = await state.retrying(
            "snapshot", lambda: state.ctx.offsets.describe(state.record.connector)
        )
    else:
        kind = ConnectorKind(kind_text)
    target = state.target
    topic, partition = str(target["topic"]), int(target["partition"])
    next_offset = int(target["offset"]) + 1
    if kind is ConnectorKind.SINK:
        key = sink_partition(topic, partition)
    elif kind is ConnectorKind.MIRROR_SOURCE and state.ctx.mirror_source_alias:
        key = mirror_partition(state.ctx.mirror_source_alias, topic, partition)
    else:
        raise SkipAborted(
            f"{state.record.connector} is a {kind} connector: offsetd skips records only in "
            "sink connectors and MirrorSourceConnector, nothing touched"
        )
    return kind, OffsetEntry(key, offset_for_next(kind, next_offset))
