"""Locating by one-record batches: make the failure repeat with
`consumer.override.max.poll.records=1`, after which the group's committed offset is the failing
record.

Asked first through config/validate (which changes nothing); the original config is put back
afterwards whatever happened (`override`), and a failure is counted as repeated only when the
task was seen running again (or its offsets moved, or the status topic shows the cycle).
"""

from __future__ import annotations

import asyncio
import time

from offsetd.errors import ConnectBusy, ConnectUnavailable, OffsetdError
from offsetd.offsets.model import OffsetEntry
from offsetd.remediation.locate.model import (
    Located,
    LocateResult,
    NotLocated,
    OverrideHook,
    committed_by_partition,
    failed_tasks,
    not_failed,
)
from offsetd.remediation.locate.override import MAX_POLL_RECORDS_KEY, restore_override
from offsetd.remediation.locate.sink import SinkLocator

__all__ = ["by_single_record_batches"]

_ALIVE = frozenset({"RUNNING", "RESTARTING", "UNASSIGNED", "PAUSED"})


async def by_single_record_batches(
    sink: SinkLocator, timeout_s: float, on_override: OverrideHook | None
) -> LocateResult:
    """Make the failure repeat with one-record batches: then the committed offset is the
    failing record (the package's docstring, way 2). The override is put back whatever
    happens (`override.restore_override`)."""
    name = sink.name
    status = await sink.settled_status()
    failed = failed_tasks(status)
    if not failed:
        return not_failed(status)
    original = await sink.client.config(name)
    original_value = original.get(MAX_POLL_RECORDS_KEY)
    modified = {**original, MAX_POLL_RECORDS_KEY: "1"}
    if original_value != "1":
        errors = await sink.client.validate_config(original["connector.class"], modified)
        if MAX_POLL_RECORDS_KEY in errors:
            return NotLocated(
                "override_not_allowed",
                f"Connect refuses {MAX_POLL_RECORDS_KEY} for {name}: "
                + " ".join(errors[MAX_POLL_RECORDS_KEY]),
            )
    pinned = await sink.pin_unstarted(failed, original)
    if isinstance(pinned, NotLocated):
        return pinned
    earlier_pins = await sink.starts.pinned() if sink.starts is not None else set()
    before = await sink.client.offsets(name)
    if on_override is not None:
        await on_override(original_value)
    if sink.trail is not None:
        # Before the config change: Connect restarts the tasks for a new config by itself,
        # and that run can fail before the restart request (which then finds no FAILED task).
        await asyncio.to_thread(sink.trail.mark)
    try:
        if original_value != "1":
            try:
                await sink.client.put_config(name, modified)
            except OffsetdError as exc:
                if isinstance(exc, ConnectUnavailable | ConnectBusy):
                    raise
                return NotLocated("config_rejected", str(exc))
        await sink.client.restart_failed(name)
        repeated = await _failed_again(sink, failed, timeout_s, before)
        if not repeated:
            return NotLocated(
                "failure_did_not_repeat",
                f"task(s) {sorted(failed)} of {name} were not seen running and failing again "
                f"with one-record batches within {timeout_s:g} s",
            )
        after = await sink.client.offsets(name)
    finally:
        await restore_override(sink.client, name, original_value)
    picked = await sink.pick(after)
    if isinstance(picked, NotLocated):
        return picked
    ref, committed = picked
    previous = committed_by_partition(before).get((ref.topic, ref.partition))
    if previous is not None and committed < previous:
        return NotLocated(
            "offset_moved_back",
            f"{ref.topic}-{ref.partition} was committed at {previous} before and at "
            f"{committed} after one-record batches: someone else moves this group",
        )
    start = pinned.get((ref.topic, ref.partition))
    started = (
        f"; {ref.topic}-{ref.partition} had no committed offset: started where its consumer "
        f"does ({start.how})"
        if start is not None
        else ""
    )
    if start is None and (ref.topic, ref.partition) in earlier_pins:
        started = (
            f"; {previous} is where its consumer started, pinned before an earlier restart "
            "(nothing delivered yet)"
        )
    return Located(
        ref,
        "single_record_batches",
        f"task(s) {sorted(failed)} failed again with one-record batches; the group's "
        f"committed offset moved from {previous} to {committed}{started}",
        delivered=committed - previous if previous is not None else 0,
    )


async def _failed_again(
    sink: SinkLocator, tasks: frozenset[int], timeout_s: float, before: list[OffsetEntry]
) -> bool:
    """Wait until one of `tasks` has run again with one-record batches and FAILED again.

    The status cache may still show the old FAILED for a while after the restart request,
    so a FAILED counts only after the same task was seen in a live state — or when the
    group's committed offsets moved since the restart (the task ran: it delivered records
    of the failed batch one by one), or when the status topic holds RUNNING then FAILED for
    it since the restart (a cycle faster than one poll). Without any of these the failure
    stays unproven: not located, never a guess.
    """
    alive: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = await sink.client.status(sink.name)
        for task in status.tasks:
            if task.id not in tasks:
                continue
            if task.state == "FAILED" and task.id in alive:
                return True
            if task.state in _ALIVE:
                alive.add(task.id)
        failed_now = any(t.id in tasks and t.state == "FAILED" for t in status.tasks)
        trail = sink.trail
        if (
            failed_now
            and trail is not None
            and await asyncio.to_thread(trail.ran_and_failed, tasks)
        ):
            return True
        if failed_now:
            moved = committed_by_partition(await sink.client.offsets(sink.name))
            if moved != committed_by_partition(before):
                # Settled, not a periodic commit caught mid-way: the same twice, 1.5 s apart.
                await asyncio.sleep(1.5)
                if committed_by_partition(await sink.client.offsets(sink.name)) == moved:
                    return True
        await asyncio.sleep(sink.poll_s)
    return False
