"""offsetd.offsets.targets: timestamps, and targets resolved into offsets (pure arithmetic)."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.errors import InvalidDocument, TargetOutOfRange
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    PartitionMap,
    mirror_partition,
    sink_partition,
)
from offsetd.offsets.targets import (
    Positions,
    Target,
    TargetKind,
    TopicPartitionKey,
    parse_timestamp,
    partition_map_for,
    resolve,
    tp_of,
)

SINK = ConnectorKind.SINK
MS = ConnectorKind.MIRROR_SOURCE

# -- parse_timestamp ------------------------------------------------------------------------------


def test_epoch_milliseconds() -> None:
    assert parse_timestamp("0") == 0
    assert parse_timestamp("1700000000123") == 1_700_000_000_123


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T00:00:00Z", 1_704_067_200_000),
        ("2024-01-01T00:00:00.123Z", 1_704_067_200_123),
        ("2024-01-01T00:00:00+00:00", 1_704_067_200_000),
        ("2024-01-01T01:00:00+01:00", 1_704_067_200_000),
        ("2023-12-31T19:00:00-05:00", 1_704_067_200_000),
        ("2024-01-01T05:30:00.500+05:30", 1_704_067_200_500),
        ("2024-01-01 00:00:00Z", 1_704_067_200_000),
    ],
)
def test_iso_8601_with_zone(text: str, expected: int) -> None:
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize("text", ["2024-01-01T00:00:00", "2024-01-01", "2024-01-01T12:30"])
def test_naive_time_is_refused(text: str) -> None:
    with pytest.raises(InvalidDocument, match="no time zone"):
        parse_timestamp(text)


@pytest.mark.parametrize("text", ["yesterday", "", "-5", "12ab", "2024-13-01T00:00:00Z", "1.5"])
def test_unparsable_timestamp(text: str) -> None:
    with pytest.raises(InvalidDocument, match="neither epoch ms nor ISO 8601"):
        parse_timestamp(text)


def test_superscript_digit_is_invalid_document() -> None:
    with pytest.raises(InvalidDocument):
        parse_timestamp("²")


@given(st.integers(min_value=0, max_value=4_102_444_800_000_000))
def test_iso_round_trip_to_the_millisecond(micros: int) -> None:
    when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    assert parse_timestamp(when.isoformat().replace("+00:00", "Z")) == micros // 1000
    assert parse_timestamp(str(micros // 1000)) == micros // 1000


def test_target_describe() -> None:
    assert "2024-01-01T00:00:00" in Target(TargetKind.TIMESTAMP, 1_704_067_200_000).describe()
    assert Target(TargetKind.SHIFT, shift=-5).describe() == "a shift by -5"
    assert Target(TargetKind.EARLIEST).describe() == "the earliest record"


# -- resolve --------------------------------------------------------------------------------------

TP: TopicPartitionKey = ("orders", 0)


def sink_entry(offset: int) -> OffsetEntry:
    return OffsetEntry(sink_partition(*TP), {"kafka_offset": offset})


def ms_entry(offset: int) -> OffsetEntry:
    return OffsetEntry(mirror_partition("east", *TP), {"offset": offset})


def one(
    kind: ConnectorKind,
    target: Target,
    current: list[OffsetEntry],
    pos: Positions,
    partition: PartitionMap | None = None,
) -> OffsetEntry:
    if partition is None:
        partition = sink_partition(*TP) if kind is SINK else mirror_partition("east", *TP)
    result = resolve(kind, target, current, [(partition, TP)], {TP: pos})
    assert len(result) == 1
    assert result[0].partition == partition
    return result[0]


@pytest.mark.parametrize(
    ("target", "pos", "sink_next"),
    [
        (Target(TargetKind.EARLIEST), Positions(10, 100), 10),
        (Target(TargetKind.LATEST), Positions(10, 100), 100),
        (Target(TargetKind.TIMESTAMP, 5), Positions(10, 100, 42), 42),
        # no record at or after the time: the end of the partition
        (Target(TargetKind.TIMESTAMP, 5), Positions(10, 100, None), 100),
        (Target(TargetKind.TIMESTAMP, 5), Positions(10, 100, -1), 100),
        (Target(TargetKind.SHIFT, shift=-20), Positions(10, 100), 30),
        (Target(TargetKind.SHIFT, shift=+50), Positions(10, 100), 100),
        (Target(TargetKind.SHIFT, shift=-40), Positions(10, 100), 10),
        (Target(TargetKind.SHIFT, shift=0), Positions(10, 100), 50),
    ],
)
def test_resolve_sink_and_mirror_source(target: Target, pos: Positions, sink_next: int) -> None:
    # Committed position 50 for both: sink kafka_offset 50, MM2 stored offset 49 (next 50).
    sink = one(SINK, target, [sink_entry(50)], pos)
    assert sink.offset == {"kafka_offset": sink_next}
    mm2 = one(MS, target, [ms_entry(49)], pos)
    assert mm2.offset == {"offset": sink_next - 1}


@pytest.mark.parametrize(
    ("target", "pos"),
    [
        (Target(TargetKind.EARLIEST), Positions(0, 100)),
        (Target(TargetKind.LATEST), Positions(0, 0)),
        (Target(TargetKind.TIMESTAMP, 5), Positions(0, 100, 0)),
        (Target(TargetKind.SHIFT, shift=-50), Positions(0, 100)),
    ],
)
def test_mirror_source_next_zero_is_null(target: Target, pos: Positions) -> None:
    assert one(MS, target, [ms_entry(49)], pos).offset is None
    # the sink equivalent is an explicit 0
    assert one(SINK, target, [sink_entry(50)], pos).offset == {"kafka_offset": 0}


def test_resolve_without_current_entry_for_absolute_targets() -> None:
    assert one(SINK, Target(TargetKind.EARLIEST), [], Positions(7, 9)).offset == {"kafka_offset": 7}
    assert one(MS, Target(TargetKind.LATEST), [], Positions(7, 9)).offset == {"offset": 8}


def test_resolve_matches_current_entry_regardless_of_key_order() -> None:
    current = [OffsetEntry({"topic": "orders", "partition": 0, "cluster": "east"}, {"offset": 9})]
    moved = one(MS, Target(TargetKind.SHIFT, shift=5), current, Positions(0, 100))
    assert moved.offset == {"offset": 14}


@pytest.mark.parametrize("kind", [SINK, MS])
@pytest.mark.parametrize(
    ("shift", "words"),
    [(-41, "gives 9, outside its log [10, 100]"), (51, "gives 101, outside its log [10, 100]")],
)
def test_shift_out_of_range_names_the_partition(
    kind: ConnectorKind, shift: int, words: str
) -> None:
    current = [sink_entry(50) if kind is SINK else ms_entry(49)]
    with pytest.raises(TargetOutOfRange) as info:
        one(kind, Target(TargetKind.SHIFT, shift=shift), current, Positions(10, 100))
    assert "orders-0" in str(info.value)
    assert words in str(info.value)


@pytest.mark.parametrize("kind", [SINK, MS])
def test_shift_without_committed_position(kind: ConnectorKind) -> None:
    with pytest.raises(TargetOutOfRange, match="orders-0 has no committed position"):
        one(kind, Target(TargetKind.SHIFT, shift=1), [], Positions(0, 100))


def test_resolve_many_partitions_reports_the_bad_one() -> None:
    parts = [(sink_partition("orders", p), ("orders", p)) for p in range(3)]
    current = [OffsetEntry(sink_partition("orders", p), {"kafka_offset": 5}) for p in range(3)]
    positions = {("orders", 0): Positions(0, 10), ("orders", 1): Positions(0, 10)}
    positions[("orders", 2)] = Positions(0, 6)
    with pytest.raises(TargetOutOfRange, match="orders-2"):
        resolve(SINK, Target(TargetKind.SHIFT, shift=3), current, parts, positions)
    ok = resolve(SINK, Target(TargetKind.SHIFT, shift=1), current, parts, positions)
    assert [x.offset for x in ok] == [{"kafka_offset": 6}] * 3


@settings(deadline=None)  # 0.1 ms an example; 256 ms under a loaded suite (DeadlineExceeded)
@given(
    start=st.integers(0, 1000),
    length=st.integers(0, 1000),
    committed=st.integers(0, 2000),
    shift=st.integers(-3000, 3000),
)
def test_shift_property(start: int, length: int, committed: int, shift: int) -> None:
    end = start + length
    pos = Positions(start, end)
    target = Target(TargetKind.SHIFT, shift=shift)
    wanted = committed + shift
    # MM2 with next offset 0 has no stored offset at all: nothing to shift from.
    mm2_current = [ms_entry(committed - 1)] if committed else []
    if start <= wanted <= end:
        assert one(SINK, target, [sink_entry(committed)], pos).offset == {"kafka_offset": wanted}
        if committed:
            mm2 = one(MS, target, mm2_current, pos)
            assert mm2.offset == (None if wanted == 0 else {"offset": wanted - 1})
    else:
        with pytest.raises(TargetOutOfRange):
            one(SINK, target, [sink_entry(committed)], pos)
    if not committed or not start <= wanted <= end:
        with pytest.raises(TargetOutOfRange):
            one(MS, target, mm2_current, pos)


def test_partition_maps_and_tps() -> None:
    assert partition_map_for(SINK, ("t", 2), "east") == {"kafka_topic": "t", "kafka_partition": 2}
    assert partition_map_for(MS, ("t", 2), "east") == {
        "cluster": "east",
        "partition": 2,
        "topic": "t",
    }
    assert tp_of(MS, partition_map_for(MS, ("t", 2), "east")) == ("t", 2)
    assert tp_of(SINK, partition_map_for(SINK, ("t", 2), "x")) == ("t", 2)
