"""Finishing a rewind an earlier life of the daemon started.

A restarted daemon trusts the offsets only when they are exactly the before-image (nothing
written) or exactly the target (written): then the prior state is restored. Anything else —
unreadable, or moved by someone else — leaves a STOPPED connector STOPPED for a person, with
the undo id. `recovery_step` decides (pure); `recover` reads and acts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from offsetd.errors import OffsetdError
from offsetd.offsets.change import Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry, entries_from_json, same_offsets
from offsetd.remediation.rewind.saga import RewindResult, RewindSaga
from offsetd.remediation.sagas import SagaRecord

__all__ = ["RecoveryStep", "recover", "recovery_step"]

log = logging.getLogger("offsetd.remediation")

RecoveryStep = Literal["done", "restore", "left_stopped", "gone"]


def recovery_step(
    record: SagaRecord,
    state: str | None,
    current: Sequence[OffsetEntry] | None,
    before: Sequence[OffsetEntry],
    after: Sequence[OffsetEntry],
) -> tuple[RecoveryStep, bool]:
    """What a restarted daemon does with an unfinished rewind, and whether offsets moved.

    `state` is the connector's state now (None: it no longer exists), `current` its offsets
    now (None: unreadable). Offsets are only trusted when they are exactly the before-image
    (nothing written) or exactly the target (written): then the prior state is restored.
    Anything else — unreadable, or moved by someone else — leaves a STOPPED connector STOPPED
    for a person, with the undo id.
    """
    if state is None:
        return "gone", False
    # A recorded `patch` was written and read back: the rewind happened, even when a resumed
    # sink has since committed past the target (its offsets are no longer the after-image).
    moved = record.done("patch") or (
        current is not None and same_offsets(current, after) and not same_offsets(after, before)
    )
    if record.done("resume"):
        return "done", True
    if state != "STOPPED" or record.prior_state == "STOPPED":
        # Never stopped by us (killed before the stop), someone already put it back, or it
        # was STOPPED before the rewind and stays so: nothing to restore.
        return "done", moved
    if current is None:
        return "left_stopped", False
    if same_offsets(current, after) or same_offsets(current, before):
        return "restore", moved
    return "left_stopped", False


async def recover(saga: RewindSaga) -> RewindResult:
    """Finish a rewind an earlier life of the daemon started (see `recovery_step`)."""
    rec, service = saga.record, saga.service
    if rec.snapshot_id is None or rec.prior_state is None:
        # Killed before the snapshot was recorded: nothing was stopped or written.
        return await saga.end("aborted", f"{rec.connector}: the rewind never started")
    try:
        snapshot = await service.load_snapshot(rec.snapshot_id)
    except OffsetdError as exc:
        # Without the images nothing can be compared: whatever state it is in, it stays.
        return await saga.end(
            "left_stopped",
            f"a rewind of {rec.connector} was interrupted and its snapshot "
            f"{rec.snapshot_id} cannot be read ({exc}); it may be left STOPPED: check it",
        )
    saga.before, saga.after = snapshot.before, snapshot.after
    try:
        status = await service.client.status(rec.connector)
        state: str | None = status.state
    except OffsetdError as exc:
        log.warning("recovering %s: status unreadable (%s)", rec.key, exc)
        state = "STOPPED"  # assume the worst: it stays as it is, and we say so
    try:
        current: tuple[OffsetEntry, ...] | None = tuple(await service.client.offsets(rec.connector))
    except OffsetdError:
        current = None
    step, moved = recovery_step(rec, state, current, snapshot.before, snapshot.after)
    undo = f"undo id {snapshot.id}"
    if step == "gone":
        return await saga.end("aborted", f"{rec.connector} no longer exists ({undo})")
    if step == "done":
        what = "rewound" if moved else "left unchanged"
        return await saga.end("done" if moved else "aborted", f"{rec.connector} was {what}")
    if step == "left_stopped":
        text = (
            f"a rewind of {rec.connector} was interrupted after it stopped the connector, "
            "and its offsets are neither the before-image nor the target; left STOPPED "
            f"for a person ({undo})"
        )
        await service.record_outcome(snapshot, "left-stopped", current or (), text)
        return await saga.end("left_stopped", text)
    plan = Plan(
        rec.connector,
        "alter",
        ConnectorKind(rec.connector_kind or "sink"),
        rec.connector_class or "",
        rec.prior_state,
        rec.prior_tasks,
        snapshot.before,
        tuple(entries_from_json(rec.patch)),
        snapshot.after,
    )
    try:
        final = await service.restore_state(plan)
    except OffsetdError as exc:
        text = f"recovering the rewind of {rec.connector}: could not restore it ({exc}); {undo}"
        return await saga.end("left_stopped" if state == "STOPPED" else "failed", text)
    if moved:
        await service.record_outcome(snapshot, "applied", current or (), f"now {final}")
        return await saga.end("done", f"rewound {rec.connector} (recovered); {final} again")
    await service.record_outcome(snapshot, "failed", snapshot.before, "interrupted")
    return await saga.end(
        "aborted",
        f"the rewind of {rec.connector} was interrupted before it wrote; {final} again",
    )
