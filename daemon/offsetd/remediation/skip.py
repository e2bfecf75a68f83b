"""Skip one poison record as a durable saga.

recheck -> quarantine -> snapshot -> stop -> patch -> resume -> verify.

Each step is idempotent and its completion is written to the sagas topic (awaited, acks=all)
before the next one starts, so a process killed anywhere resumes at the first step not recorded
as done and repeats nothing that matters twice:

- quarantine: the copy carries the saga key and lands in a partition chosen before the copy, so
  recovery looks for it from a recorded mark and never copies twice;
- stop and resume are idempotent in Connect;
- patch: after a crash the offsets are read first — already the target: done; still the
  before-image: write again; anything else: leave the connector STOPPED and escalate.

The offsets move only through `OffsetsService` (the toolkit's safe sequence, step by step, and
its client for the PATCH), so snapshots and undo work exactly as for `offsetd offsets alter`.

When Connect misbehaves mid-saga, every call is retried within `remediation.max_retries` per step
(backoff 1 s doubling to 15 s), on top of the client's own retries of 409 and of the 500 Connect
sends while a stopped sink's consumers linger:

- reads, stop and resume are idempotent: retried when Connect does not answer (timeout, refused or
  dropped connection), still refuses (409, lingering consumers), or answers a 5xx such as its own
  `Request timed out`;
- the PATCH writes absolute offsets, so it is idempotent too, but its outcome is unknown when the
  answer is lost: the offsets are read back (retried) first, and the PATCH is written again only
  while they are the before-image or the target (then it returns Connect's message, which says
  whether only the framework-managed offsets changed).

When the retries run out, the policy is the README's: nothing written (the offsets read back as
the before-image) -> the connector is put back to its prior state, outcome `failed`; written, or
not known -> it is left STOPPED (`left_stopped`: audit, critical notification,
`offsetd_connector_left_stopped` = 1, the undo id in the message). A connector whose task fails
again on the unskipped record after being put back *is* back in its prior state (RUNNING with a
FAILED task): that is a rollback, not a connector left STOPPED.

Why one module of ~600 lines: the steps, their durable progress and the rollback of each are
one state machine, read top to bottom against the sequence above; split, a reader would jump
between files to follow one crash point. What is not the state machine lives beside it: the
action's handler (`actions.skip`), locating (`locate`), reading records (`records`), the
quarantine copy (`quarantine`, `quarantine_format`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, NoReturn, Protocol, TypeVar

from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX, ConnectClient, ConnectorState
from offsetd.errors import (
    ChangeIncomplete,
    OffsetdError,
)
from offsetd.offsets.change import Plan
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    as_map,
    entries_from_json,
    mirror_partition,
    next_offset_of,
    offset_for_next,
    same_offsets,
    sink_partition,
)
from offsetd.offsets.operations import OffsetsService
from offsetd.offsets.snapshots import Snapshot
from offsetd.remediation import faults
from offsetd.remediation.sagas import SagaRecord, SagaStore, Status
from offsetd.retry import doubling, retry_call

__all__ = [
    "Quarantine",
    "SkipAborted",
    "SkipContext",
    "SkipResult",
    "SkipSaga",
    "SkipTimings",
    "T",
    "as_offsets_json",
]

log = logging.getLogger("offsetd.remediation")
T = TypeVar("T")


class SkipAborted(OffsetdError):
    """A precondition no longer holds, or a step failed before anything was changed."""

    exit_code = 45


class Quarantine(Protocol):
    """Where skipped records are kept whole (see `offsetd.remediation.quarantine`)."""

    def mark(self, saga_key: str) -> dict[str, int]: ...

    def copy_once(
        self, saga_key: str, mark: dict[str, int], record: dict[str, Any], context: dict[str, str]
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SkipTimings:
    verify_stable_for_s: float = 120.0
    poll_s: float = 1.0
    max_retries: int = 5
    retry_first_s: float = 1.0
    retry_max_s: float = 15.0
    settle_s: float = 20.0
    # The decision often comes from the DLQ record, ~0.5 s before Connect reports the task FAILED:
    # the recheck looks often while it waits for that (a GET /status each time).
    settle_poll_s: float = 0.05


@dataclass(frozen=True)
class SkipContext:
    """What the saga needs besides its record: clients, stores and the error to quarantine with."""

    client: ConnectClient
    offsets: OffsetsService
    store: SagaStore
    quarantine: Quarantine
    timings: SkipTimings
    error_context: dict[str, str]  # __connect.errors.* style context for the quarantine copy
    expected_error: str | None  # an exception class the failing task's trace must still name
    mirror_source_alias: str | None = None  # MirrorSourceConnector: its source.cluster.alias
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)


@dataclass(frozen=True)
class SkipResult:
    record: SagaRecord
    status: Status
    message: str
    before: tuple[OffsetEntry, ...] = ()
    after: tuple[OffsetEntry, ...] = ()
    left_stopped: bool = False
    verify_failed: bool = False  # the connector failed again after the skip (breaker input)
    stopped_s: float = 0.0


class SkipSaga:
    """Runs (or resumes) one skip saga to a terminal status. Never raises for a failed step."""

    def __init__(self, ctx: SkipContext, record: SagaRecord) -> None:
        self.ctx = ctx
        self.record = record
        self._plan: Plan | None = None
        self._snapshot: Snapshot | None = None
        self._actual: tuple[OffsetEntry, ...] = ()

    @property
    def target(self) -> dict[str, Any]:
        assert self.record.record is not None
        return self.record.record

    async def run(self) -> SkipResult:
        try:
            return await self._run()
        except SkipAborted as exc:
            return await self._end("aborted", str(exc))

    async def _run(self) -> SkipResult:
        steps: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("recheck", self._recheck),
            ("quarantine", self._quarantine),
            ("snapshot", self._snapshot_step),
            ("stop", self._stop),
            ("patch", self._patch),
            ("resume", self._resume),
            ("verify", self._verify),
        ]
        for name, action in steps:
            if self.record.done(name):
                continue
            await self.ctx.store.check_owner(self.record)
            faults.point(name, "before")
            try:
                changes = await action()
            except _Escalate as esc:
                return await self._end(esc.status, esc.message, esc)
            faults.point(name, "after-action")
            self.record = await self.ctx.store.put(
                self.record.step_done(name, self.ctx.now_ms(), **changes)
            )
            faults.point(name, "after-progress")
        return await self._end("done", self._done_message())

    # -- steps ----------------------------------------------------------------------------------

    async def _recheck(self) -> dict[str, Any]:
        """Right before acting: the task still FAILED, the record not yet passed, same error."""
        connector = self.record.connector
        # A task restarted a moment ago (e.g. its config was just restored after locating the
        # record) is RUNNING until it reaches the poison record again: give it time to settle.
        deadline = time.monotonic() + self.ctx.timings.settle_s
        while True:
            status = await self._retrying("recheck", lambda: self.ctx.client.status(connector))
            failed = [t for t in status.tasks if t.state == "FAILED"]
            if failed or time.monotonic() >= deadline:
                break
            await asyncio.sleep(self.ctx.timings.settle_poll_s)
        if not failed:
            raise SkipAborted(
                f"{connector} has no FAILED task any more ({status.state}, tasks "
                f"{[t.state for t in status.tasks]}): nothing to skip, nothing touched"
            )
        expected = self.ctx.expected_error
        if expected and not any(expected in (t.trace or "") for t in failed):
            raise SkipAborted(
                f"the failed task of {connector} no longer reports {expected}: the error changed "
                "since the decision, nothing touched"
            )
        entries = await self._retrying("recheck", lambda: self.ctx.client.offsets(connector))
        committed = self._committed_next(entries)
        offset = int(self.target["offset"])
        if committed is not None and committed > offset:
            raise SkipAborted(
                f"{connector} already moved past {self._where()} (next offset {committed}): "
                "nothing to skip, nothing touched"
            )
        return {}

    async def _quarantine(self) -> dict[str, Any]:
        mark = self.record.quarantine_mark
        if mark is None:
            mark = await asyncio.to_thread(self.ctx.quarantine.mark, self.record.key)
            # The mark is durable before the copy: recovery searches from here, never copies twice.
            self.record = await self.ctx.store.put(
                replace(self.record, quarantine_mark=mark, updated_at_ms=self.ctx.now_ms())
            )
        context = {
            **self.ctx.error_context,
            "saga.key": self.record.key,
            "decision.id": self.record.decision_id,
            "connect.cluster": self.record.connect_cluster,
        }
        try:
            ref = await asyncio.to_thread(
                self.ctx.quarantine.copy_once, self.record.key, mark, self.target, context
            )
        except OffsetdError as exc:
            raise SkipAborted(f"the record was not quarantined ({exc}): no copy, no skip") from None
        return {"quarantine_ref": ref}

    async def _snapshot_step(self) -> dict[str, Any]:
        kind, entry = await self._skip_entry()
        connector = self.record.connector
        plan = await self._retrying(
            "snapshot", lambda: self.ctx.offsets.plan_alter(connector, [entry])
        )
        snapshot = await self.ctx.offsets.snapshot(plan)
        self._plan, self._snapshot = plan, snapshot
        return {
            "snapshot_id": snapshot.id,
            "prior_state": plan.prior_state,
            "prior_tasks": plan.prior_tasks,
            "connector_kind": str(kind),
            "connector_class": plan.connector_class,
            "patch": (entry.as_json(),),
        }

    async def _stop(self) -> dict[str, Any]:
        plan, snapshot = await self._restored_plan()
        stopped_at = self.ctx.now_ms()
        try:
            plan, snapshot = await self._retrying(
                "stop", lambda: self.ctx.offsets.stop_and_wait(plan, snapshot)
            )
        except OffsetdError as exc:
            raise await self._rollback(plan, f"stopping failed: {exc}") from None
        self._plan, self._snapshot = plan, snapshot
        return {"stopped_at_ms": self.record.stopped_at_ms or stopped_at}

    async def _patch(self) -> dict[str, Any]:
        plan, snapshot = await self._restored_plan()
        current = await self._retrying("patch", lambda: self.ctx.client.offsets(plan.connector))
        # Rebase on what is there now (recovery: the offsets may already be the target).
        if same_offsets(current, plan.after):
            self._actual = tuple(current)
            return {}
        if not same_offsets(current, plan.before):
            plan = replace(plan, before=tuple(current))
            moved = self._committed_next(current)
            if moved is not None and moved > int(self.target["offset"]):
                raise _Escalate(
                    "left_stopped",
                    f"the offsets of {plan.connector} moved past {self._where()} while it was "
                    "STOPPED (someone else changed them); left STOPPED for a person "
                    f"(undo id {snapshot.id})",
                )
        message = await self._write(plan, snapshot)
        if message.startswith(FRAMEWORK_ONLY_PREFIX):
            raise _Escalate(
                "left_stopped",
                f"Connect changed only the framework-managed offsets of {plan.connector} "
                f'("{message[:160]}"): the skip is unverified, so the connector is left '
                f"STOPPED; check its external offsets, then resume it (undo id {snapshot.id})",
            )
        self._actual = await self._read_back(plan, snapshot)
        return {}

    async def _write(self, plan: Plan, snapshot: Snapshot) -> str:
        """PATCH the plan's offsets; returns Connect's message. Retried within limits (see the
        module's docstring); raises `_Escalate` when it cannot be done."""
        assert plan.patch is not None
        client, timings = self.ctx.offsets.client, self.ctx.timings
        delay = timings.retry_first_s
        error: OffsetdError | None = None
        for attempt in range(timings.max_retries + 1):
            try:
                return await client.patch_offsets(plan.connector, list(plan.patch))
            except OffsetdError as exc:
                error = exc
            # Refused, or the answer was lost: look before doing anything else.
            now = await self._offsets_or_escalate(plan, snapshot, f"the PATCH failed ({error})")
            if not (same_offsets(now, plan.before) or same_offsets(now, plan.after)):
                await self._left_stopped(
                    snapshot,
                    now,
                    f"the PATCH of {plan.connector} failed ({error}) and its offsets are now "
                    "neither the before-image nor the target",
                )
            if not error.retriable or attempt == timings.max_retries:
                if same_offsets(now, plan.before):
                    await self.ctx.offsets.record_outcome(snapshot, "failed", now, str(error))
                    raise await self._rollback(
                        plan,
                        f"the patch was refused ({error}; {attempt + 1} attempts), nothing "
                        "was written",
                    )
                # Written (Connect applied it), but never answered: its message is unknown.
                await self._left_stopped(
                    snapshot,
                    now,
                    f"the offsets of {plan.connector} were written, but Connect never confirmed "
                    f"the PATCH ({error}; {attempt + 1} attempts), so whether it changed only the "
                    "framework-managed offsets is unknown",
                )
            what = "patch (offsets read back unchanged or at the target)"
            delay = await self._pause_before_retry(what, error, attempt, delay)
        raise AssertionError("unreachable")

    async def _read_back(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]:
        """The offsets as Connect reports them after the PATCH (read with retries): every
        patched partition must be exactly what was written, else the connector stays STOPPED."""
        now = await self._offsets_or_escalate(plan, snapshot, "the offsets were written")
        got = as_map(now)
        for entry in plan.patch or ():
            seen = got.get(entry.key)
            if (seen.offset if seen else None) != entry.offset:
                await self._left_stopped(
                    snapshot,
                    now,
                    f"the offsets of {plan.connector} read back differently ({entry.key} should "
                    f"be {entry.offset} but is {seen.offset if seen else 'absent'})",
                )
        return now

    async def _offsets_or_escalate(
        self, plan: Plan, snapshot: Snapshot, what: str
    ) -> tuple[OffsetEntry, ...]:
        try:
            entries = await self._retrying("patch", lambda: self.ctx.client.offsets(plan.connector))
        except OffsetdError as exc:
            await self._left_stopped(
                snapshot, snapshot.after, f"{what}, but they could not be read back ({exc})"
            )
        return tuple(entries)

    async def _left_stopped(
        self, snapshot: Snapshot, now: tuple[OffsetEntry, ...], why: str
    ) -> NoReturn:
        text = (
            f"{why}; {self.record.connector} is left STOPPED: inspect it and undo with "
            f"`offsetd offsets undo {snapshot.id}`, or resume it"
        )
        await self.ctx.offsets.record_outcome(snapshot, "left-stopped", now, text)
        raise _Escalate("left_stopped", text)

    async def _resume(self) -> dict[str, Any]:
        plan, snapshot = await self._restored_plan()
        try:
            final = await self._retrying("resume", lambda: self.ctx.offsets.restore_state(plan))
        except ChangeIncomplete as exc:
            # Resumed, but a task failed again at once: the skip did not heal it.
            await self.ctx.offsets.record_outcome(snapshot, "applied", self._actual, str(exc))
            raise _Escalate("failed", f"resumed, but {exc}", verify_failed=True) from None
        except OffsetdError as exc:
            # A resume whose answer never came may still have been carried out: look first.
            try:
                status = await self._retrying(
                    "resume", lambda: self.ctx.client.status(plan.connector)
                )
            except OffsetdError:
                status = None
            if status is None or status.state == "STOPPED":
                text = (
                    f"the offsets of {plan.connector} were changed, but resuming it failed "
                    f"({exc}); it is left STOPPED (undo id {snapshot.id})"
                )
                await self.ctx.offsets.record_outcome(snapshot, "left-stopped", self._actual, text)
                raise _Escalate("left_stopped", text) from None
            # Connect did resume it; the verify step decides whether it runs.
            final = f"{status.state} (the resume was carried out; its answer was lost: {exc})"
        await self.ctx.offsets.record_outcome(snapshot, "applied", self._actual, f"now {final}")
        return {"resumed_at_ms": self.ctx.now_ms()}

    async def _verify(self) -> dict[str, Any]:
        """RUNNING, every task RUNNING, for the whole window; the partition's offset past N."""
        connector = self.record.connector
        window = self.ctx.timings.verify_stable_for_s
        deadline = time.monotonic() + window
        status: ConnectorState | None = None
        while True:
            status = await self._retrying("verify", lambda: self.ctx.client.status(connector))
            failed = status.failed_part()
            if failed or status.state not in ("RUNNING", "UNASSIGNED"):
                raise _Escalate(
                    "failed",
                    f"after the skip, {connector} did not stay RUNNING: {failed or status.state}",
                    verify_failed=True,
                )
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(self.ctx.timings.poll_s)
        if not status.all_running(1 if self.record.prior_tasks else 0):
            raise _Escalate(
                "failed",
                f"{connector} was not RUNNING with all tasks at the end of the {window:g} s "
                f"window ({status.state}, {[t.state for t in status.tasks]})",
                verify_failed=True,
            )
        entries = await self._retrying("verify", lambda: self.ctx.client.offsets(connector))
        committed = self._committed_next(entries)
        if committed is None or committed <= int(self.target["offset"]):
            raise _Escalate(
                "failed",
                f"{connector} is RUNNING but its offset for {self._where()} is {committed}, "
                "not past the skipped record",
                verify_failed=True,
            )
        return {}

    # -- helpers --------------------------------------------------------------------------------

    async def _skip_entry(self) -> tuple[ConnectorKind, OffsetEntry]:
        kind_text = self.record.connector_kind
        if kind_text is None:
            kind, _cls, _state = await self._retrying(
                "snapshot", lambda: self.ctx.offsets.describe(self.record.connector)
            )
        else:
            kind = ConnectorKind(kind_text)
        topic, partition = str(self.target["topic"]), int(self.target["partition"])
        next_offset = int(self.target["offset"]) + 1
        if kind is ConnectorKind.SINK:
            key = sink_partition(topic, partition)
        elif kind is ConnectorKind.MIRROR_SOURCE and self.ctx.mirror_source_alias:
            key = mirror_partition(self.ctx.mirror_source_alias, topic, partition)
        else:
            raise SkipAborted(
                f"{self.record.connector} is a {kind} connector: offsetd skips records only in "
                "sink connectors and MirrorSourceConnector, nothing touched"
            )
        return kind, OffsetEntry(key, offset_for_next(kind, next_offset))

    async def _restored_plan(self) -> tuple[Plan, Snapshot]:
        """The plan and snapshot of this saga: in memory, or rebuilt from durable records."""
        if self._plan is not None and self._snapshot is not None:
            return self._plan, self._snapshot
        rec = self.record
        if rec.snapshot_id is None or rec.connector_kind is None or rec.prior_state is None:
            raise SkipAborted(f"saga {rec.key} has no snapshot yet; nothing was changed")
        snapshot = await self.ctx.offsets.load_snapshot(rec.snapshot_id)
        patch = tuple(entries_from_json(rec.patch))
        plan = Plan(
            rec.connector,
            "alter",
            ConnectorKind(rec.connector_kind),
            rec.connector_class or "",
            rec.prior_state,
            rec.prior_tasks,
            snapshot.before,
            patch,
            snapshot.after,
        )
        self._plan, self._snapshot = plan, snapshot
        return plan, snapshot

    def _committed_next(self, entries: list[OffsetEntry] | tuple[OffsetEntry, ...]) -> int | None:
        """The next offset the connector will read on the saga's partition (None: unknown)."""
        kind = ConnectorKind(self.record.connector_kind) if self.record.connector_kind else None
        topic, partition = str(self.target["topic"]), int(self.target["partition"])
        for entry in entries:
            part = entry.partition
            same_sink = (
                part.get("kafka_topic") == topic and part.get("kafka_partition") == partition
            )
            same_mirror = part.get("topic") == topic and part.get("partition") == partition
            if same_sink:
                return next_offset_of(ConnectorKind.SINK, entry.offset)
            if same_mirror and (kind is None or kind is ConnectorKind.MIRROR_SOURCE):
                return next_offset_of(ConnectorKind.MIRROR_SOURCE, entry.offset)
        return None

    async def _rollback(self, plan: Plan, why: str) -> _Escalate:
        """Nothing was written: put the connector back as it was, or say it is STOPPED."""
        try:
            final = await self._retrying("rollback", lambda: self.ctx.offsets.restore_state(plan))
        except OffsetdError as exc:
            # Resumed, and its task failed again on the record that was not skipped: that is the
            # state it had before the saga. Only a connector still STOPPED was left STOPPED.
            try:
                status = await self._retrying(
                    "rollback", lambda: self.ctx.client.status(plan.connector)
                )
            except OffsetdError:
                status = None
            if status is not None and status.state != "STOPPED":
                return _Escalate(
                    "failed",
                    f"{why}; {plan.connector} was put back: it is {status.state} with tasks "
                    f"{[t.state for t in status.tasks]} ({exc}), offsets unchanged",
                )
            return _Escalate(
                "left_stopped",
                f"{why}; putting {plan.connector} back to {plan.prior_state} failed ({exc}): "
                "it may be left STOPPED, offsets unchanged",
            )
        return _Escalate("failed", f"{why}; {plan.connector} is {final} again, offsets unchanged")

    async def _retrying(self, step: str, call: Callable[[], Awaitable[T]]) -> T:
        """An idempotent call: Connect not answering, still busy after the client's own
        retries, or answering a 5xx: try again, within `max_retries` (`offsetd.retry`)."""
        timings = self.ctx.timings

        def said(error: Exception, attempt: int, delay: float) -> None:
            self._say_retry(step, error, attempt, delay)

        delays = doubling(timings.retry_first_s, timings.retry_max_s, timings.max_retries)
        return await retry_call(call, delays, before_retry=said)

    def _say_retry(self, what: str, error: Exception, attempt: int, delay: float) -> None:
        log.warning(
            "%s: %s failed (%s); retry %d of %d in %.0f s",
            self.record.key,
            what,
            error,
            attempt + 1,
            self.ctx.timings.max_retries,
            delay,
        )

    async def _pause_before_retry(
        self, what: str, error: OffsetdError, attempt: int, delay: float
    ) -> float:
        """Log the failed attempt, wait `delay`; returns the next (doubled, capped) delay."""
        self._say_retry(what, error, attempt, delay)
        await asyncio.sleep(delay)
        return min(delay * 2, self.ctx.timings.retry_max_s)

    def _where(self) -> str:
        t = self.target
        return f"{t['topic']}-{t['partition']}@{t['offset']}"

    def _done_message(self) -> str:
        return (
            f"skipped {self._where()} in {self.record.connector}: quarantined, offset set to "
            f"{int(self.target['offset']) + 1}, "
            f"RUNNING for {self.ctx.timings.verify_stable_for_s:g} s"
        )

    async def _end(self, status: Status, message: str, esc: _Escalate | None = None) -> SkipResult:
        now = self.ctx.now_ms()
        self.record = await self.ctx.store.put(self.record.ended(status, now, message))
        stopped_s = 0.0
        if self.record.stopped_at_ms is not None:
            until = self.record.resumed_at_ms or now
            stopped_s = max(until - self.record.stopped_at_ms, 0) / 1000
        snapshot = self._snapshot
        return SkipResult(
            self.record,
            status,
            message,
            before=snapshot.before if snapshot else (),
            after=self._actual or (snapshot.after if snapshot else ()),
            left_stopped=status == "left_stopped",
            verify_failed=bool(esc and esc.verify_failed),
            stopped_s=stopped_s,
        )


class _Escalate(Exception):
    def __init__(self, status: Status, message: str, *, verify_failed: bool = False) -> None:
        super().__init__(message)
        self.status: Status = status
        self.message = message
        self.verify_failed = verify_failed


def as_offsets_json(entries: tuple[OffsetEntry, ...]) -> list[dict[str, Any]]:
    return [e.as_json() for e in entries]
