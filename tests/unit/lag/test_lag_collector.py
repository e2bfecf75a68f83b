"""The collector's incremental cycle: unchanged partitions keep their rows, everything else is
recomputed, and the result equals a collector that starts from nothing (no Kafka, no Connect).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from offsetd.config import Settings
from offsetd.errors import ConnectAccessDenied, ConnectUnavailable
from offsetd.lag import collector as collector_module
from offsetd.lag.collector import Collector
from offsetd.lag.connect_state import ConnectView, MirrorFlow
from offsetd.lag.kafka_io import Position as KafkaPosition
from offsetd.lag.mirror_offsets import MirrorOffsets
from offsetd.lag.snapshot import ConnectorHealth, PartitionLag
from offsetd.lag.status import Status
from offsetd.offsets.model import ConnectorKind

TP = tuple[str, int]
CONNECTOR = "src->tgt.MirrorSourceConnector"


class _Answer:
    def __init__(self, offset: int) -> None:
        self.offset, self.timestamp = offset, -1

    def result(self) -> _Answer:
        return self


class MemoryAdmin:
    """ListOffsets from a dict (latest = `ends`, earliest = 0); counts the calls."""

    def __init__(self, ends: dict[TP, int], starts: dict[TP, int] | None = None) -> None:
        self.ends = ends
        self.starts = starts or {}
        self.calls = 0

    def list_offsets(self, request: Mapping[TopicPartition, Any], **_kw: Any) -> dict[Any, Any]:
        self.calls += 1
        latest = -1
        return {
            tp: _Answer(
                self.ends[(tp.topic, tp.partition)]
                if spec._value == latest
                else self.starts.get((tp.topic, tp.partition), 0)
            )
            for tp, spec in request.items()
        }

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return type("Meta", (), {"topics": {}})()


class MemoryFetcher:
    """Record timestamps: offset o of any partition was written at `base_ms + o`.

    Offsets in `markers` are transaction markers (never returned, as for a consumer); with
    `ends` set, a partition with no record before its end answers None.
    """

    def __init__(self, base_ms: int) -> None:
        self.base_ms = base_ms
        self.markers: dict[TP, set[int]] = {}
        self.ends: dict[TP, int] | None = None
        self.calls = 0

    def fetch(
        self, wanted: Mapping[TP, int], timeout_s: float = 10.0
    ) -> dict[TP, KafkaPosition | None]:
        self.calls += 1
        out: dict[TP, KafkaPosition | None] = {}
        for tp, wanted_offset in wanted.items():
            o = wanted_offset
            while o in self.markers.get(tp, ()):
                o += 1
            end = None if self.ends is None else self.ends[tp]
            out[tp] = None if end is not None and o >= end else KafkaPosition(o, self.base_ms + o)
        return out

    def close(self) -> None:
        return


class MemoryCollector(Collector):
    def __init__(
        self,
        ends: dict[TP, int],
        mirror: MirrorOffsets,
        state: Path,
        *,
        read_only: bool = False,
        starts: dict[TP, int] | None = None,
    ) -> None:
        self.now = 1_000_000.0
        super().__init__(
            Settings.model_validate({"lag": {"window": "1m", "flush_interval": "1s"}}),
            admin_factory=lambda _conf: MemoryAdmin(ends, starts),
            state_file=state,
            clock=lambda: self.now,
            read_only_state=read_only,
        )
        self._mirror["c"] = mirror
        flow = MirrorFlow("c", CONNECTOR, ConnectorKind.MIRROR_SOURCE, "src", "tgt", "s:1", "t:1")
        health = ConnectorHealth(
            "c", CONNECTOR, "MirrorSourceConnector", "RUNNING", ((0, "RUNNING"),), "src", "tgt"
        )
        self._views["c"] = ConnectView([health], [flow], {})
        self.fetcher = MemoryFetcher(int(self.now * 1000))

    def _read_connect(self, errors: dict[str, str]) -> None:
        return

    def _read_offsets(self, errors: dict[str, str]) -> None:
        return

    def _fetcher(self, conf: Mapping[str, str]) -> Any:
        return self.fetcher


def rows(collector: Collector) -> dict[TP, PartitionLag]:
    return {(p.topic, p.partition): p for p in collector.collect().partitions}


def facts(row: PartitionLag) -> tuple[Any, ...]:
    return (row.end, row.last_replicated, row.lag_records, row.lag_seconds is not None)


def test_idle_rows_are_kept_and_changes_are_seen(tmp_path: Path) -> None:
    ends = {("a", 0): 10, ("a", 1): 10, ("b", 0): 7, ("b", 1): 0}
    mirror = MirrorOffsets()
    for (topic, partition), n in {("a", 0): 9, ("a", 1): 6, ("b", 0): 6}.items():
        mirror.move((CONNECTOR, "src", topic, partition), n, 1_000)
    collector = MemoryCollector(ends, mirror, tmp_path / "w.json")
    first = rows(collector)
    assert {tp: r.lag_records for tp, r in first.items()} == {("a", 0): 0, ("a", 1): 3, ("b", 0): 0}
    assert first[("a", 1)].lag_seconds is not None
    # ("b", 1) has no N and no assignment: not a partition of this connector

    collector.now += 10
    second = rows(collector)
    assert second[("a", 0)] is first[("a", 0)]  # idle and caught up: the same row
    assert second[("b", 0)] is first[("b", 0)]
    assert second[("a", 1)] is not first[("a", 1)]  # lagging: evaluated every cycle

    collector.now += 10
    ends[("a", 0)] = 12  # records arrive: lag 2
    mirror.move((CONNECTOR, "src", "b", 0), 3, 2_000)  # N went back: REWIND
    ends[("b", 1)] = 4
    mirror.move((CONNECTOR, "src", "b", 1), 3, 2_000)  # a new partition, caught up
    third = rows(collector)
    assert third[("a", 0)].lag_records == 2
    assert third[("b", 0)].status is Status.REWIND
    assert third[("b", 1)].last_replicated == 3
    assert list(third) == sorted(third)  # the snapshot's order

    collector.now += 10
    mirror.remove((CONNECTOR, "src", "a", 1))  # tombstone: no longer replicated
    fourth = rows(collector)
    assert ("a", 1) not in fourth
    assert ("c", CONNECTOR, "a", 1) not in collector.windows  # its window is pruned

    # The same state from nothing gives the same numbers.
    fresh = MemoryCollector(ends, mirror, tmp_path / "fresh.json")
    fresh.now = collector.now
    assert {tp: facts(r) for tp, r in rows(fresh).items()} == {
        tp: facts(r) for tp, r in fourth.items()
    }


def test_an_unchanged_estate_asks_one_listoffsets_per_cycle(tmp_path: Path) -> None:
    ends = {("t", p): 5 for p in range(50)}
    mirror = MirrorOffsets()
    for topic, partition in ends:
        mirror.move((CONNECTOR, "src", topic, partition), 4, 1_000)
    collector = MemoryCollector(ends, mirror, tmp_path / "w.json")
    first = rows(collector)
    admin = collector._admins["s:1"]
    calls = admin.calls
    collector.now += 10
    second = rows(collector)
    assert admin.calls == calls + 1  # the log ends; nothing lags: no second call
    assert all(second[tp] is first[tp] for tp in first)
    assert all(r.status is Status.OK and r.lag_records == 0 for r in second.values())


def test_transaction_markers_are_not_lag(tmp_path: Path) -> None:
    """A committed transaction ends with a marker that is never replicated: LEO = N + 2 on an
    idle transactional partition is caught up, and markers before the first unreplicated record
    are not counted."""
    ends = {("t", 0): 11, ("p", 0): 11}
    mirror = MirrorOffsets()
    mirror.move((CONNECTOR, "src", "t", 0), 9, 1_000)  # 10 is a commit marker
    mirror.move((CONNECTOR, "src", "p", 0), 9, 1_000)  # plain topic: 10 is a record
    collector = MemoryCollector(ends, mirror, tmp_path / "w.json")
    collector.fetcher.markers = {("t", 0): {10, 13}}
    collector.fetcher.ends = ends
    first = rows(collector)
    assert (first[("t", 0)].lag_records, first[("t", 0)].lag_seconds) == (0, 0.0)
    assert first[("t", 0)].status is Status.OK
    assert first[("p", 0)].lag_records == 1

    # Unchanged end: the answer is cached. A new transaction (11, 12, marker 13) moves the end,
    # so the cached "nothing visible" no longer holds: 11 is the first record to replicate.
    collector.now += 10
    calls = collector.fetcher.calls
    assert rows(collector)[("t", 0)].lag_records == 0
    assert collector.fetcher.calls == calls
    collector.now += 10
    ends[("t", 0)] = 14
    row = rows(collector)[("t", 0)]
    assert row.lag_records == 3  # 11, 12 (and the marker at 13, which no read shows)
    assert row.lag_seconds is not None
    assert row.lag_seconds > 0

    # MM2 replicated 11 and 12: N = 12, end 14 (marker at 13) -> caught up again.
    collector.now += 10
    mirror.move((CONNECTOR, "src", "t", 0), 12, 3_000)
    assert rows(collector)[("t", 0)].lag_records == 0


def test_a_read_only_collector_uses_the_windows_but_never_writes_them(tmp_path: Path) -> None:
    """`offsetd lag` (one shot) next to a daemon: the daemon's windows, left as they were."""
    ends = {("a", 0): 10}
    mirror = MirrorOffsets()
    mirror.move((CONNECTOR, "src", "a", 0), 6, 1_000)
    state = tmp_path / "w.json"
    daemon = MemoryCollector(ends, mirror, state)
    rows(daemon)
    daemon.close()  # persists
    before = state.read_bytes()
    once = MemoryCollector(ends, mirror, state, read_only=True)
    once.now = daemon.now + 30
    assert ("c", CONNECTOR, "a", 0) in once.windows  # it read the daemon's window
    rows(once)
    assert len(once.windows[("c", CONNECTOR, "a", 0)]) == 2  # and sampled into it
    once.close()
    assert state.read_bytes() == before


def test_a_not_started_partition_lags_from_its_log_start(tmp_path: Path) -> None:
    """MM2 never wrote an offset for ("x", 0), and retention removed all 50 of its records: it
    is caught up. When one record arrives, that is a lag of 1 that began now, not one as old
    as the window (the window's samples must hold the visible lag, not the log end)."""
    ends, starts = {("x", 0): 50}, {("x", 0): 50}
    collector = MemoryCollector(ends, MirrorOffsets(), tmp_path / "w.json", starts=starts)
    collector.fetcher.ends = ends
    flow = MirrorFlow("c", CONNECTOR, ConnectorKind.MIRROR_SOURCE, "src", "tgt", "s:1", "t:1")
    health = ConnectorHealth(
        "c", CONNECTOR, "MirrorSourceConnector", "RUNNING", ((0, "RUNNING"),), "src", "tgt"
    )
    collector._views["c"] = ConnectView([health], [flow], {CONNECTOR: {("x", 0)}})
    for _ in range(8):  # caught up for 70 s, longer than the 1 m window
        row = rows(collector)[("x", 0)]
        assert (row.last_replicated, row.lag_records, row.status) == (None, 0, Status.OK)
        collector.now += 10
    ends[("x", 0)] = 51
    row = rows(collector)[("x", 0)]
    assert (row.lag_records, row.status) == (1, Status.OK)


class StaleAdmin(MemoryAdmin):
    """A long-lived client whose metadata never learns of `unknown` partitions."""

    def __init__(self, ends: dict[TP, int], unknown: set[TP]) -> None:
        super().__init__(ends)
        self.unknown = unknown

    def list_offsets(self, request: Mapping[TopicPartition, Any], **kw: Any) -> dict[Any, Any]:
        answers = super().list_offsets(request, **kw)
        for tp in request:
            if (tp.topic, tp.partition) in self.unknown:
                answers[tp] = _Failed()
        return answers


class _Failed:
    def result(self) -> Any:
        raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "stale metadata"))


def test_a_client_failing_on_new_partitions_is_replaced_the_next_cycle(tmp_path: Path) -> None:
    ends = {("old", 0): 5, ("new", 0): 3}
    mirror = MirrorOffsets()
    mirror.move((CONNECTOR, "src", "old", 0), 4, 1_000)
    mirror.move((CONNECTOR, "src", "new", 0), 2, 1_000)
    made: list[MemoryAdmin] = []

    def factory(conf: dict[str, str]) -> MemoryAdmin:
        if conf["bootstrap.servers"] != "s:1":  # the target's (heartbeats)
            return MemoryAdmin(ends)
        # the source's first client is stale for the new topic for ever; later ones are fresh
        made.append(StaleAdmin(ends, {("new", 0)}) if not made else MemoryAdmin(ends))
        return made[-1]

    collector = MemoryCollector(ends, mirror, tmp_path / "w.json")
    collector._admin_factory = factory
    first = collector.collect()
    assert {(p.topic, p.partition) for p in first.partitions} == {("old", 0)}
    assert "list_offsets:s:1" in first.errors
    collector.now += 10
    second = collector.collect()
    assert {(p.topic, p.partition) for p in second.partitions} == {("old", 0), ("new", 0)}
    assert not second.errors
    assert len(made) == 2  # replaced once, then kept
    collector.now += 10
    collector.collect()
    assert len(made) == 2


def test_a_resumed_connector_is_given_stall_after_before_stall(tmp_path: Path) -> None:
    """N is old and the lag began long ago, but the connector has just become RUNNING again:
    STALL is counted from the resume (Settings: stall_after 1m by default, flush 1s)."""
    ends = {("t", 0): 10}
    mirror = MirrorOffsets()
    mirror.move((CONNECTOR, "src", "t", 0), 4, 1_000)  # written long before the clock's now
    collector = MemoryCollector(ends, mirror, tmp_path / "w.json")
    view = collector._views["c"]
    running = view.connectors[0]
    stopped = ConnectorHealth("c", CONNECTOR, running.connector_class, "STOPPED", (), "src", "tgt")

    def status_after(seconds: float, health: ConnectorHealth) -> Status:
        view.connectors[0] = health
        collector.now += seconds
        return rows(collector)[("t", 0)].status

    assert status_after(0, running) is Status.STALL  # running since before we looked
    assert status_after(10, stopped) is Status.STOP
    assert status_after(100, running) is Status.OK  # just resumed
    assert status_after(59, running) is Status.OK
    assert status_after(2, running) is Status.STALL  # 61 s after the resume


@pytest.mark.parametrize("fatal", [False, True])
def test_connect_refusing_our_credentials_ends_only_a_one_shot_cycle(
    monkeypatch: pytest.MonkeyPatch, fatal: bool
) -> None:
    """A running collector keeps a 401 as a stage error (the next cycle retries); a one-shot
    `offsetd lag` lets it end the cycle, so the command says it in one line with exit 61."""
    refused = ConnectAccessDenied("could not list connectors: Connect at u refused ...: 401")
    unreachable = ConnectUnavailable("Connect at u did not answer")

    async def read_connect(name: str, _cluster: Any) -> Any:
        raise refused if name == "b" else unreachable

    monkeypatch.setattr(collector_module, "read_connect", read_connect)
    settings = Settings.model_validate(
        {
            "kafka_clusters": {"k": {"bootstrap_servers": "k:9092"}},
            "connect_clusters": {
                n: {"url": f"http://{n}:8083", "kafka_cluster": "k"} for n in ("a", "b")
            },
        }
    )
    collector = Collector(settings, refusals_fatal=fatal)
    errors: dict[str, str] = {}
    if fatal:
        with pytest.raises(ConnectAccessDenied):
            collector._read_connect(errors)
        assert errors == {"connect:a": str(unreachable)}  # one that does not answer: a stage
    else:
        collector._read_connect(errors)
        assert errors == {"connect:a": str(unreachable), "connect:b": str(refused)}
