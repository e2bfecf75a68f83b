"""A config change on a Strimzi-managed connector sets `tasksMax` where Strimzi reads it: the
KafkaConnector's spec, or the mirror connector's in a KafkaMirrorMaker2 (only when the count
changes there: a mirror's tasksMax is usually left out, and offsetd adds nothing it need not).
Fakes of the site and the client, for the routing logic only: the KafkaConnector case runs on
the real API server in tests/integration/test_scale_tasks_strimzi.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from offsetd.connect.client import ConnectClient
from offsetd.offsets.strimzi.parts import StrimziMover
from offsetd.offsets.strimzi.resources import ConnectorResource
from offsetd.offsets.strimzi.site import StrimziSite


class FakeSite:
    def __init__(self, found: ConnectorResource) -> None:
        self.found = found
        self.set: list[tuple[str, Any]] = []

    async def locate(self, _connector: str) -> ConnectorResource:
        return self.found

    async def set_spec(self, found: ConnectorResource, field: str, value: Any) -> Any:
        self.set.append((field, value))
        return found

    async def await_operator(self, _what: str, done: Callable[[], Awaitable[bool]]) -> None:
        assert await done()


class FakeClient:
    """Connect's config: as it is, then (once the site's operator wait asks) as applied."""

    def __init__(self, *answers: dict[str, str]) -> None:
        self.answers = list(answers)

    async def config(self, _name: str) -> dict[str, str]:
        return dict(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


def _found(kind: str, spec: dict[str, Any]) -> ConnectorResource:
    attrs = {"kind": kind, "spec": spec, "label": f"{kind} c"}
    return cast(ConnectorResource, type("Found", (), attrs)())


@pytest.mark.parametrize(
    ("kind", "now", "wanted", "sets_tasks_max"),
    [
        ("KafkaConnector", "1", "2", True),
        ("KafkaConnector", "2", "2", True),  # the resource's own field, set as before
        ("KafkaMirrorMaker2", "1", "3", True),
        ("KafkaMirrorMaker2", "1", "1", False),  # unchanged: the mirror's spec is left alone
    ],
)
def test_tasks_max_goes_where_strimzi_reads_it(
    kind: str, now: str, wanted: str, sets_tasks_max: bool
) -> None:
    site = FakeSite(_found(kind, {}))
    config = {"connector.class": "C", "topics": "t", "tasks.max": wanted}
    answers = [config] if kind == "KafkaConnector" else [{**config, "tasks.max": now}, config]
    mover = StrimziMover(cast(StrimziSite, site), cast(ConnectClient, FakeClient(*answers)))
    asyncio.run(mover.put_config("c", config))
    assert site.set[0] == ("config", {"topics": "t"})
    assert (("tasksMax", int(wanted)) in site.set) is sets_tasks_max
