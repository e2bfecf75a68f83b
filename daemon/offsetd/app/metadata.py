"""Reading one connector's metadata for the events that wait for it (`offsetd.engine.later`).

A rule that reads the connector's class or type cannot decide an event while they are unknown;
the event is kept in the connector's state, and this reads the metadata from Connect (a few
reads at a time, tried again with growing pauses, given up after the rules' longest window).
Once known, it nudges the connector's owner through the events topic, so the decision is made
by the one writer of that state, in order with its events.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from offsetd.app.wiring import Wiring
from offsetd.errors import OffsetdError
from offsetd.rules.models import ConnectorMeta

__all__ = ["MetadataReader", "Nudge"]

log = logging.getLogger("offsetd")
Nudge = Callable[[str, dict[str, object]], Awaitable[None]]
_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class MetadataReader:
    """One task per connector at most; `reading` tells whether one is under way."""

    def __init__(self, wiring: Wiring, nudge: Nudge) -> None:
        self._wiring = wiring
        self._nudge = nudge
        self._fetching: dict[str, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(4)

    def reading(self, key: str) -> bool:
        return key in self._fetching

    def await_meta(self, key: str, cluster: str, connector: str) -> None:
        """One task per connector reads its metadata from Connect (not rate-limited, tried
        again) and nudges the owner when it is known (the nudge decides the waiting events)."""
        if key in self._fetching:
            return
        task = asyncio.get_running_loop().create_task(self._fetch(key, cluster, connector))
        self._fetching[key] = task
        task.add_done_callback(lambda _done: self._fetching.pop(key, None))

    async def _fetch(self, key: str, cluster: str, connector: str) -> None:
        give_up = time.monotonic() + self._wiring.rules.meta_within_ms / 1000
        await asyncio.sleep(0.2)  # a cluster-wide read under way (at start) may answer it
        for attempt in itertools.count():
            meta = self._wiring.meta.peek(cluster, connector)
            if meta is None:
                meta = await self._read_once(key, cluster, connector, attempt)
            if meta is not None:
                log.info("%s's metadata is known: deciding its waiting events", key)
                try:
                    await self._nudge(key, {"type": "metadata"})
                except Exception:  # the timer (`FrameDecider.rescan_waiting`) tries again
                    log.exception("could not nudge the owner of %s", key)
                return
            if time.monotonic() > give_up:
                log.warning("%s's metadata: no answer within its rules' windows; gave up", key)
                return
            await asyncio.sleep(_DELAYS[min(attempt, len(_DELAYS) - 1)])

    async def _read_once(
        self, key: str, cluster: str, connector: str, attempt: int
    ) -> ConnectorMeta | None:
        try:
            async with self._slots:  # a few at a time, whatever the backlog
                meta = await self._wiring.meta.fetch(cluster, connector)
        except OffsetdError as exc:  # names the call and the status, never a config
            log.warning("could not read %s's metadata (try %d): %s", key, attempt + 1, exc)
            return None
        except Exception as exc:  # a broken answer: say what, not its content
            why = type(exc).__name__
            log.warning("could not read %s's metadata (try %d): %s", key, attempt + 1, why)
            return None
        if meta is None:
            log.warning("%s is not known to Connect yet (try %d)", key, attempt + 1)
        return meta
