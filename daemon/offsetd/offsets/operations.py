"""The `rest` offsets backend: Connect's REST API as the parts of the safe sequence.

The sequence itself (snapshot -> stop -> write -> read back -> restore, never half-done and
silent) is `offsetd.offsets.sequence.ChangeSequence`; here are the REST parts it runs on —
offsets listed and read back with GET .../offsets, written with PATCH (DELETE for a reset),
the connector moved with stop/pause/resume, restarts and PUT .../config. Other backends reuse
them for what they do not do their own way (`strimzi` for a connector no resource describes,
`strimzi-manual` for every read).
"""

from __future__ import annotations

from collections.abc import Sequence

from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.offsets.backend import BackendRequest, Parts, Refusal
from offsetd.offsets.change import Plan
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.sequence import CHANGEABLE_STATES, UNDOABLE_STATUSES, ChangeSequence

__all__ = [
    "CHANGEABLE_STATES",
    "UNDOABLE_STATUSES",
    "RestMover",
    "RestReader",
    "RestRoute",
    "RestWriter",
    "rest_backend",
    "rest_parts",
]


class RestReader:
    """Offsets as Connect's REST API lists them (GET .../offsets)."""

    def __init__(self, client: ConnectClient) -> None:
        self.client = client

    async def require_api(self) -> None:
        await self.client.require_offsets_api()

    async def offsets(self, connector: str) -> list[OffsetEntry]:
        return await self.client.offsets(connector)

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        await self.client.require_offsets_api()
        chosen = list(connectors) or await self.client.connector_names()
        return {name: await self.client.offsets(name) for name in chosen}

    async def read_back(self, connector: str) -> list[OffsetEntry]:
        return await self.client.offsets(connector)


class RestWriter:
    """PATCH .../offsets with the entries, or DELETE them all."""

    def __init__(self, client: ConnectClient) -> None:
        self.client = client

    async def write(self, connector: str, writes: tuple[OffsetEntry, ...] | None) -> str:
        if writes is None:
            return await self.client.delete_offsets(connector)
        return await self.client.patch_offsets(connector, list(writes))


class RestMover:
    """stop/pause/resume, restarts (onlyFailed, includeTasks) and PUT .../config."""

    def __init__(self, client: ConnectClient) -> None:
        self.client = client

    async def request_state(self, connector: str, state: str) -> None:
        if state == "STOPPED":
            await self.client.stop(connector)
        elif state == "PAUSED":
            await self.client.pause(connector)
        else:
            await self.client.resume(connector)

    async def restart_failed(self, connector: str) -> ConnectorState:
        return await self.client.restart_failed(connector)

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState:
        return await self.client.restart_tasks(connector, task_id)

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        await self.client.put_config(connector, config)

    async def auto_restarted_by(self, connector: str) -> str | None:
        return None  # REST has no such thing


class RestRoute:
    """REST adds nothing to a plan: its steps are the plan's own (`Plan.steps`)."""

    async def admit(self, connector: str) -> None:
        return None

    async def shown(self, plan: Plan) -> Plan:
        return plan

    def refuse(self, plan: Plan) -> None:
        return None


def rest_parts(
    client: ConnectClient, *, name: str = "rest", refusal: Refusal | None = None
) -> Parts:
    """Every part through REST (`name`, `refusal`: for a backend that is REST with a refusal)."""
    return Parts(
        name,
        client,
        RestReader(client),
        RestWriter(client),
        RestMover(client),
        RestRoute(),
        refusal,
    )


def rest_backend(request: BackendRequest) -> ChangeSequence:
    """The `rest` backend of a Connect cluster (offsetd.offsets.registry)."""
    return ChangeSequence.for_request(request, rest_parts(request.client))
