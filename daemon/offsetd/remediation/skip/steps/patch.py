"""Step 5, patch: the offsets written past the record, and read back.

After a crash the offsets are read first — already the target: done; still the before-image:
write again; anything else: leave the connector STOPPED and escalate. The PATCH writes absolute
offsets, so it is idempotent, but its outcome is unknown when the answer is lost: the offsets are
read back (retried) first, and the PATCH is written again only while they are the before-image
or the target. When the retries run out: nothing written -> put back (`failed`); written, or
not known -> left STOPPED (`offsetd.remediation.skip.rollback`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX
from offsetd.errors import OffsetdError
from offsetd.offsets.change import Plan
from offsetd.offsets.model import OffsetEntry, as_map, same_offsets
from offsetd.offsets.snapshots import Snapshot
from offsetd.remediation.skip.context import Escalate
from offsetd.remediation.skip.rollback import left_stopped, offsets_or_escalate, rollback
from offsetd.remediation.skip.state import SkipState

__all__ = ["run"]


async def run(state: SkipState) -> dict[str, Any]:
    plan, snapshot = await state.restored_plan()
    current = await state.retrying("patch", lambda: state.ctx.client.offsets(plan.connector))
    # Rebase on what is there now (recovery: the offsets may already be the target).
    if same_offsets(current, plan.after):
        state.actual = tuple(current)
        return {}
    if not same_offsets(current, plan.before):
        plan = replace(plan, before=tuple(current))
        moved = state.committed_next(current)
        if moved is not None and moved > int(state.target["offset"]):
            raise Escalate(
                "left_stopped",
                f"the offsets of {plan.connector} moved past {state.where()} while it was "
                "STOPPED (someone else changed them); left STOPPED for a person "
                f"(undo id {snapshot.id})",
            )
    message = await _write(state, plan, snapshot)
    if message.startswith(FRAMEWORK_ONLY_PREFIX):
        raise Escalate(
            "left_stopped",
            f"Connect changed only the framework-managed offsets of {plan.connector} "
            f'("{message[:160]}"): the skip is unverified, so the connector is left '
            f"STOPPED; check its external offsets, then resume it (undo id {snapshot.id})",
        )
    state.actual = await _read_back(state, plan, snapshot)
    return {}


async def _write(state: SkipState, plan: Plan, snapshot: Snapshot) -> str:
    """PATCH the plan's offsets; returns Connect's message. Retried within limits (see the
    module's docstring); raises `Escalate` when it cannot be done."""
    assert plan.patch is not None
    offsets, timings = state.ctx.offsets, state.ctx.timings
    delay = timings.retry_first_s
    error: OffsetdError | None = None
    for attempt in range(timings.max_retries + 1):
        try:
            return await offsets.write_offsets(plan.connector, list(plan.patch))
        except OffsetdError as exc:
            error = exc
        # Refused, or the answer was lost: look before doing anything else.
        now = await offsets_or_escalate(state, plan, snapshot, f"the PATCH failed ({error})")
        if not (same_offsets(now, plan.before) or same_offsets(now, plan.after)):
            await left_stopped(
                state,
                snapshot,
                now,
                f"the PATCH of {plan.connector} failed ({error}) and its offsets are now "
                "neither the before-image nor the target",
            )
        if not error.retriable or attempt == timings.max_retries:
            if same_offsets(now, plan.before):
                await state.ctx.offsets.record_outcome(snapshot, "failed", now, str(error))
                raise await rollback(
                    state,
                    plan,
                    f"the patch was refused ({error}; {attempt + 1} attempts), nothing was written",
                )
            # Written (Connect applied it), but never answered: its message is unknown.
            await left_stopped(
                state,
                snapshot,
                now,
                f"the offsets of {plan.connector} were written, but Connect never confirmed "
                f"the PATCH ({error}; {attempt + 1} attempts), so whether it changed only the "
                "framework-managed offsets is unknown",
            )
        what = "patch (offsets read back unchanged or at the target)"
        delay = await state.pause_before_retry(what, error, attempt, delay)
    raise AssertionError("unreachable")


async def _read_back(state: SkipState, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
    """The offsets as Connect reports them after the PATCH (read with retries): every
    patched partition must be exactly what was written, else the connector stays STOPPED."""
    now = await offsets_or_escalate(state, plan, snapshot, "the offsets were written")
    got = as_map(now)
    for entry in plan.patch or ():
        seen = got.get(entry.key)
        if (seen.offset if seen else None) != entry.offset:
            await left_stopped(
                state,
                snapshot,
                now,
                f"the offsets of {plan.connector} read back differently ({entry.key} should "
                f"be {entry.offset} but is {seen.offset if seen else 'absent'})",
            )
    return now
