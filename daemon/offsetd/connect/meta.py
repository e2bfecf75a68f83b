"""Connector class, type and labels, which Connect's topics do not carry, cached from REST.

Filled by `GET /connectors?expand=info&expand=status` per Connect cluster, refreshed when a
connector's status changes, when a lookup misses (a connector created since the last refresh),
and every minute (`force`). All in the event loop, like the agent that asks:

- `refresh(cluster)` (a connector status changed) is awaited by the agent, as before; within
  `min_interval_s` of the last refresh it does not wait but schedules one for when the interval
  is over, so a connector created just after a refresh is known seconds later, not a minute.
- `get` never waits: a miss for a connector not known yet schedules the same deferred refresh
  (one per cluster at a time, at most one per `min_interval_s`) and answers None now. A connector
  that a refresh started after its miss did not find either (deleted, or not ours) triggers no
  new refresh for `absent_ttl_s`, so replaying the history of deleted connectors stays cheap.

- `fetch(cluster, connector)` reads one connector (`GET /connectors/<name>`) now, not rate-limited:
  for an event that waits for this connector's metadata (`offsetd.engine.later`); the caller
  retries. `peek` answers from the cache without asking for anything.

A failing Connect answer is logged (the cluster and the error, never a config or a response
body) and leaves the cache as it was. Configs are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from offsetd.connect.client import ConnectClient
from offsetd.engine import ConnectorMeta
from offsetd.errors import ConnectorNotFound, OffsetdError
from offsetd.scope import labels_of

__all__ = ["ConnectorMetaCache"]

log = logging.getLogger("offsetd.meta")


class ConnectorMetaCache:
    def __init__(
        self,
        clients: dict[str, ConnectClient],
        min_interval_s: float = 2.0,
        *,
        absent_ttl_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clients = clients
        self._meta: dict[tuple[str, str], ConnectorMeta] = {}
        self._refreshed: dict[str, float] = {}  # cluster -> when its last refresh started
        self._min_interval_s = min_interval_s
        self._absent_ttl_s = absent_ttl_s
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, asyncio.Lock] = {}
        self._scheduled: set[str] = set()  # clusters with a deferred refresh not started yet
        self._missed: dict[str, set[str]] = {}  # cluster -> connectors missed since the last
        self._absent: dict[tuple[str, str], float] = {}  # missed, then not found: since when
        self._tasks: set[asyncio.Task[None]] = set()
        self.refreshes = 0  # refreshes started (for tests and curiosity)

    def get(self, connect_cluster: str, connector: str) -> ConnectorMeta | None:
        """The connector's class and type if known; a miss asks for a refresh, never waits."""
        meta = self._meta.get((connect_cluster, connector))
        if meta is None:
            self._on_miss(connect_cluster, connector)
        return meta

    async def lookup(self, connect_cluster: str, connector: str) -> ConnectorMeta | None:
        """The connector's metadata for the scope (offsetd.scope: its labels), read now if need
        be: the cluster's first read is awaited (once per process), so the history replayed at
        start finds the connectors that exist; a connector not known after it is read alone
        (`fetch`, one GET), and one Connect does not know is not asked about again for
        `absent_ttl_s` (replaying deleted connectors stays cheap). None: still not known (not
        found, or Connect did not answer: logged, never a config)."""
        if connect_cluster not in self._clients:
            return None
        if connect_cluster not in self._refreshed:
            await self.refresh(connect_cluster)
        key = (connect_cluster, connector)
        meta = self._meta.get(key)
        since = self._absent.get(key)
        if meta is not None or (since is not None and self._clock() - since < self._absent_ttl_s):
            return meta
        try:
            meta = await self.fetch(connect_cluster, connector)
        except OffsetdError as exc:  # its messages name the call and status, never a config
            log.warning("could not read %s of %s: %s", connector, connect_cluster, exc)
            return None
        except Exception as exc:  # a broken answer: say what, not its content
            log.warning(
                "could not read %s of %s: %s", connector, connect_cluster, type(exc).__name__
            )
            return None
        if meta is None:
            self._absent[key] = self._clock()
        return meta

    def peek(self, connect_cluster: str, connector: str) -> ConnectorMeta | None:
        """The connector's class and type if known; a miss asks for nothing."""
        return self._meta.get((connect_cluster, connector))

    async def fetch(self, connect_cluster: str, connector: str) -> ConnectorMeta | None:
        """Read one connector's class and type from Connect now (cached); None if Connect does
        not know it. A failed read raises `OffsetdError` (the caller decides when to retry)."""
        client = self._clients.get(connect_cluster)
        if client is None:
            return None
        try:
            info = await client.info(connector)
        except ConnectorNotFound:
            return None
        meta = _meta_of({"info": {"config": info.config, "type": info.type}})
        if meta is None:  # pragma: no cover - an entry with info always gives one
            return None
        self._meta[(connect_cluster, connector)] = meta
        self._absent.pop((connect_cluster, connector), None)
        return meta

    def _on_miss(self, connect_cluster: str, connector: str) -> None:
        if connect_cluster not in self._clients:
            return
        since = self._absent.get((connect_cluster, connector))
        if since is not None:
            if self._clock() - since < self._absent_ttl_s:
                return
            del self._absent[(connect_cluster, connector)]
        missed = self._missed.setdefault(connect_cluster, set())
        if len(missed) < 10_000:  # bounded, whatever the input
            missed.add(connector)
        self.request_refresh(connect_cluster)

    def request_refresh(self, connect_cluster: str) -> None:
        """Refresh soon (at most once per `min_interval_s`), in a task of the running loop.

        One that is scheduled and not started yet serves later requests too; a request made
        while a refresh runs gets another one after it (that one may have read too early)."""
        if connect_cluster not in self._clients or connect_cluster in self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (offline use): the next awaited refresh does it
        self._scheduled.add(connect_cluster)
        task = loop.create_task(self._deferred(connect_cluster))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deferred(self, connect_cluster: str) -> None:
        try:
            async with self._lock(connect_cluster):
                last = self._refreshed.get(connect_cluster)
                if last is not None:
                    wait = last + self._min_interval_s - self._clock()
                    if wait > 0:
                        await self._sleep(wait)
                self._scheduled.discard(connect_cluster)
                await self._refresh_now(connect_cluster)
        finally:
            self._scheduled.discard(connect_cluster)

    async def refresh(self, connect_cluster: str, *, force: bool = False) -> None:
        """Re-read the cluster's connectors now; without `force`, within `min_interval_s` of
        the last refresh, schedule one for when the interval is over instead of waiting."""
        if connect_cluster not in self._clients:
            return
        last = self._refreshed.get(connect_cluster)
        if not force and last is not None and self._clock() - last < self._min_interval_s:
            self.request_refresh(connect_cluster)
            return
        async with self._lock(connect_cluster):
            await self._refresh_now(connect_cluster)

    def _lock(self, connect_cluster: str) -> asyncio.Lock:
        lock = self._locks.get(connect_cluster)
        if lock is None:
            lock = self._locks[connect_cluster] = asyncio.Lock()
        return lock

    async def _refresh_now(self, connect_cluster: str) -> None:
        client = self._clients[connect_cluster]
        self._refreshed[connect_cluster] = self._clock()
        self.refreshes += 1
        missed = self._missed.pop(connect_cluster, set())
        try:
            expanded = await client.expanded()
        except OffsetdError as exc:  # its messages name the call and status, never a config
            log.warning("could not refresh connector metadata of %s: %s", connect_cluster, exc)
            return
        except Exception as exc:  # a broken answer (not JSON, ...): say what, not its content
            log.warning(
                "could not refresh connector metadata of %s: %s",
                connect_cluster,
                type(exc).__name__,
            )
            return
        if not isinstance(expanded, dict):
            log.warning("connector metadata of %s: unexpected answer, ignored", connect_cluster)
            return
        for name, entry in expanded.items():
            meta = _meta_of(entry)
            if meta is not None:
                self._meta[(connect_cluster, str(name))] = meta
        now = self._clock()
        for connector in missed:
            if (connect_cluster, connector) not in self._meta:
                self._absent[(connect_cluster, connector)] = now
        if len(self._absent) > 10_000:
            self._absent.clear()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:  # their failures are logged by themselves; cancelled is fine
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.aclose()


def _meta_of(entry: Any) -> ConnectorMeta | None:
    """Class and type from one `expand=info&expand=status` entry (None if it has neither)."""
    if not isinstance(entry, dict):
        return None
    info = entry.get("info")
    info = info if isinstance(info, dict) else {}
    config = info.get("config")
    config = config if isinstance(config, dict) else {}
    status = entry.get("status")
    status = status if isinstance(status, dict) else {}
    connector_type = info.get("type") or status.get("type") or ""
    return ConnectorMeta(
        connector_class=str(config.get("connector.class", "")),
        connector_type=str(connector_type),
        labels=labels_of(config),  # only the offsetd.label.* entries: the rest may be secrets
    )
