"""One running skip saga's state, shared by its steps: the durable record, the plan and
snapshot once known, the offsets read back, and the reads every step makes the same way.

Why a module: the steps are separate modules (`offsetd.remediation.skip.steps`), yet one saga
is one sequence; what they hand on to each other (the plan in memory, or rebuilt from the
durable record after a crash) and how they retry Connect lives here, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from offsetd.errors import OffsetdError
from offsetd.offsets.change import Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry, entries_from_json, next_offset_of
from offsetd.offsets.snapshots import Snapshot
from offsetd.remediation.sagas import SagaRecord
from offsetd.remediation.skip.context import SkipAborted, SkipContext
from offsetd.retry import doubling, retry_call

__all__ = ["SkipState", "T"]

log = logging.getLogger("offsetd.remediation")
T = TypeVar("T")


class SkipState:
    """The saga being run: its context, its latest durable record, and what steps learnt."""

    def __init__(self, ctx: SkipContext, record: SagaRecord) -> None:
        self.ctx = ctx
        self.record = record
        self.plan: Plan | None = None
        self.snapshot: Snapshot | None = None
        self.actual: tuple[OffsetEntry, ...] = ()

    @property
    def target(self) -> dict[str, Any]:
        assert self.record.record is not None
        return self.record.record

    async def restored_plan(self) -> tuple[Plan, Snapshot]:
        """The plan and snapshot of this saga: in memory, or rebuilt from durable records."""
        if self.plan is not None and self.snapshot is not None:
            return self.plan, self.snapshot
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
        self.plan, self.snapshot = plan, snapshot
        return plan, snapshot

    def committed_next(self, entries: list[OffsetEntry] | tuple[OffsetEntry, ...]) -> int | None:
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

    async def retrying(self, step: str, call: Callable[[], Awaitable[T]]) -> T:
        """An idempotent call: Connect not answering, still busy after the client's own
        retries, or answering a 5xx: try again, within `max_retries` (`offsetd.retry`)."""
        timings = self.ctx.timings

        def said(error: Exception, attempt: int, delay: float) -> None:
            self.say_retry(step, error, attempt, delay)

        delays = doubling(timings.retry_first_s, timings.retry_max_s, timings.max_retries)
        return await retry_call(call, delays, before_retry=said)

    def say_retry(self, what: str, error: Exception, attempt: int, delay: float) -> None:
        log.warning(
            "%s: %s failed (%s); retry %d of %d in %.0f s",
            self.record.key,
            what,
            error,
            attempt + 1,
            self.ctx.timings.max_retries,
            delay,
        )

    async def pause_before_retry(
        self, what: str, error: OffsetdError, attempt: int, delay: float
    ) -> float:
        """Log the failed attempt, wait `delay`; returns the next (doubled, capped) delay."""
        self.say_retry(what, error, attempt, delay)
        await asyncio.sleep(delay)
        return min(delay * 2, self.ctx.timings.retry_max_s)

    def where(self) -> str:
        t = self.target
        return f"{t['topic']}-{t['partition']}@{t['offset']}"
