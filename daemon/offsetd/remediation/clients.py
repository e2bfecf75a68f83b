"""The daemon's Connect clients and offsets backends, built in one place.

An action gets one Connect client, opened for it by the executor: every answer is logged for
the audit (no bodies, no auth) and counted. It is the client of the cluster's offsets backend
(`StepwiseBackend.client`): reads go to Connect's REST API, and its moving calls go through the
backend's parts, so every action — and the locating and skipping that are written against a
Connect client — moves connectors the way the backend must (through an orchestrator's resources
where REST moves would be put back). Which backend that is, is the offsets registry's choice,
from the cluster's config; asked for the backend of a client it opened, this hands back that
same backend, so two backends never stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import httpx

from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.connect.client import ConnectClient
from offsetd.connect.transport import httpx_options, user_of
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.backend import BackendRequest, StepwiseBackend, Timeouts
from offsetd.offsets.registry import stepwise_backend_for
from offsetd.offsets.snapshots import SnapshotStore
from offsetd.retry import retry_call

__all__ = ["Clients", "ClientsHost", "call_again"]

log = logging.getLogger("offsetd.remediation")
T = TypeVar("T")


class ClientsHost(Protocol):
    """The executor's settings the clients are built from (read at each call: tests tune them)."""

    settings: RemediationSettings
    connect: dict[str, ConnectCluster]
    metrics: RemediationMetrics
    http_timeout_s: float

    @property
    def snapshots(self) -> Callable[[str], SnapshotStore]: ...


class Clients:
    """Opens the clients of the executor's actions and gives each its offsets backend."""

    def __init__(self, host: ClientsHost) -> None:
        self.host = host
        self._opened: dict[int, StepwiseBackend] = {}  # id(client) -> its backend, while open

    def backend(self, client: ConnectClient, connect_cluster: str) -> StepwiseBackend:
        """The offsets backend of `client`: the one it was opened with, else a new one."""
        opened = self._opened.get(id(client))
        if opened is not None and opened.connect_cluster == connect_cluster:
            return opened
        return self._build(client, connect_cluster)

    def _build(self, client: ConnectClient, connect_cluster: str) -> StepwiseBackend:
        return stepwise_backend_for(
            BackendRequest.for_cluster(
                connect_cluster,
                self.host.connect.get(connect_cluster),
                client,
                self.host.snapshots(connect_cluster),
                timeouts=Timeouts(
                    stop_s=self.host.settings.stop_timeout / 1000,
                    resume_s=self.host.settings.resume_timeout / 1000,
                    # waiting for STOPPED / RUNNING: a GET /status per poll, for a second or two
                    poll_s=0.05,
                ),
                log=lambda msg: log.info("%s", msg),
            )
        )

    @contextlib.asynccontextmanager
    async def open(
        self, cluster: ConnectCluster, calls: list[dict[str, Any]]
    ) -> AsyncIterator[ConnectClient]:
        """A Connect client whose every answer is logged in `calls` and counted; the client of
        the cluster's offsets backend (see the module's docstring)."""

        async def on_response(response: httpx.Response) -> None:
            request = response.request
            call = {
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
            }
            if request.url.query:
                call["query"] = request.url.query.decode()
            calls.append(call)
            self.host.metrics.connect_requests.labels(
                request.method, str(response.status_code)
            ).inc()

        http = httpx.AsyncClient(
            timeout=self.host.http_timeout_s,
            event_hooks={"response": [on_response]},
            **httpx_options(cluster),
        )
        raw = ConnectClient(http, user=user_of(cluster))
        name = next((n for n, c in self.host.connect.items() if c is cluster), None)
        if name is None:  # a cluster the executor was not given: plain REST
            try:
                yield raw
            finally:
                await raw.aclose()
            return
        backend = self._build(raw, name)
        client = backend.client
        self._opened[id(client)] = backend
        try:
            yield client
        finally:
            self._opened.pop(id(client), None)
            await raw.aclose()


async def call_again(
    what: str,
    call: Callable[[], Awaitable[T]],
    delays_s: Sequence[float],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """`call` (idempotent), tried again after each of `delays_s` when Connect did not answer,
    was busy or failed on its side; any other error is raised at once, the last one too."""

    def said(error: Exception, _attempt: int, delay: float) -> None:
        log.warning("could not %s (%s); trying again in %g s", what, error, delay)

    return await retry_call(call, delays_s, before_retry=said, sleep=sleep)
