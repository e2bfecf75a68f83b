"""The restart action stands down where Strimzi's autoRestart restarts the connector itself, and
restarts a sink that committed nothing only once its start is pinned."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from offsetd.connect.client import ConnectorState, TaskState
from offsetd.remediation.actions.base import ActionCall, Services
from offsetd.remediation.actions.restart import RestartSpec, restart
from offsetd.remediation.sink_start import StartNotPinned


class Client:
    def __init__(self) -> None:
        self.restarts = 0

    async def restart_failed(self, name: str) -> ConnectorState:
        self.restarts += 1
        return ConnectorState(name, "RUNNING", "w", (TaskState(0, "RESTARTING", "w"),), "sink")


class Backend:
    """The offsets backend's restart moves: who restarts it on its own, and the restart (to
    the client, as REST's mover does)."""

    def __init__(self, owner: str | None, client: Client) -> None:
        self.owner = owner
        self.client = client

    async def auto_restarted_by(self, connector: str) -> str | None:
        return self.owner

    async def restart_failed(self, connector: str) -> ConnectorState:
        return await self.client.restart_failed(connector)


class Locator:
    def __init__(self, pinned: str | Exception | None) -> None:
        self.pinned = pinned

    async def pin_unstarted(self, client: Any, decision: Any) -> str | None:
        if isinstance(self.pinned, Exception):
            raise self.pinned
        return self.pinned


class FakeServices:
    """Only what the restart handler uses (a unit test of its decision, not of Connect)."""

    def __init__(self, owner: str | None, client: Client, pinned: str | Exception | None) -> None:
        self.skip_pending: dict[str, asyncio.Event] = {}
        self.backend = Backend(owner, client)
        self.locator = Locator(pinned)

    def now_ms(self) -> int:
        return 0

    def offsets_service(self, client: Any, connect_cluster: str) -> Backend:
        return self.backend

    async def again(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await call()


class Decision:
    connect_cluster = "local"
    connector = "orders-sink"


def run(
    owner: str | None, pinned: str | Exception | None = None
) -> tuple[tuple[str, str, dict[str, Any]], Client]:
    client = Client()
    call = ActionCall(cast(Any, client), cast(Any, None), cast(Any, Decision()))
    spec = RestartSpec(type="restart-failed-tasks")
    services = FakeServices(owner, client, pinned)
    result = asyncio.run(restart(cast(Services, services), call, spec))
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


def test_a_pinned_start_is_said_in_the_audit() -> None:
    (outcome, _message, extra), client = run(None, "pinned where its consumer starts: t-0 at 3")
    assert outcome == "executed"
    assert extra == {"pinned": "pinned where its consumer starts: t-0 at 3"}
    assert client.restarts == 1


def test_a_start_that_cannot_be_pinned_is_not_restarted_past() -> None:
    """A restart of a `latest` sink that committed nothing would begin at the log end."""
    refused = StartNotPinned("t-0 has records but no committed offset ... (group not empty)")
    (outcome, message, _extra), client = run(None, refused)
    assert outcome == "failed"
    assert message.startswith("not restarted: t-0 has records but no committed offset")
    assert client.restarts == 0
