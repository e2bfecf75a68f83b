"""N per MirrorSourceConnector partition from offsets-topic records; windows on disk."""

from __future__ import annotations

import json
from pathlib import Path

from offsetd.lag.connect_state import parse_assigned
from offsetd.lag.mirror_offsets import MirrorOffsets
from offsetd.lag.status import Sample
from offsetd.lag.window_store import load_windows, save_windows

CONNECTOR = "east->west.MirrorSourceConnector"


def key(topic: str, partition: int, connector: str = CONNECTOR) -> bytes:
    part = {"cluster": "east", "partition": partition, "topic": topic}
    return json.dumps([connector, part], separators=(",", ":")).encode()


def value(n: int) -> bytes:
    return json.dumps({"offset": n}).encode()


def test_latest_n_and_when_it_last_changed() -> None:
    mirror = MirrorOffsets()
    applied = mirror.apply(
        [
            (key("orders", 0), value(4), 1_000),
            (key("orders", 0), value(9), 2_000),
            (key("orders", 0), value(9), 3_000),  # unchanged N: still changed at 2_000
            (key("orders", 1), value(0), 2_500),
            (b'["sink",{"kafka_topic":"t","kafka_partition":0}]', b'{"kafka_offset":3}', 9),
            (b'["x",{"sourceClusterAlias":"a","targetClusterAlias":"b"}]', b'{"offset":0}', 9),
            (b"not json", b"{}", 9),
            (None, b"{}", 9),
        ]
    )
    assert applied == 4
    got = mirror.of_connector(CONNECTOR)
    assert {tp: (alias, p.n, p.changed_ms) for tp, (alias, p) in got.items()} == {
        ("orders", 0): ("east", 9, 2_000),
        ("orders", 1): ("east", 0, 2_500),
    }


def test_tombstone_removes_and_malformed_values_are_counted() -> None:
    mirror = MirrorOffsets()
    mirror.apply([(key("t", 0), value(5), 1), (key("t", 0), None, 2)])
    mirror.apply([(key("t", 1), b"{oops", 3), (key("t", 1), b'{"offset":"7"}', 4)])
    assert mirror.of_connector(CONNECTOR) == {}
    assert mirror.malformed == 2


def test_task_assigned_partitions() -> None:
    assert parse_assigned("heartbeats-0,my-topic-12, a.b-3,") == {
        ("heartbeats", 0),
        ("my-topic", 12),
        ("a.b", 3),
    }
    assert parse_assigned("") == set()


def test_windows_survive_a_round_trip_and_bad_files_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "state" / "w.json"
    windows = {("local", CONNECTOR, "t", 0): [Sample(1, 5, 10), Sample(-1, 7, 20)]}
    save_windows(path, windows)
    assert load_windows(path) == windows
    path.write_text("{broken")
    assert load_windows(path) == {}
    assert load_windows(tmp_path / "missing.json") == {}


def test_drain_names_each_moved_partition_once_and_by_flow_is_live() -> None:
    mirror = MirrorOffsets()
    mirror.apply([(key("t", 0), value(1), 1), (key("t", 1), value(1), 1)])
    assert mirror.drain(CONNECTOR, "east") == {("t", 0), ("t", 1)}
    assert mirror.drain(CONNECTOR, "east") == set()
    flow = mirror.of_flow(CONNECTOR, "east")
    mirror.apply([(key("t", 0), value(1), 2)])  # unchanged N: not moved
    assert mirror.drain(CONNECTOR, "east") == set()
    mirror.apply([(key("t", 0), value(3), 3), (key("t", 1), None, 3)])
    assert mirror.drain(CONNECTOR, "east") == {("t", 0), ("t", 1)}
    assert {tp: p.n for tp, p in flow.items()} == {("t", 0): 3}  # the same dict, kept current
    assert mirror.of_flow(CONNECTOR, "west") == {}
