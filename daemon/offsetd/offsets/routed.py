"""A Connect client whose moving calls go through an offsets backend's parts.

Callers written against `ConnectClient` (the daemon's skip saga, locating a poison record) both
read and move connectors with it. A backend that drives an orchestrator's resources must see
the moves — Strimzi would put a REST stop, config change or pause back at its next reconcile —
so `ChangeSequence.client` is this client: every read goes to Connect's REST API, while stop,
pause, resume, restarts, config and offsets writes go to the backend, which moves the connector
its own way (for the `rest` backend: the same REST calls).
"""

from __future__ import annotations

from typing import Protocol

from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.offsets.model import OffsetEntry

__all__ = ["BackendClient", "Moves"]


class Moves(Protocol):
    """The backend's moving calls (`offsetd.offsets.backend.StepwiseBackend`)."""

    async def request_state(self, connector: str, state: str) -> None: ...

    async def restart_failed(self, connector: str) -> ConnectorState: ...

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState: ...

    async def put_config(self, connector: str, config: dict[str, str]) -> None: ...

    async def write_offsets(self, connector: str, patch: list[OffsetEntry]) -> str: ...


class BackendClient(ConnectClient):
    """`ConnectClient` (sharing `client`'s connection pool) with the moving calls routed
    through `backend`."""

    def __init__(self, client: ConnectClient, backend: Moves) -> None:
        super().__init__(client.http, user=client.user)
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
