"""An async client for Kafka Connect's REST API (KIP-875 offsets, lifecycle, status).

Every failure becomes an `OffsetdError` subclass with a one-sentence message a person can act on.
Connect's own transient states are retried here, once, for every caller: 409 while the group
rebalances, the 500 "a rebalance is expected" right after a config change, and the 500 Connect
returns while a stopped sink's tasks are still leaving the consumer group (Connect itself says
that retrying is safe).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from offsetd.config import ConnectCluster
from offsetd.connect.offsets import OffsetEntry, entries_from_json
from offsetd.connect.transport import httpx_options, transport_error, user_of
from offsetd.errors import (
    ConnectAccessDenied,
    ConnectBusy,
    ConnectorNotFound,
    ConnectorRejected,
    ConnectTooOld,
    OffsetdError,
)
from offsetd.retry import Backoff, retry_call

__all__ = [
    "FRAMEWORK_ONLY_PREFIX",
    "OFFSETS_API_VERSION",
    "REQUEST_TIMED_OUT",
    "ConnectClient",
    "ConnectorInfo",
    "ConnectorState",
    "TaskState",
    "error_for_status",
    "kafka_version",
]

OFFSETS_API_VERSION = (3, 6)
_LINGERING_SINK_TASKS = "either because its tasks haven't stopped completely yet"
# Connect's RebalanceNeededException, answered as a 500 right after a config change; retry.
_REBALANCE_EXPECTED = "because a rebalance is expected"
# Connect's REST layer gave up waiting for its herder (RestServer's 90 s): the request may still
# be carried out, so what it did is unknown, not refused.
REQUEST_TIMED_OUT = "Request timed out"
FRAMEWORK_ONLY_PREFIX = "The Connect framework-managed offsets"


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str
    trace: str | None = None


@dataclass(frozen=True)
class ConnectorState:
    name: str
    state: str
    worker_id: str
    tasks: tuple[TaskState, ...]
    type: str
    trace: str | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ConnectorState:
        return cls(
            name=raw["name"],
            state=raw["connector"]["state"],
            worker_id=raw["connector"].get("worker_id", ""),
            trace=raw["connector"].get("trace"),
            tasks=tuple(
                TaskState(t["id"], t["state"], t.get("worker_id", ""), t.get("trace"))
                for t in raw.get("tasks", [])
            ),
            type=raw.get("type", "unknown"),
        )

    def all_running(self, min_tasks: int = 1) -> bool:
        return (
            self.state == "RUNNING"
            and len(self.tasks) >= min_tasks
            and all(t.state == "RUNNING" for t in self.tasks)
        )

    def failed_part(self) -> str | None:
        """'connector' or 'task N' with the first line of its trace, if anything FAILED."""
        if self.state == "FAILED":
            return f"the connector FAILED: {_first_line(self.trace)}"
        for task in self.tasks:
            if task.state == "FAILED":
                return f"task {task.id} FAILED: {_first_line(task.trace)}"
        return None


def _first_line(trace: str | None) -> str:
    return (trace or "no trace").strip().splitlines()[0][:300]


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    config: dict[str, str]
    type: str
    task_count: int

    @property
    def connector_class(self) -> str:
        return self.config.get("connector.class", "")

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ConnectorInfo:
        return cls(
            raw["name"],
            dict(raw.get("config", {})),
            raw.get("type", "unknown"),
            len(raw.get("tasks", [])),
        )


class ConnectClient:
    """Connect's REST API for one cluster. Build it with `for_cluster` or `for_url`."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        user: str | None = None,
    ) -> None:
        self._http = http
        self.user = user  # the basic-auth user, named when Connect answers 401/403
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self.url = str(http.base_url).rstrip("/")

    @classmethod
    def for_cluster(cls, cluster: ConnectCluster, timeout_s: float = 95.0) -> ConnectClient:
        # Connect bounds its own offset work at 90 s; wait a little longer than that.
        return cls(
            httpx.AsyncClient(timeout=timeout_s, **httpx_options(cluster)), user=user_of(cluster)
        )

    @property
    def http(self) -> httpx.AsyncClient:
        """The transport, for a client layered on this one (it shares the connection pool)."""
        return self._http

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ConnectClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # -- reads ----------------------------------------------------------------------------------

    async def root(self) -> dict[str, Any]:
        result: dict[str, Any] = (await self._call("GET", "/", what="reach Connect")).json()
        return result

    async def version(self) -> tuple[int, ...]:
        """The Apache Kafka version of the worker (Confluent Platform versions are mapped)."""
        return kafka_version(str((await self.root()).get("version", "0")))

    async def require_offsets_api(self) -> None:
        version = await self.version()
        if version < OFFSETS_API_VERSION:
            shown = ".".join(map(str, version))
            raise ConnectTooOld(
                f"Connect {shown} at {self.url} has no offsets REST API (it needs 3.6 or newer); "
                "use --offline"
            )

    async def connector_names(self) -> list[str]:
        names: list[str] = (await self._call("GET", "/connectors", what="list connectors")).json()
        return sorted(names)

    async def expanded(self) -> dict[str, Any]:
        """`GET /connectors?expand=info&expand=status` (connectors with no status are left out)."""
        response = await self._call(
            "GET",
            "/connectors",
            what="list connectors",
            params=[("expand", "info"), ("expand", "status")],
        )
        result: dict[str, Any] = response.json()
        return result

    async def statuses(self) -> dict[str, Any]:
        """`GET /connectors?expand=status`: every connector's status, without its config."""
        response = await self._call(
            "GET", "/connectors", what="list connectors", params=[("expand", "status")]
        )
        result: dict[str, Any] = response.json()
        return result

    async def info(self, name: str) -> ConnectorInfo:
        response = await self._call("GET", _path(name), name=name, what="read the connector")
        return ConnectorInfo.from_json(response.json())

    async def status(self, name: str) -> ConnectorState:
        response = await self._call("GET", _path(name, "/status"), name=name, what="read status")
        return ConnectorState.from_json(response.json())

    async def offsets(self, name: str) -> list[OffsetEntry]:
        response = await self._call("GET", _path(name, "/offsets"), name=name, what="read offsets")
        return entries_from_json(response.json().get("offsets", []))

    async def config(self, name: str) -> dict[str, str]:
        """`GET /connectors/{name}/config`: the stored config (Connect adds `name` to it)."""
        response = await self._call("GET", _path(name, "/config"), name=name, what="read config")
        return {str(k): str(v) for k, v in response.json().items()}

    async def validate_config(
        self, connector_class: str, config: dict[str, str]
    ) -> dict[str, list[str]]:
        """`PUT /connector-plugins/{class}/config/validate`: the errors per key (none: `{}`).

        Validation runs on the worker that answers, with its client override policy, and changes
        nothing: a refused `consumer.override.*` key shows up here as an error on that key.
        """
        path = f"/connector-plugins/{quote(connector_class, safe='')}/config/validate"
        response = await self._call("PUT", path, what="validate a connector config", json=config)
        errors: dict[str, list[str]] = {}
        for item in response.json().get("configs", []):
            value = item.get("value", {})
            if value.get("errors"):
                errors[str(value.get("name"))] = [str(e) for e in value["errors"]]
        return errors

    # -- changes --------------------------------------------------------------------------------

    async def stop(self, name: str) -> None:
        await self._call("PUT", _path(name, "/stop"), name=name, what="stop the connector")

    async def pause(self, name: str) -> None:
        await self._call("PUT", _path(name, "/pause"), name=name, what="pause the connector")

    async def resume(self, name: str) -> None:
        await self._call("PUT", _path(name, "/resume"), name=name, what="resume the connector")

    async def restart_failed(self, name: str) -> ConnectorState:
        response = await self._call(
            "POST",
            _path(name, "/restart"),
            name=name,
            what="restart failed tasks",
            params={"includeTasks": "true", "onlyFailed": "true"},
        )
        return ConnectorState.from_json(response.json())

    async def restart_tasks(self, name: str, task_id: int | None) -> ConnectorState:
        """Restart one task whatever its state (`POST .../tasks/{id}/restart`), or, for None,
        the connector and every task (`includeTasks`, not `onlyFailed`); the status after."""
        if task_id is None:
            response = await self._call(
                "POST",
                _path(name, "/restart"),
                name=name,
                what="restart the connector and its tasks",
                params={"includeTasks": "true", "onlyFailed": "false"},
            )
            if response.status_code == 202 and response.content:
                return ConnectorState.from_json(response.json())
        else:
            await self._call(
                "POST", _path(name, f"/tasks/{task_id}/restart"), name=name, what="restart a task"
            )
        return await self.status(name)

    async def patch_offsets(self, name: str, entries: list[OffsetEntry]) -> str:
        """PATCH the listed partitions; returns Connect's message (see FRAMEWORK_ONLY_PREFIX)."""
        body = {"offsets": [e.as_json() for e in entries]}
        response = await self._call(
            "PATCH", _path(name, "/offsets"), name=name, what="alter offsets", json=body
        )
        return str(response.json().get("message", ""))

    async def delete_offsets(self, name: str) -> str:
        response = await self._call(
            "DELETE", _path(name, "/offsets"), name=name, what="reset offsets"
        )
        return str(response.json().get("message", ""))

    async def put_config(self, name: str, config: dict[str, str]) -> None:
        """`PUT /connectors/{name}/config`: replace the whole config (400 if Connect refuses it)."""
        await self._call(
            "PUT", _path(name, "/config"), name=name, what="update the config", json=config
        )

    # -- plumbing -------------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, *, what: str, name: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request; Connect's transient refusals (409, a rebalance, lingering sink tasks)
        are asked again with the client's backoff (`offsetd.retry`), then reported busy."""

        async def once() -> httpx.Response:
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                raise transport_error(exc, what, self.url) from None
            if response.is_success:
                return response
            message = _error_message(response)
            if _transient(response.status_code, message):
                raise _Refused(response.status_code, message)
            raise error_for_status(
                response.status_code, message, what, name, self.url, user=self.user
            )

        try:
            return await retry_call(
                once,
                self._backoff.delays(),
                retriable=lambda exc: isinstance(exc, _Refused),
                sleep=self._sleep,
            )
        except _Refused as refused:
            raise ConnectBusy(
                f"could not {what}{_for(name)}: Connect kept refusing "
                f"({refused.status}: {refused.message}); retry when the group is stable",
                status=refused.status,
            ) from None


def kafka_version(text: str) -> tuple[int, ...]:
    """`4.2.0` -> (4, 2, 0); Confluent's `7.5.0-ccs` is Kafka 3.5 (CP 7.x = 3.x, 8.x = 4.x)."""
    head, _, suffix = text.partition("-")
    numbers = tuple(int(p) for p in head.split(".")[:3] if p.isdigit())
    if suffix.startswith(("ccs", "ce")) and len(numbers) >= 2:
        major, minor = numbers[0], numbers[1]
        if major in (7, 8):
            return (major - 4, minor)
        if major == 6:
            return (2, 6 + minor)
        if major == 5:
            return (2, minor)
    return numbers


def _path(name: str, suffix: str = "") -> str:
    return f"/connectors/{quote(name, safe='')}{suffix}"


def _for(name: str | None) -> str:
    return f" for {name}" if name else ""


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return str(body)[:300]


def _transient(status: int, message: str) -> bool:
    return status == 409 or (
        status == 500 and (_LINGERING_SINK_TASKS in message or _REBALANCE_EXPECTED in message)
    )


class _Refused(Exception):
    """A transient refusal, asked again by `_call` (never leaves this module)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_for_status(
    status: int, message: str, what: str, name: str | None, url: str, *, user: str | None = None
) -> OffsetdError:
    """The error for a failed answer, with its status and whether asking again can help: no
    answer, busy, or a failure on Connect's side (5xx); an alterOffsets the connector itself
    refused (500) only when Connect's REST layer merely stopped waiting (the request may
    still be carried out)."""
    if status == 404 and name is not None:
        return ConnectorNotFound(
            f"connector {name!r} does not exist on Connect at {url}", status=status
        )
    if status == 401:  # asking again with the same password cannot help: not retriable
        who = f"user {user}" if user else "no credentials configured"
        return ConnectAccessDenied(
            f"could not {what}: Connect at {url} refused our credentials ({who}): 401",
            status=status,
        )
    if status == 403:
        return ConnectAccessDenied(
            f"Connect at {url}: user {user or '(anonymous)'} is not allowed to {what}"
            f"{_for(name)} (403)",
            status=status,
        )
    if status == 500 and what in ("alter offsets", "reset offsets"):
        return ConnectorRejected(
            f"Connect refused to {what}{_for(name)}: {message}",
            status=status,
            retriable=REQUEST_TIMED_OUT in message,
        )
    return OffsetdError(
        f"could not {what}{_for(name)}: Connect answered {status}: {message}",
        status=status,
        retriable=status >= 500,
    )
