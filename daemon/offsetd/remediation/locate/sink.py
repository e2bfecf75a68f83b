"""A FAILED sink as locating sees it, and which of its partitions it can have failed on.

The readings both ways of locating share (the status once a task is FAILED, the subscribed
partitions' watermarks, the partitions with nothing committed, the starts pinned before a
restart); the ways themselves are `batches` and `check`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.errors import OffsetdError
from offsetd.events.models import RecordRef
from offsetd.offsets.model import OffsetEntry
from offsetd.remediation.locate.model import (
    NotLocated,
    committed_by_partition,
    failed_tasks,
    partition_names,
)
from offsetd.remediation.locate.starts import Starts
from offsetd.remediation.records import RecordUnavailable, subscribed_watermarks
from offsetd.remediation.sink_start import Start
from offsetd.remediation.status_trail import StatusTrail

__all__ = ["SinkLocator", "pick_partition"]


class SinkLocator:
    """One FAILED sink being located: its client, data cluster, status trail and starts; the
    readings both ways of locating make (`batches`, `check`)."""

    def __init__(
        self,
        client: ConnectClient,
        name: str,
        conf: dict[str, str],
        read_s: float,
        poll_s: float,
        trail: StatusTrail | None = None,
        settle_s: float = 20.0,
        starts: Starts | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.conf = conf
        self.read_s = read_s
        self.poll_s = poll_s
        self.trail = trail
        self.settle_s = settle_s
        self.starts = starts

    async def settled_status(self) -> ConnectorState:
        """The connector's status once a task is FAILED, or as it is after `settle_s`.

        The decision can come before Connect reports the failure: from the DLQ record (written
        ~0.5 s before FAILED), or from a task that a restart or a config change had just set
        running again and that is on its way back to the poison record. Reading the status once
        would answer `not_failed` for a task that fails a moment later.
        """
        deadline = time.monotonic() + self.settle_s
        while True:
            status = await self.client.status(self.name)
            if failed_tasks(status) or time.monotonic() >= deadline:
                return status
            await asyncio.sleep(min(self.poll_s, 0.05))

    async def pick(
        self, entries: list[OffsetEntry], starts: Mapping[tuple[str, int], int] | None = None
    ) -> tuple[RecordRef, int] | NotLocated:
        """The one partition the task can have failed on, with its committed offset (or, where
        nothing is committed, the consumer's start from `starts`)."""
        config = await self.client.config(self.name)
        try:
            marks = await asyncio.to_thread(subscribed_watermarks, self.conf, config, self.read_s)
        except RecordUnavailable as exc:
            return NotLocated("record_unavailable", str(exc))
        return pick_partition({**(starts or {}), **committed_by_partition(entries)}, marks)

    async def unstarted(
        self, entries: list[OffsetEntry], config: Mapping[str, str]
    ) -> list[tuple[str, int]] | NotLocated:
        """The subscribed partitions that have records but no committed offset."""
        try:
            marks = await asyncio.to_thread(subscribed_watermarks, self.conf, config, self.read_s)
        except RecordUnavailable as exc:
            return NotLocated("record_unavailable", str(exc))
        committed = committed_by_partition(entries)
        return [tp for tp, (lo, hi) in sorted(marks.items()) if hi > lo and tp not in committed]

    async def pin_unstarted(
        self, failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start] | NotLocated:
        """Before a restart: the consumer's start, committed on every partition with records
        and no committed offset (`sink_start`), so the restart begins where the failed run did."""
        if self.starts is None:
            return {}
        unstarted = await self.unstarted(await self.client.offsets(self.name), config)
        if isinstance(unstarted, NotLocated):
            return unstarted
        if not unstarted:
            return {}
        try:
            pinned = await self.starts.pin(unstarted, failed, config)
        except OffsetdError as exc:
            return NotLocated(
                "no_committed_offset",
                f"{partition_names(unstarted)} of {self.name} has records but no committed "
                "offset, and its consumer's start could not be committed before the restart "
                f"({exc})",
            )
        if not pinned:
            return NotLocated(
                "no_committed_offset",
                f"{partition_names(unstarted)} of {self.name} has records but no committed "
                "offset, and where its consumer starts cannot be told (auto.offset.reset=none?)",
            )
        return pinned


def pick_partition(
    committed: Mapping[tuple[str, int], int], marks: Mapping[tuple[str, int], tuple[int, int]]
) -> tuple[RecordRef, int] | NotLocated:
    """Rule out every partition committed to its end; exactly one must remain.

    `marks` are (low, high) watermarks of every partition the connector subscribes to. A
    partition without a committed offset but with records remains (its position is unknown).
    """
    pending: list[tuple[str, int]] = []
    for tp, (low, high) in sorted(marks.items()):
        offset = committed.get(tp)
        if (offset is None and high > low) or (offset is not None and offset < high):
            pending.append(tp)
    if not pending:
        return NotLocated(
            "no_pending_record",
            f"all {len(marks)} partitions are committed to their end: no record left to fail on",
        )
    if len(pending) > 1:
        shown = ", ".join(f"{t}-{p}" for t, p in pending[:10])
        return NotLocated(
            "ambiguous_partition",
            f"{len(pending)} partitions have records not yet committed ({shown}): which one the "
            "task failed on cannot be told",
        )
    topic, partition = pending[0]
    offset = committed.get(pending[0])
    if offset is None:
        return NotLocated(
            "no_committed_offset", f"{topic}-{partition} has records but no committed offset"
        )
    return RecordRef(topic=topic, partition=partition, offset=offset), offset
