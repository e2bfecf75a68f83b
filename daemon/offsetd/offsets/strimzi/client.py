"""A Connect client whose moving calls go through a Strimzi backend, for the daemon's actions.

The daemon's actions (lifecycle, restart, locating a poison record, the skip saga's writes)
are written against `ConnectClient`. On a Strimzi-managed cluster each call that moves a
connector must go through its resource instead — Strimzi would put a REST stop, config change
or pause back at its next reconcile — so this client sends stop/pause/resume, restart, config
and offsets writes to the backend, which uses the resource when one describes the connector
and REST otherwise; every read stays REST.
"""

from __future__ import annotations

from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.operations import OffsetsService

__all__ = ["ResourceDrivenClient"]


class ResourceDrivenClient(ConnectClient):
    """`ConnectClient` with the moving calls routed through `backend`."""

    def __init__(self, client: ConnectClient, backend: OffsetsService) -> None:
        super().__init__(client.http)
        self.backend = backend

    async def stop(self, name: str) -> None:
        await self.backend.request_state(name, "STOPPED")

    async def pause(self, name: str) -> None:
        await self.backend.request_state(name, "PAUSED")

    async def resume(self, name: str) -> None:
        await self.backend.request_state(name, "RUNNING")

    async def restart_failed(self, name: str) -> ConnectorState:
        return await self.backend.restart_failed(name)

    async def restart_tasks(self, name: str, task_id: int | None) -> ConnectorState:
        return await self.backend.restart_tasks(name, task_id)

    async def put_config(self, name: str, config: dict[str, str]) -> None:
        await self.backend.put_config(name, config)

    async def patch_offsets(self, name: str, entries: list[OffsetEntry]) -> str:
        return await self.backend.write_offsets(name, entries)
