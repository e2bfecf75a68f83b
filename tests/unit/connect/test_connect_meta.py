"""offsetd.connect.meta: the connector class/type cache against an httpx.MockTransport Connect.

Refreshed on a connector status change and on a lookup miss, rate-limited, never waiting in
`get`, never logging a config, surviving a failing Connect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from offsetd.connect.client import ConnectClient
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import ConnectorMeta
from offsetd.retry import Backoff

T = TypeVar("T")
BASE = "http://connect.test:8083"
SECRET = "s3cr3t-hunter2-do-not-log"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


class FakeConnect:
    """`GET /connectors?expand=info&expand=status` from a dict of connectors; or a failure."""

    def __init__(self) -> None:
        self.connectors: dict[str, tuple[str, str]] = {}  # name -> (class, type)
        self.requests: list[httpx.Request] = []
        self.fail: Callable[[httpx.Request], httpx.Response] | None = None

    def add(self, name: str, cls: str = SINK, kind: str = "sink") -> None:
        self.connectors[name] = (cls, kind)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        assert request.url.path == "/connectors"
        assert request.url.params.get_list("expand") == ["info", "status"]
        if self.fail is not None:
            return self.fail(request)
        body = {
            name: {
                "info": {
                    "name": name,
                    "config": {
                        "connector.class": cls,
                        "connection.url": "jdbc:postgresql://db/orders",
                        "connection.password": SECRET,
                        "name": name,
                    },
                    "tasks": [{"connector": name, "task": 0}],
                    "type": kind,
                },
                "status": {
                    "name": name,
                    "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
                    "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w1:8083"}],
                    "type": kind,
                },
            }
            for name, (cls, kind) in self.connectors.items()
        }
        return httpx.Response(200, json=body)


class Clock:
    """A monotonic clock the test moves; `sleep` moves it (and lets the loop run)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def make_cache(
    connect: FakeConnect, clock: Clock, **kw: Any
) -> tuple[ConnectorMetaCache, ConnectClient]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(connect), base_url=BASE)
    client = ConnectClient(http, backoff=Backoff(attempts=1), sleep=clock.sleep)
    cache = ConnectorMetaCache(
        {"local": client}, min_interval_s=2.0, clock=clock, sleep=clock.sleep, **kw
    )
    return cache, client


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def settle(cache: ConnectorMetaCache) -> None:
    """Let the cache's scheduled refreshes run to their end."""
    for _ in range(50):
        await asyncio.sleep(0)
    tasks = list(cache._tasks)
    if tasks:
        await asyncio.gather(*tasks)


def test_a_refresh_fills_class_and_type_from_the_expanded_listing() -> None:
    connect, clock = FakeConnect(), Clock()
    connect.add("orders-sink")
    connect.add("files-source", SOURCE, "source")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        assert cache.get("local", "orders-sink") == ConnectorMeta(
            connector_class=SINK, connector_type="sink"
        )
        assert cache.get("local", "files-source") == ConnectorMeta(
            connector_class=SOURCE, connector_type="source"
        )
        await cache.aclose()

    run(scenario())
    assert len(connect.requests) == 1


def test_a_connector_status_change_refreshes_and_finds_the_new_connector() -> None:
    connect, clock = FakeConnect(), Clock()
    connect.add("old-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        connect.add("new-sink")
        clock.now += 5  # past the rate limit: the status change refreshes at once, awaited
        await cache.refresh("local")
        assert len(connect.requests) == 2
        assert cache._meta[("local", "new-sink")].connector_type == "sink"
        await cache.aclose()

    run(scenario())


def test_a_status_change_within_the_rate_limit_is_served_when_the_interval_ends() -> None:
    """Before: a connector created within 2 s of a refresh waited for the 60 s timer."""
    connect, clock = FakeConnect(), Clock()
    connect.add("old-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        clock.now += 0.5
        connect.add("new-sink")
        await cache.refresh("local")  # rate-limited: does not wait, schedules one
        assert len(connect.requests) == 1
        await settle(cache)
        assert len(connect.requests) == 2
        assert clock.sleeps == [pytest.approx(1.5)]  # the rest of the 2 s interval
        assert ("local", "new-sink") in cache._meta
        await cache.aclose()

    run(scenario())


def test_a_miss_for_an_unknown_connector_refreshes_without_waiting() -> None:
    connect, clock = FakeConnect(), Clock()
    connect.add("old-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        clock.now += 10
        connect.add("new-sink")
        assert cache.get("local", "new-sink") is None  # answers now, never waits
        assert len(connect.requests) == 1
        await settle(cache)
        assert len(connect.requests) == 2
        assert clock.sleeps == []  # the interval was over: at once
        assert cache.get("local", "new-sink") == ConnectorMeta(
            connector_class=SINK, connector_type="sink"
        )
        assert cache.get("local", "old-sink") is not None
        await settle(cache)
        assert len(connect.requests) == 2  # hits ask for nothing
        await cache.aclose()

    run(scenario())


def test_misses_are_rate_limited_to_one_refresh_per_interval() -> None:
    connect, clock = FakeConnect(), Clock()

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        clock.now += 0.25
        connect.add("a-sink")
        connect.add("b-sink")
        for _ in range(100):  # a burst of events of two connectors created just now
            assert cache.get("local", "a-sink") is None
            assert cache.get("local", "b-sink") is None
            await cache.refresh("local")  # and their status changes
        await settle(cache)
        assert len(connect.requests) == 2  # the first, then one for the whole burst
        assert clock.sleeps == [pytest.approx(1.75)]
        assert cache.get("local", "a-sink") is not None
        assert cache.get("local", "b-sink") is not None
        await cache.aclose()

    run(scenario())


def test_a_connector_connect_does_not_know_is_not_asked_for_again_and_again() -> None:
    """Replaying the status history of deleted connectors must not hammer Connect."""
    connect, clock = FakeConnect(), Clock()
    connect.add("live-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock, absent_ttl_s=30.0)
        await cache.refresh("local")
        clock.now += 5
        assert cache.get("local", "deleted-sink") is None
        await settle(cache)
        assert len(connect.requests) == 2  # one look, as for any miss
        for _ in range(20):
            clock.now += 1
            assert cache.get("local", "deleted-sink") is None
            await settle(cache)
        assert len(connect.requests) == 2  # known absent: no more, within the TTL
        clock.now += 30
        assert cache.get("local", "deleted-sink") is None
        await settle(cache)
        assert len(connect.requests) == 3  # it may have come back: look again
        await cache.aclose()

    run(scenario())


def test_a_miss_for_an_unknown_cluster_or_outside_a_loop_asks_nothing() -> None:
    connect, clock = FakeConnect(), Clock()
    cache, _ = make_cache(connect, clock)
    assert cache.get("local", "any") is None  # no running loop: nothing scheduled, no error
    assert cache.get("elsewhere", "any") is None

    async def scenario() -> None:
        assert cache.get("elsewhere", "any") is None
        await cache.refresh("elsewhere")
        await settle(cache)
        await cache.aclose()

    run(scenario())
    assert connect.requests == []


def test_connector_configs_never_appear_in_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx's included
    connect, clock = FakeConnect(), Clock()
    connect.add("jdbc-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        clock.now += 5
        assert cache.get("local", "other-sink") is None
        await settle(cache)
        # Broken answers that carry the config: not JSON, and JSON of the wrong shape.
        clock.now += 5
        connect.fail = lambda _r: httpx.Response(
            200, text=f'{{"jdbc-sink": {{"config": {{"connection.password": "{SECRET}"'
        )
        await cache.refresh("local")
        clock.now += 5
        connect.fail = lambda _r: httpx.Response(200, json=[{"connection.password": SECRET}])
        await cache.refresh("local")
        await cache.aclose()

    run(scenario())
    assert len(connect.requests) == 4
    assert caplog.records, "expected the refreshes and their failures to be logged"
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        assert SECRET not in text, text
        assert "connection.password" not in text, text
        assert "jdbc:postgresql" not in text, text
    assert SECRET not in caplog.text


def _unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize(
    ("failure", "warns"),
    [
        pytest.param(lambda _r: httpx.Response(500, json={"message": "boom"}), True, id="500"),
        pytest.param(lambda _r: httpx.Response(503, text="<html>down</html>"), True, id="503"),
        pytest.param(lambda _r: httpx.Response(200, text="not json"), True, id="not-json"),
        pytest.param(lambda _r: httpx.Response(200, json=["a", "b"]), True, id="a-list"),
        pytest.param(_unreachable, True, id="no-answer"),
        pytest.param(
            lambda _r: httpx.Response(200, json={"x": "not an entry", "y": {"info": 5}}),
            False,
            id="odd-entries",
        ),
    ],
)
def test_a_failing_connect_answer_is_logged_and_keeps_the_cache(
    failure: Callable[[httpx.Request], httpx.Response],
    warns: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    connect, clock = FakeConnect(), Clock()
    connect.add("orders-sink")

    async def scenario() -> None:
        cache, _ = make_cache(connect, clock)
        await cache.refresh("local")
        connect.fail = failure
        clock.now += 5
        await cache.refresh("local")  # a status change: awaited, must not raise
        clock.now += 5
        assert cache.get("local", "new-sink") is None  # a miss: in a task, must not raise
        await settle(cache)
        await cache.refresh("local", force=True)  # the timer
        assert cache.get("local", "orders-sink") == ConnectorMeta(
            connector_class=SINK, connector_type="sink"
        )  # what it knew, it still knows
        connect.fail = None  # Connect is back: the next refresh works
        connect.add("new-sink", SOURCE, "source")
        clock.now += 5
        await cache.refresh("local")
        assert cache.get("local", "new-sink") == ConnectorMeta(
            connector_class=SOURCE, connector_type="source"
        )
        await cache.aclose()

    run(scenario())
    assert len(connect.requests) == 5
    warnings = [r.getMessage() for r in caplog.records if r.name == "offsetd.meta"]
    if warns:
        assert len(warnings) == 3, warnings
        assert all("connector metadata of local" in w for w in warnings), warnings
    else:
        assert warnings == []
