"""The restart action stands down where Strimzi's autoRestart restarts the connector itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from offsetd.connect.client import ConnectorState, TaskState
from offsetd.remediation.actions.base import ActionCall, Services
from offsetd.remediation.actions.restart import RestartSpec, restart


class Backend:
    def __init__(self, owner: str | None) -> None:
        self.owner = owner

    async def auto_restarted_by(self, connector: str) -> str | None:
        return self.owner


class Client:
    def __init__(self) -> None:
        self.restarts = 0

    async def restart_failed(self, name: str) -> ConnectorState:
        self.restarts += 1
        return ConnectorState(name, "RUNNING", "w", (TaskState(0, "RESTARTING", "w"),), "sink")


class FakeServices:
    """Only what the restart handler uses (a unit test of its decision, not of Connect)."""

    def __init__(self, owner: str | None) -> None:
        self.skip_pending: dict[str, asyncio.Event] = {}
        self.backend = Backend(owner)

    def now_ms(self) -> int:
        return 0

    def offsets_service(self, client: Any, connect_cluster: str) -> Backend:
        return self.backend

    async def again(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await call()


class Decision:
    connect_cluster = "local"
    connector = "orders-sink"


def run(owner: str | None) -> tuple[tuple[str, str, dict[str, Any]], Client]:
    client = Client()
    call = ActionCall(cast(Any, client), cast(Any, None), cast(Any, Decision()))
    spec = RestartSpec(type="restart-failed-tasks")
    result = asyncio.run(restart(cast(Services, FakeServices(owner)), call, spec))
    return result, client


def test_auto_restart_makes_the_rule_stand_down_and_says_who() -> None:
    (outcome, message, extra), client = run("Strimzi (spec.autoRestart of KafkaConnector x)")
    assert outcome == "suppressed_auto_restart"
    assert "Strimzi (spec.autoRestart of KafkaConnector x) restarts orders-sink" in message
    assert extra == {"auto_restart": "Strimzi (spec.autoRestart of KafkaConnector x)"}
    assert client.restarts == 0


def test_without_auto_restart_the_restart_is_sent() -> None:
    (outcome, _message, _extra), client = run(None)
    assert outcome == "executed"
    assert client.restarts == 1
