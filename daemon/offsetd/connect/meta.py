"""Connector class and type, which Connect's topics do not carry, cached from its REST API.

Filled by `GET /connectors?expand=info&expand=status` per Connect cluster, refreshed when a
connector's status changes (rate-limited) and every minute. Configs are never logged.
"""

from __future__ import annotations

import logging
import time

from offsetd.connect.client import ConnectClient
from offsetd.engine import ConnectorMeta
from offsetd.errors import OffsetdError

log = logging.getLogger("offsetd.meta")


class ConnectorMetaCache:
    def __init__(self, clients: dict[str, ConnectClient], min_interval_s: float = 2.0) -> None:
        self._clients = clients
        self._meta: dict[tuple[str, str], ConnectorMeta] = {}
        self._refreshed: dict[str, float] = {}
        self._min_interval_s = min_interval_s

    def get(self, connect_cluster: str, connector: str) -> ConnectorMeta | None:
        return self._meta.get((connect_cluster, connector))

    async def refresh(self, connect_cluster: str, *, force: bool = False) -> None:
        client = self._clients.get(connect_cluster)
        last = self._refreshed.get(connect_cluster, 0.0)
        if client is None or (not force and time.monotonic() - last < self._min_interval_s):
            return
        self._refreshed[connect_cluster] = time.monotonic()
        try:
            expanded = await client.expanded()
        except OffsetdError as exc:
            log.warning("could not refresh connector metadata of %s: %s", connect_cluster, exc)
            return
        for name, entry in expanded.items():
            info = entry.get("info") or {}
            config = info.get("config") or {}
            self._meta[(connect_cluster, name)] = ConnectorMeta(
                connector_class=str(config.get("connector.class", "")),
                connector_type=str(info.get("type") or entry.get("status", {}).get("type", "")),
            )

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
