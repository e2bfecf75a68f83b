"""The daemon's lag lease: the exporter runs only while events partition 0 is assigned here."""

from __future__ import annotations

import asyncio

import pytest

from offsetd.config import ConnectCluster, Settings
from offsetd.lag.exporter import LagExporter
from offsetd.lag.ownership import LagOwnership

TOPIC = "offsetd-events"


class FakeExporter(LagExporter):
    """Records start/stop; renders a fixed page (no Kafka, no Connect)."""

    def __init__(self, settings: Settings, log: list[str]) -> None:
        self.settings = settings
        self.log = log

    def start(self) -> None:
        self.log.append("start")

    def stop(self, timeout_s: float = 30.0) -> None:
        self.log.append("stop")

    def render(self) -> bytes:
        return b"offsetd_mm2_lag_slo_seconds 300.0\n"


def settings(enabled: bool = True) -> Settings:
    return Settings.model_validate(
        {
            "kafka_clusters": {"west": {"bootstrap_servers": "127.0.0.1:1"}},
            "connect_clusters": {
                "a": {"url": "http://127.0.0.1:2", "kafka_cluster": "west"},
                "b": {"url": "http://127.0.0.1:3", "kafka_cluster": "west"},
            },
            "lag": {"enabled": enabled},
        }
    )


def ownership(
    log: list[str], made: list[Settings], enabled: bool = True, only: str = "a"
) -> LagOwnership:
    config = settings(enabled)
    connect: dict[str, ConnectCluster] = {only: config.connect_clusters[only]}

    def factory(s: Settings) -> LagExporter:
        made.append(s)
        return FakeExporter(s, log)

    return LagOwnership(config, connect, exporter_factory=factory, poll_s=0.01)


async def follow_through(owner: LagOwnership, assignments: list[set[tuple[str, int]]]) -> None:
    """Run `follow` over a scripted sequence of assignments, then cancel it."""
    script = iter(assignments)
    last: set[tuple[str, int]] = set()

    def assignment() -> set[tuple[str, int]]:
        nonlocal last
        last = next(script, last)
        return last

    task = asyncio.create_task(owner.follow(assignment, TOPIC))
    for _ in range(len(assignments) + 3):
        await asyncio.sleep(0.03)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_starts_on_the_lease_stops_when_lost_and_on_shutdown() -> None:
    log: list[str] = []
    made: list[Settings] = []
    owner = ownership(log, made)
    assert owner.page() == b""
    asyncio.run(
        follow_through(
            owner,
            [
                {(TOPIC, 1)},  # not the lease
                {(TOPIC, 0), (TOPIC, 1)},  # lease gained
                {(TOPIC, 0)},  # kept through a rebalance: no restart
                {(TOPIC, 1), ("other", 0)},  # lost (partition 0 of another topic is no lease)
                {(TOPIC, 0)},  # gained again: a fresh exporter
            ],
        )
    )
    assert log == ["start", "stop", "start", "stop"]  # the last stop: cancelled (shutdown)
    assert len(made) == 2
    assert not owner.active
    assert owner.page() == b""


def test_collects_only_the_connect_clusters_of_this_process() -> None:
    log: list[str] = []
    made: list[Settings] = []
    owner = ownership(log, made, only="b")
    asyncio.run(follow_through(owner, [{(TOPIC, 0)}]))
    assert [sorted(s.connect_clusters) for s in made] == [["b"]]


def test_the_page_is_the_exporters_while_owning() -> None:
    log: list[str] = []
    owner = ownership(log, [])

    async def scenario() -> bytes:
        await owner.set_owned(True)
        page = owner.page()
        await owner.set_owned(False)
        return page

    assert asyncio.run(scenario()) == b"offsetd_mm2_lag_slo_seconds 300.0\n"
    assert owner.page() == b""


def test_disabled_never_starts() -> None:
    log: list[str] = []
    owner = ownership(log, [], enabled=False)

    async def scenario() -> None:
        await asyncio.wait_for(owner.follow(lambda: {(TOPIC, 0)}, TOPIC), 1)

    asyncio.run(scenario())  # returns at once: nothing to follow
    assert log == []
