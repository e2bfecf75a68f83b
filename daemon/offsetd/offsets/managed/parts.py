"""The sketch's parts: a reader and a writer over the managed API (`api.ManagedApi`).

Moving a connector (stop, pause, resume, restarts, config) is left to the REST mover: the
service answers Connect's own lifecycle paths under the same base URL; a real backend would
give it a mover of its own where the service's differ.
"""

from __future__ import annotations

from collections.abc import Sequence

from offsetd.offsets.backend import BackendRequest, Parts, Timeouts
from offsetd.offsets.managed.api import ManagedApi
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.operations import RestMover, RestRoute
from offsetd.offsets.sequence import ChangeSequence

__all__ = ["ManagedReader", "ManagedWriter", "managed_backend", "managed_parts"]


class ManagedReader:
    """Offsets as the service lists them; the read-back of a change is the same list."""

    def __init__(self, api: ManagedApi) -> None:
        self.api = api

    async def require_api(self) -> None:
        return None  # the service's offsets API has no versions to check

    async def offsets(self, connector: str) -> list[OffsetEntry]:
        return await self.api.offsets(connector)

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        chosen = list(connectors) or await self.api.connectors()
        return {name: await self.api.offsets(name) for name in chosen}

    async def read_back(self, connector: str) -> list[OffsetEntry]:
        return await self.api.offsets(connector)


class ManagedWriter:
    """A write is an offsets request, applied by the service, waited for."""

    def __init__(self, api: ManagedApi) -> None:
        self.api = api

    async def write(self, connector: str, writes: tuple[OffsetEntry, ...] | None) -> str:
        return await self.api.request(connector, writes)


def managed_parts(request: BackendRequest, api: ManagedApi) -> Parts:
    client = request.client
    return Parts(
        "managed",
        client,
        ManagedReader(api),
        ManagedWriter(api),
        RestMover(client),
        RestRoute(),
    )


def managed_backend(request: BackendRequest) -> ChangeSequence:
    """The sketch's backend (offsetd.offsets.registry, `managed`): the request's client is
    rooted at the service's cluster URL with its bearer token (`api.managed_http`)."""
    api = ManagedApi(request.client.http, poll_s=(request.timeouts or Timeouts()).poll_s)
    return ChangeSequence.for_request(request, managed_parts(request, api))
