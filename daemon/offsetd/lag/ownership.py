"""`offsetd run` embeds MM2 lag collection in exactly one worker: the owner of events partition 0.

Lag collection reads every Connect offsets topic from the beginning and asks every source cluster
for its log ends; several workers doing it would multiply that load and export every series
twice. The lease is partition 0 of the daemon's internal events topic because faust's consumer
group already gives each partition of that topic to exactly one live worker and moves it when a
worker dies, leaves or joins: failover comes with it, and it needs no extra topic, lock or clock.

Ownership is polled (every `poll_s`) from the consumer's current assignment rather than taken
from rebalance callbacks: aiokafka keeps the previous assignment while a rebalance is under way,
so a worker that keeps partition 0 through a rebalance never stops its exporter, and one that
loses it stops within one poll of the new owner starting (the overlap, at most `poll_s`, only
exports the same values from two workers for a moment; nothing is written but each worker's own
window file). The exporter runs in its own thread; starting and stopping it (a join, and the
windows persisted) happen off the event loop.

Only the Connect clusters this process reads (its `daemon.kafka_cluster`) are collected, so
`offsetd run` processes for different Kafka clusters, each with its own partition-0 owner, never
export the same connector twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from offsetd.config import ConnectCluster, Settings
from offsetd.lag.exporter import LagExporter

__all__ = ["LEASE_PARTITION", "LagOwnership"]

#: The partition of the daemon's internal events topic whose owner collects lag.
LEASE_PARTITION = 0
log = logging.getLogger(__name__)


class LagOwnership:
    """Starts the lag exporter while this worker owns the lease partition, stops it otherwise."""

    def __init__(
        self,
        settings: Settings,
        connect: Mapping[str, ConnectCluster],
        *,
        exporter_factory: Callable[..., LagExporter] = LagExporter,
        poll_s: float = 2.0,
        on_progress: Callable[[Sequence[tuple[str, dict[str, object]]]], Coroutine[Any, Any, None]]
        | None = None,
    ) -> None:
        self.enabled = settings.lag.enabled and bool(connect)
        self._settings = settings.model_copy(update={"connect_clusters": dict(connect)})
        self._factory = exporter_factory
        self.poll_s = poll_s
        self._exporter: LagExporter | None = None
        self._on_progress = on_progress
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def active(self) -> bool:
        return self._exporter is not None

    def page(self) -> bytes:
        """The exporter's last rendered page (b"" when not the owner or before its first cycle).

        A byte copy: a scrape never waits for a collection cycle.
        """
        exporter = self._exporter
        return exporter.render() if exporter is not None else b""

    async def follow(self, assignment: Callable[[], Iterable[tuple[str, int]]], topic: str) -> None:
        """Poll `assignment()` ((topic, partition) pairs) until cancelled; own with the lease.

        The exporter is stopped (windows persisted) when this returns or is cancelled.
        """
        if not self.enabled:
            return
        self._loop = asyncio.get_running_loop()
        lease = (topic, LEASE_PARTITION)
        try:
            while True:
                try:
                    owned = lease in set(assignment())
                except Exception:  # no consumer yet (starting): keep what we have
                    owned = self.active
                try:
                    await self.set_owned(owned)
                except Exception:  # lag must never take the daemon down: retry next poll
                    log.exception("mm2 lag: could not %s", "start" if owned else "stop")
                await asyncio.sleep(self.poll_s)
        finally:
            await asyncio.shield(self.set_owned(False))

    def _deliver(self, news: Sequence[tuple[str, dict[str, object]]]) -> None:
        """In the collection thread: hand a cycle's progress events to the event loop and wait
        until they are sent (so a cycle never overtakes the previous one's events)."""
        loop, send = self._loop, self._on_progress
        if loop is None or send is None:
            return
        asyncio.run_coroutine_threadsafe(send(news), loop).result(timeout=60.0)

    async def set_owned(self, owned: bool) -> None:
        """Start a fresh exporter on gaining the lease, stop it on losing it."""
        if owned and self._exporter is None:
            extra = {"on_progress": self._deliver} if self._on_progress is not None else {}
            exporter = await asyncio.to_thread(self._factory, self._settings, **extra)
            exporter.start()
            self._exporter = exporter
            log.info("mm2 lag: this worker owns the lease (events partition 0): collecting")
        elif not owned and self._exporter is not None:
            exporter, self._exporter = self._exporter, None
            await asyncio.to_thread(exporter.stop)
            log.info("mm2 lag: lease lost or worker stopping: collection stopped")
