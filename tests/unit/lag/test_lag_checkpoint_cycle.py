"""The checkpoint cycle's wiring: which groups are read on the source, which are expected, and
what a flow that cannot be read leaves (no Kafka: the tail and the group reader are fakes)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import pytest

from offsetd.lag import checkpoint_cycle
from offsetd.lag.checkpoint_cycle import CheckpointReader, FailoverPolicy
from offsetd.lag.connect_state import MirrorFlow
from offsetd.offsets.model import ConnectorKind

NOW = 5_000_000
FLOW = MirrorFlow(
    "local", "east->west.MirrorCheckpointConnector", ConnectorKind.MIRROR_CHECKPOINT,
    "east", "west", "east:9092", "west:9092",
)  # fmt: skip
TP = tuple[str, int]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


class Message:
    def __init__(self, group: str, topic: str, partition: int, upstream: int) -> None:
        self._key = _string(group) + _string(topic) + struct.pack(">i", partition)
        self._value = struct.pack(">hqq", 0, upstream, upstream) + _string("")

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, NOW - 2_000)


class FakeTail:
    pending: ClassVar[list[Message]] = []
    fail: ClassVar[Exception | None] = None

    def __init__(self, conf: Mapping[str, str], topic: str) -> None:
        assert topic == "east.checkpoints.internal"

    def read(self, _budget: float) -> list[Message]:
        if FakeTail.fail is not None:
            raise FakeTail.fail
        out, FakeTail.pending = FakeTail.pending, []
        return out

    def close(self) -> None:
        pass


class FakeGroups:
    """Commits per group; a group list (None: listing fails); every call noted."""

    def __init__(self, commits: dict[str, dict[TP, int]], listed: set[str] | None) -> None:
        self.conf = {"bootstrap.servers": "east:9092"}
        self.commits = commits
        self.listed = listed
        self.asked: list[set[str]] = []
        self.listings = 0

    def names(self) -> tuple[set[str] | None, str | None]:
        self.listings += 1
        if self.listed is None:
            return None, "listing groups: no answer in time (a broker away?)"
        return set(self.listed), None

    def offsets(self, groups: Iterable[str]) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
        wanted = set(groups)
        self.asked.append(wanted)
        return {g: self.commits.get(g, {}) for g in wanted}, {}


@pytest.fixture(autouse=True)
def _fake_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeTail.pending, FakeTail.fail = [], None
    monkeypatch.setattr(checkpoint_cycle, "Tail", FakeTail)


def conf_of(alias: str, bootstrap: str | None) -> dict[str, str] | None:
    return {"bootstrap.servers": bootstrap or alias}


def run(
    reader: CheckpointReader,
    groups: FakeGroups,
    patterns: tuple[str, ...],
    errors: dict[str, str],
    replicated: set[str] | None = None,
) -> Any:
    return reader.cycle(
        [FLOW],
        conf_of,
        lambda _conf: groups,  # type: ignore[arg-type,return-value]
        NOW,
        errors,
        failover=FailoverPolicy(patterns, 60_000),
        replicated_of=lambda _flow: replicated,
    )


def test_expected_groups_are_read_on_the_source_with_the_checkpointed_ones() -> None:
    FakeTail.pending = [Message("audit", "east.heartbeats", 0, 10)]
    groups = FakeGroups(
        {"audit": {("heartbeats", 0): 10}, "orders-eu": {("orders", 0): 7}},
        listed={"audit", "orders-eu", "billing"},
    )
    errors: dict[str, str] = {}

    found = run(CheckpointReader(), groups, ("orders-*", "gone"), errors, {"heartbeats", "orders"})

    assert groups.asked == [{"audit", "orders-eu", "gone"}]
    assert groups.listings == 1
    rows = {r.group: r for r in found.readiness}
    assert set(rows) == {"audit", "orders-eu", "gone"}
    assert (rows["audit"].ready, rows["audit"].expected) == (True, False)
    assert (rows["orders-eu"].ready, rows["orders-eu"].uncovered) == (False, ("orders-0",))
    assert rows["gone"].partitions == 0
    assert [c.group for c in found.checkpoints] == ["audit"]
    assert errors == {}


def test_plain_names_need_no_listing_and_a_failed_listing_is_an_error_not_a_stop() -> None:
    FakeTail.pending = [Message("orders-eu", "east.orders", 0, 7)]
    plain = FakeGroups({"billing": {("orders", 0): 1}}, listed=set())
    run(CheckpointReader(), plain, ("billing",), {})
    assert plain.listings == 0

    FakeTail.pending = [Message("orders-eu", "east.orders", 0, 7)]
    unlisted = FakeGroups({"orders-eu": {("orders", 0): 7}}, listed=None)
    errors: dict[str, str] = {}
    found = run(CheckpointReader(), unlisted, ("orders-*",), errors)
    assert errors == {"group_list:east": "listing groups: no answer in time (a broker away?)"}
    # the checkpointed group still matches the glob
    assert [(r.group, r.expected, r.ready) for r in found.readiness] == [("orders-eu", True, True)]


def test_a_failed_listing_falls_back_on_the_last_one() -> None:
    reader = CheckpointReader()
    groups = FakeGroups({"orders-eu": {("orders", 0): 7}}, listed={"orders-eu"})
    run(reader, groups, ("orders-*",), {})
    groups.listed = None
    errors: dict[str, str] = {}

    found = run(reader, groups, ("orders-*",), errors)

    assert "group_list:east" in errors
    assert [(r.group, r.expected) for r in found.readiness] == [("orders-eu", True)]


def test_a_flow_that_cannot_be_read_keeps_its_expected_groups_as_not_ready() -> None:
    reader = CheckpointReader()
    groups = FakeGroups({"billing": {}}, listed={"billing"})
    run(reader, groups, ("bill*",), {})
    FakeTail.fail = RuntimeError("broker away")
    errors: dict[str, str] = {}

    found = run(reader, groups, ("bill*",), errors)

    assert errors == {"checkpoints:east->west.MirrorCheckpointConnector": "broker away"}
    [row] = found.readiness
    assert (row.group, row.expected, row.ready, row.commits_known) == (
        "billing",
        True,
        False,
        False,
    )
    assert "broker away" in row.reason


def test_no_patterns_read_only_the_checkpointed_groups() -> None:
    FakeTail.pending = [Message("audit", "east.heartbeats", 0, 10)]
    groups = FakeGroups({"audit": {("heartbeats", 0): 10}}, listed={"audit", "other"})
    found = run(CheckpointReader(), groups, (), {})
    assert groups.asked == [{"audit"}]
    assert groups.listings == 0
    assert [(r.group, r.expected) for r in found.readiness] == [("audit", False)]
