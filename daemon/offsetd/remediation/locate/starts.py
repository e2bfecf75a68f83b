"""Where a sink's consumer starts on partitions it has committed nothing on, and pinning it.

A new sink whose first record is poison has no committed offset to read: before its task is
restarted, its consumer's own start is written as the group's offset (`sink_start`), so the
restart begins where the failed run did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from offsetd.remediation.locate.model import partition_names
from offsetd.remediation.sink_start import (
    Start,
    effective_reset,
    pin_starts,
    pinned_partitions,
    start_of,
    task_run_started_ms,
)

__all__ = ["Starts"]

log = logging.getLogger("offsetd.remediation")


class Starts:
    """Where the consumer starts on partitions it has committed nothing on, and pinning it."""

    def __init__(
        self,
        conf: dict[str, str],
        group: str,
        worker_reset: str,
        status: tuple[Mapping[str, str], str] | None,
        connector: str,
        read_s: float,
    ) -> None:
        self.conf, self.group, self.worker_reset = conf, group, worker_reset
        self.status, self.connector, self.read_s = status, connector, read_s

    async def resolve(
        self, tps: list[tuple[str, int]], failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start]:
        """Each partition's start (empty unless every one can be told)."""
        if not tps:
            return {}
        reset = effective_reset(config, self.worker_reset)
        run_started = None
        if reset == "latest" and self.status is not None:
            status_conf, status_topic = self.status
            run_started = await asyncio.to_thread(
                task_run_started_ms,
                status_conf,
                status_topic,
                self.connector,
                sorted(failed),
                self.read_s,
            )
        found: dict[tuple[str, int], Start] = {}
        for topic, partition in tps:
            start = await asyncio.to_thread(
                start_of, self.conf, topic, partition, reset, run_started, self.read_s
            )
            if start is not None:
                found[(topic, partition)] = start
        return found if len(found) == len(tps) else {}

    async def pinned(self) -> set[tuple[str, int]]:
        """The partitions whose committed offset is a start offsetd pinned earlier."""
        return await asyncio.to_thread(pinned_partitions, self.conf, self.group, self.read_s)

    async def pin(
        self, tps: list[tuple[str, int]], failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start]:
        """Resolve and commit the starts (empty: they cannot be told)."""
        starts = await self.resolve(tps, failed, config)
        if starts:
            await asyncio.to_thread(
                pin_starts, self.conf, self.group, {tp: s.offset for tp, s in starts.items()}
            )
            log.info(
                "%s had no committed offset on %s: pinned where its consumer starts (%s)",
                self.connector,
                partition_names(list(starts)),
                "; ".join(s.how for s in starts.values()),
            )
        return starts
