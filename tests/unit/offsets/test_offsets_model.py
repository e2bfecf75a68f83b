"""offsetd.offsets.model: next-offset arithmetic, PATCH semantics, diffs, connector kinds."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsetd.offsets.model import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
    Change,
    ConnectorKind,
    OffsetEntry,
    PartitionMap,
    apply_patch,
    connector_kind,
    diff,
    entries_from_json,
    mirror_partition,
    next_offset_of,
    offset_for_next,
    partition_key,
    sink_partition,
    topic_partition_of,
)

OFFSETS = st.integers(min_value=0, max_value=2**63 - 2)


def sink(topic: str, partition: int, offset: int | None) -> OffsetEntry:
    return OffsetEntry(
        sink_partition(topic, partition), None if offset is None else {"kafka_offset": offset}
    )


# -- offset_for_next / next_offset_of -----------------------------------------------------------


def test_sink_offset_is_the_next_offset() -> None:
    assert offset_for_next(ConnectorKind.SINK, 42) == {"kafka_offset": 42}
    assert offset_for_next(ConnectorKind.SINK, 0) == {"kafka_offset": 0}
    assert next_offset_of(ConnectorKind.SINK, {"kafka_offset": 42}) == 42


def test_mirror_source_stores_the_last_replicated_offset() -> None:
    # MM2 seeks to stored + 1, so "read 100 next" is stored as 99.
    assert offset_for_next(ConnectorKind.MIRROR_SOURCE, 100) == {"offset": 99}
    assert offset_for_next(ConnectorKind.MIRROR_SOURCE, 1) == {"offset": 0}
    assert next_offset_of(ConnectorKind.MIRROR_SOURCE, {"offset": 99}) == 100


def test_mirror_source_next_zero_is_no_offset() -> None:
    assert offset_for_next(ConnectorKind.MIRROR_SOURCE, 0) is None


def test_no_offset_means_no_position() -> None:
    assert next_offset_of(ConnectorKind.SINK, None) is None
    assert next_offset_of(ConnectorKind.MIRROR_SOURCE, None) is None


def test_numeric_strings_are_read_as_numbers() -> None:
    assert next_offset_of(ConnectorKind.SINK, {"kafka_offset": "7"}) == 7
    assert next_offset_of(ConnectorKind.MIRROR_SOURCE, {"offset": "7"}) == 8


@pytest.mark.parametrize("kind", [ConnectorKind.SINK, ConnectorKind.MIRROR_SOURCE])
def test_negative_next_offset_is_refused(kind: ConnectorKind) -> None:
    with pytest.raises(ValueError, match="negative"):
        offset_for_next(kind, -1)


@pytest.mark.parametrize(
    "kind",
    [ConnectorKind.MIRROR_CHECKPOINT, ConnectorKind.MIRROR_HEARTBEAT, ConnectorKind.SOURCE],
)
def test_kinds_without_a_kafka_position_are_refused(kind: ConnectorKind) -> None:
    with pytest.raises(ValueError, match="no Kafka position"):
        offset_for_next(kind, 5)
    with pytest.raises(ValueError, match="no Kafka position"):
        next_offset_of(kind, {"offset": 0})
    with pytest.raises(ValueError, match="not Kafka partitions"):
        topic_partition_of(kind, {"topic": "t", "partition": 0})


@given(OFFSETS)
def test_sink_round_trip(n: int) -> None:
    assert next_offset_of(ConnectorKind.SINK, offset_for_next(ConnectorKind.SINK, n)) == n


@given(OFFSETS.filter(lambda n: n > 0))
def test_mirror_source_round_trip(n: int) -> None:
    stored = offset_for_next(ConnectorKind.MIRROR_SOURCE, n)
    assert stored == {"offset": n - 1}
    assert next_offset_of(ConnectorKind.MIRROR_SOURCE, stored) == n


@given(OFFSETS)
def test_mirror_source_round_trip_from_stored(stored: int) -> None:
    n = next_offset_of(ConnectorKind.MIRROR_SOURCE, {"offset": stored})
    assert n == stored + 1
    assert offset_for_next(ConnectorKind.MIRROR_SOURCE, n) == {"offset": stored}


def test_topic_partition_of() -> None:
    assert topic_partition_of(ConnectorKind.SINK, sink_partition("orders", 3)) == ("orders", 3)
    assert topic_partition_of(
        ConnectorKind.MIRROR_SOURCE, mirror_partition("east", "orders", 4)
    ) == ("orders", 4)
    assert mirror_partition("east", "orders", 4) == {
        "cluster": "east",
        "partition": 4,
        "topic": "orders",
    }


# -- partition identity, apply_patch ----------------------------------------------------------


def test_partition_key_ignores_key_order() -> None:
    a: PartitionMap = {"cluster": "east", "partition": 0, "topic": "t"}
    b: PartitionMap = {"topic": "t", "cluster": "east", "partition": 0}
    assert partition_key(a) == partition_key(b)
    assert partition_key(a) != partition_key({**a, "partition": 1})


def test_apply_patch_overwrites_listed_and_keeps_unlisted() -> None:
    current = [sink("t", 0, 10), sink("t", 1, 20), sink("t", 2, 30)]
    patch = [sink("t", 1, 5), sink("u", 0, 1)]
    result = {e.key: e.offset for e in apply_patch(current, patch)}
    assert result == {
        sink("t", 0, 0).key: {"kafka_offset": 10},
        sink("t", 1, 0).key: {"kafka_offset": 5},
        sink("t", 2, 0).key: {"kafka_offset": 30},
        sink("u", 0, 0).key: {"kafka_offset": 1},
    }


def test_apply_patch_null_removes_and_absent_null_is_a_no_op() -> None:
    current = [sink("t", 0, 10), sink("t", 1, 20)]
    result = apply_patch(current, [sink("t", 0, None), sink("t", 9, None)])
    assert [(e.partition, e.offset) for e in result] == [
        ({"kafka_topic": "t", "kafka_partition": 1}, {"kafka_offset": 20})
    ]


def test_apply_patch_matches_partitions_regardless_of_key_order() -> None:
    current = [OffsetEntry({"cluster": "e", "partition": 0, "topic": "t"}, {"offset": 5})]
    patch = [OffsetEntry({"topic": "t", "partition": 0, "cluster": "e"}, {"offset": 9})]
    result = apply_patch(current, patch)
    assert len(result) == 1
    assert result[0].offset == {"offset": 9}
    removed = apply_patch(
        current, [OffsetEntry({"topic": "t", "cluster": "e", "partition": 0}, None)]
    )
    assert removed == []


def test_apply_patch_does_not_modify_its_input() -> None:
    current = [sink("t", 0, 10)]
    apply_patch(current, [sink("t", 0, None)])
    assert current == [sink("t", 0, 10)]


@given(
    st.dictionaries(st.integers(0, 20), st.integers(0, 1000)),
    st.dictionaries(st.integers(0, 20), st.none() | st.integers(0, 1000)),
)
def test_apply_patch_model(current_map: dict[int, int], patch_map: dict[int, int | None]) -> None:
    current = [sink("t", p, o) for p, o in current_map.items()]
    patch = [sink("t", p, o) for p, o in patch_map.items()]
    expected = dict(current_map)
    for p, o in patch_map.items():
        if o is None:
            expected.pop(p, None)
        else:
            expected[p] = o
    got = {e.partition["kafka_partition"]: e.offset for e in apply_patch(current, patch)}
    assert got == {p: {"kafka_offset": o} for p, o in expected.items()}


# -- diff ----------------------------------------------------------------------------------------


def test_diff_classifies_every_partition() -> None:
    before = [sink("t", 0, 1), sink("t", 1, 2), sink("t", 2, 3)]
    after = [sink("t", 0, 1), sink("t", 1, 5), sink("t", 3, 7)]
    lines = {line.partition["kafka_partition"]: line for line in diff(before, after)}
    assert {p: line.change for p, line in lines.items()} == {
        0: Change.UNCHANGED,
        1: Change.CHANGED,
        2: Change.REMOVED,
        3: Change.ADDED,
    }
    assert (lines[1].before, lines[1].after) == ({"kafka_offset": 2}, {"kafka_offset": 5})
    assert (lines[2].before, lines[2].after) == ({"kafka_offset": 3}, None)
    assert (lines[3].before, lines[3].after) == (None, {"kafka_offset": 7})
    assert lines[1].as_json()["change"] == "changed"


def test_diff_is_order_independent_and_stable() -> None:
    before = [sink("t", 1, 2), sink("t", 0, 1)]
    after = [sink("t", 0, 1), sink("t", 1, 2)]
    lines = diff(before, after)
    assert [line.change for line in lines] == [Change.UNCHANGED, Change.UNCHANGED]
    assert lines == diff(list(reversed(before)), list(reversed(after)))


def test_diff_of_identical_images_is_all_unchanged_and_empty_images_empty() -> None:
    image = [sink("t", p, p * 10) for p in range(4)]
    assert {line.change for line in diff(image, image)} == {Change.UNCHANGED}
    assert diff([], []) == []


def test_entries_from_json() -> None:
    entries = entries_from_json(
        [
            {
                "partition": {"kafka_topic": "t", "kafka_partition": 0},
                "offset": {"kafka_offset": 3},
            },
            {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": None},
        ]
    )
    assert entries == [sink("t", 0, 3), sink("t", 1, None)]
    assert entries[0].as_json() == {
        "partition": {"kafka_topic": "t", "kafka_partition": 0},
        "offset": {"kafka_offset": 3},
    }


# -- connector_kind ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connector_class", "expected"),
    [
        (MIRROR_SOURCE_CLASS, ConnectorKind.MIRROR_SOURCE),
        (MIRROR_CHECKPOINT_CLASS, ConnectorKind.MIRROR_CHECKPOINT),
        (MIRROR_HEARTBEAT_CLASS, ConnectorKind.MIRROR_HEARTBEAT),
        ("MirrorSourceConnector", ConnectorKind.MIRROR_SOURCE),
        ("MirrorCheckpointConnector", ConnectorKind.MIRROR_CHECKPOINT),
        ("MirrorHeartbeatConnector", ConnectorKind.MIRROR_HEARTBEAT),
    ],
)
@pytest.mark.parametrize("connector_type", ["source", "unknown", "sink"])
def test_connector_kind_mirror_by_class(
    connector_class: str, expected: ConnectorKind, connector_type: str
) -> None:
    assert connector_kind(connector_class, connector_type) is expected
    assert expected.is_mirror


@pytest.mark.parametrize(
    ("connector_class", "connector_type", "expected"),
    [
        ("io.confluent.connect.jdbc.JdbcSinkConnector", "sink", ConnectorKind.SINK),
        ("FileStreamSink", "sink", ConnectorKind.SINK),
        ("org.apache.kafka.connect.file.FileStreamSourceConnector", "source", ConnectorKind.SOURCE),
        ("", "unknown", ConnectorKind.SOURCE),
        # Not MM2: only the exact class (or its simple name) counts.
        ("com.example.MyMirrorSourceConnector", "source", ConnectorKind.SOURCE),
        ("org.example.MirrorSourceConnector", "source", ConnectorKind.SOURCE),
    ],
)
def test_connector_kind_fallback(
    connector_class: str, connector_type: str, expected: ConnectorKind
) -> None:
    kind = connector_kind(connector_class, connector_type)
    assert kind is expected
    assert not kind.is_mirror
