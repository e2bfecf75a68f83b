"""The managed service's offsets API, as the sketch speaks it (see the package's docstring).

    GET  {base}/connectors/{name}/offsets                -> {"name", "offsets": [...], "metadata"}
    POST {base}/connectors/{name}/offsets/request        <- {"type": "PATCH"|"DELETE", "offsets"}
    GET  {base}/connectors/{name}/offsets/request/status -> {"request": {...},
                                                              "status": {"phase", "message"}}

`base` is `{url}/connect/v1/environments/{environment}/clusters/{cluster}`; every call carries
`Authorization: Bearer <token>`. A write is accepted (202) and applied by the service later:
its status is polled until APPLIED (or FAILED, whose message is the service's words).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from offsetd.connect.offsets import entries_from_json
from offsetd.errors import ChangeIncomplete, ConnectorRejected, ConnectUnavailable
from offsetd.offsets.model import OffsetEntry

__all__ = ["ManagedApi", "managed_http"]


def managed_http(
    url: str,
    environment: str,
    cluster: str,
    token: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout_s: float = 30.0,
) -> httpx.AsyncClient:
    """An HTTP client rooted at one cluster of the service, with its bearer token."""
    return httpx.AsyncClient(
        base_url=f"{url.rstrip('/')}/connect/v1/environments/{environment}/clusters/{cluster}",
        headers={"Authorization": f"Bearer {token}"},
        transport=transport,
        timeout=timeout_s,
    )


class ManagedApi:
    """The offsets calls of one managed cluster."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        apply_timeout_s: float = 120.0,
        poll_s: float = 1.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.http = http
        self.apply_timeout_s = apply_timeout_s
        self.poll_s = poll_s
        self.sleep = sleep

    async def offsets(self, connector: str) -> list[OffsetEntry]:
        body = await self._json("GET", f"/connectors/{connector}/offsets", connector)
        return entries_from_json(body.get("offsets") or [])

    async def connectors(self) -> list[str]:
        return [str(name) for name in await self._json("GET", "/connectors", "")]

    async def request(self, connector: str, writes: tuple[OffsetEntry, ...] | None) -> str:
        """Ask for a write (None: delete every offset) and wait until the service applied it."""
        body: dict[str, Any] = {"type": "DELETE"}
        if writes is not None:
            body = {"type": "PATCH", "offsets": [e.as_json() for e in writes]}
        await self._json("POST", f"/connectors/{connector}/offsets/request", connector, body)
        deadline = time.monotonic() + self.apply_timeout_s
        while True:
            answer = await self._json(
                "GET", f"/connectors/{connector}/offsets/request/status", connector
            )
            status = answer.get("status") or {}
            phase = str(status.get("phase", ""))
            if phase == "APPLIED":
                return f"the service applied the {body['type']} of {connector}'s offsets"
            if phase == "FAILED":
                raise ConnectorRejected(
                    f"the service refused the {body['type']} of {connector}'s offsets: "
                    f"{status.get('message', 'no reason given')}"
                )
            if time.monotonic() >= deadline:
                raise ChangeIncomplete(
                    f"the service did not apply the {body['type']} of {connector}'s offsets "
                    f"within {self.apply_timeout_s:g} s (it is {phase or 'unknown'})"
                )
            await self.sleep(self.poll_s)

    async def _json(
        self, method: str, path: str, connector: str, body: dict[str, Any] | None = None
    ) -> Any:
        try:
            response = await self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ConnectUnavailable(
                f"the managed Connect service did not answer {method} {path} ({exc})"
            ) from None
        if response.status_code >= 400:
            raise ConnectorRejected(
                f"the managed Connect service answered {response.status_code} to {method} "
                f"{path}{f' ({connector})' if connector else ''}: {response.text[:200]}"
            )
        return response.json() if response.content else {}
