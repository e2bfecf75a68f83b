"""The pure part of rewind plans: modes, skip-run's refusal, the document, the plan files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsetd.errors import InvalidDocument
from offsetd.offsets import documents
from offsetd.offsets.model import ConnectorKind
from offsetd.offsets.rewind_plan import (
    Mode,
    PartitionRange,
    PartitionScan,
    Request,
    build_plan,
    decide,
    load_plan,
    nothing_to_rewind,
    render_summary,
    summary_path,
    write_plan,
)
from offsetd.spark.errors import SkipRunRefused


def scan_of(partition: int, offsets: list[int], matching: set[int]) -> PartitionScan:
    """What the Spark aggregation returns, computed here directly from a list of records."""
    hits = [o for o in offsets if o in matching]
    misses = [o for o in offsets if o not in matching]
    return PartitionScan(
        "t",
        partition,
        scanned=len(offsets),
        matched=len(hits),
        first_offset=min(offsets, default=None),
        last_offset=max(offsets, default=None),
        first_match=min(hits, default=None),
        last_match=max(hits, default=None),
        first_miss=min(misses, default=None),
        min_timestamp=1_700_000_000_000 if offsets else None,
        max_timestamp=1_700_000_360_000 if offsets else None,
    )


RANGES = [PartitionRange("t", 0, 10, 20, committed=20), PartitionRange("t", 1, 0, 5, committed=5)]
SCANS = {
    ("t", 0): scan_of(0, list(range(10, 20)), {12, 13, 17}),
    ("t", 1): scan_of(1, list(range(5)), set()),
}


def test_first_match_and_after_last_match() -> None:
    first = decide(Mode.FIRST_MATCH, RANGES, SCANS)
    after = decide(Mode.AFTER_LAST_MATCH, RANGES, SCANS)
    assert [d.next_offset for d in first] == [12, None]
    assert [d.next_offset for d in after] == [18, None]
    assert "no record matched" in first[1].reason


def test_first_match_never_moves_a_connector_forward() -> None:
    """A connector still before its first match delivers it anyway: moving there would skip the
    records in between, never delivered. after-last-match may move forward (that is what it
    asks for) and says how much it skips."""
    ranges = [PartitionRange("t", 0, 10, 20, committed=11)]
    (first,) = decide(Mode.FIRST_MATCH, ranges, SCANS)
    assert first.next_offset is None
    assert "not delivered yet (the connector is at 11)" in first.reason
    at = [PartitionRange("t", 0, 10, 20, committed=12)]
    assert decide(Mode.FIRST_MATCH, at, SCANS)[0].next_offset is None  # already there
    (after,) = decide(Mode.AFTER_LAST_MATCH, ranges, SCANS)
    assert after.next_offset == 18
    assert "moves forward from 11: skips 7 offsets" in after.reason
    (behind,) = decide(Mode.AFTER_LAST_MATCH, RANGES[:1], SCANS)
    assert "moves forward" not in behind.reason


def test_empty_range_is_unchanged_without_a_scan_row() -> None:
    ranges = [PartitionRange("t", 3, 7, 7)]
    (decision,) = decide(Mode.FIRST_MATCH, ranges, {})
    assert decision.next_offset is None
    assert decision.scan.scanned == 0
    assert "nothing to scan" in decision.reason


def test_skip_run_skips_one_run_from_the_committed_offset() -> None:
    scans = {("t", 0): scan_of(0, list(range(10, 20)), {10, 11, 12})}
    (decision,) = decide(Mode.SKIP_RUN, RANGES[:1], scans)
    assert decision.next_offset == 13
    assert decision.run == (10, 12)


def test_skip_run_accepts_gaps_in_offsets_inside_the_run() -> None:
    # A compacted topic has no records at some offsets: the run is still contiguous in records.
    offsets = [10, 11, 14, 15, 16]
    scans = {("t", 0): scan_of(0, offsets, {10, 11, 14})}
    (decision,) = decide(Mode.SKIP_RUN, RANGES[:1], scans)
    assert decision.next_offset == 15


def test_skip_run_refuses_a_run_that_does_not_start_at_the_committed_offset() -> None:
    scans = {("t", 0): scan_of(0, list(range(10, 20)), {11, 12})}
    with pytest.raises(SkipRunRefused, match=r"t-0: the record at the committed position \(10\)"):
        decide(Mode.SKIP_RUN, RANGES[:1], scans)


def test_skip_run_refuses_non_contiguous_matches_naming_the_hole() -> None:
    scans = {
        ("t", 0): scan_of(0, list(range(10, 20)), {10, 11, 13}),
        ("t", 1): scan_of(1, list(range(5)), {0, 1}),
    }
    with pytest.raises(SkipRunRefused) as info:
        decide(Mode.SKIP_RUN, RANGES, scans)
    message = str(info.value)
    assert "t-0: matches 10..13 are not contiguous: offset 12 does not match" in message
    assert "t-1" not in message
    assert "filter transform or a republish" in message


def _request(kind: ConnectorKind, mode: Mode = Mode.FIRST_MATCH) -> Request:
    return Request("c", kind, "value.x > 1", mode, "west (127.0.0.1:9092)", source_alias="east")


def test_sink_document_holds_next_offsets_of_changed_partitions_only() -> None:
    plan = build_plan(_request(ConnectorKind.SINK), decide(Mode.FIRST_MATCH, RANGES, SCANS), 2.0)
    assert plan.document == {
        "c": [
            {
                "partition": {"kafka_topic": "t", "kafka_partition": 0},
                "offset": {"kafka_offset": 12},
            }
        ]
    }
    totals = plan.summary["totals"]
    assert (totals["scanned"], totals["matched"], totals["changed"], totals["unchanged"]) == (
        15,
        3,
        1,
        1,
    )
    assert totals["records_per_s"] == 8  # 15 records in 2 s, rounded
    assert [p["status"] for p in plan.summary["partitions"]] == ["changed", "unchanged"]


def test_mirror_source_document_uses_last_replicated_and_null_for_the_start() -> None:
    # committed is the next offset (MM2's stored offset + 1), as `resolve` computes it
    ranges = [
        PartitionRange("t", 0, 0, 20),
        PartitionRange("t", 1, 0, 5, committed=4),
        PartitionRange("t", 2, 0, 5),
    ]
    scans = {
        ("t", 0): scan_of(0, list(range(20)), {7}),
        ("t", 1): scan_of(1, list(range(5)), {0}),
        ("t", 2): scan_of(2, list(range(5)), {0}),
    }
    plan = build_plan(
        _request(ConnectorKind.MIRROR_SOURCE), decide(Mode.FIRST_MATCH, ranges, scans)
    )
    partition = {"cluster": "east", "partition": 0, "topic": "t"}
    assert plan.document["c"][0] == {"partition": partition, "offset": {"offset": 6}}
    # "read offset 0 next" has no last-replicated offset: null, and MM2 starts at the log start.
    assert plan.document["c"][1]["partition"]["partition"] == 1
    assert plan.document["c"][1]["offset"] is None
    # Partition 2 has no offset at all: it starts at the log start already, and a null for it
    # would remove nothing. It is unchanged, and not in the document.
    assert len(plan.document["c"]) == 2
    row = plan.summary["partitions"][2]
    assert (row["status"], row["next_offset"]) == ("unchanged", None)
    assert "no offset there and starts at the log start: unchanged" in row["reason"]
    assert (plan.summary["totals"]["changed"], plan.summary["totals"]["unchanged"]) == (2, 1)
    documents.validate_entries("c", ConnectorKind.MIRROR_SOURCE, plan.document["c"])


def test_a_target_at_the_committed_offset_is_unchanged() -> None:
    """after-last-match just past the last match, which is where the sink already is."""
    ranges = [PartitionRange("t", 0, 0, 20, committed=18), PartitionRange("t", 1, 0, 20, 20)]
    scans = {
        ("t", 0): scan_of(0, list(range(20)), {15, 16, 17}),
        ("t", 1): scan_of(1, list(range(20)), {3, 4}),
    }
    decisions = decide(Mode.AFTER_LAST_MATCH, ranges, scans)
    assert [d.next_offset for d in decisions] == [None, 5]
    assert not decisions[0].changed
    assert decisions[0].reason == ("last match at 17; the connector is already at 18: unchanged")
    plan = build_plan(_request(ConnectorKind.SINK, Mode.AFTER_LAST_MATCH), decisions)
    assert plan.document == {
        "c": [
            {
                "partition": {"kafka_topic": "t", "kafka_partition": 1},
                "offset": {"kafka_offset": 5},
            }
        ]
    }
    totals = plan.summary["totals"]
    assert (totals["changed"], totals["unchanged"]) == (1, 1)
    assert [p["status"] for p in plan.summary["partitions"]] == ["unchanged", "changed"]
    assert "1 partition changes, 1 unchanged" in render_summary(plan.summary)


def test_mirror_source_target_at_its_stored_offset_plus_one_is_unchanged() -> None:
    """MM2 stores the last replicated offset 17 (committed next = 18): a target of 18 is no
    change, a target of 17 is (stored 16)."""
    ranges = [PartitionRange("t", 0, 0, 20, committed=18), PartitionRange("t", 1, 0, 20, 18)]
    scans = {
        ("t", 0): scan_of(0, list(range(20)), {17}),
        ("t", 1): scan_of(1, list(range(20)), {16}),
    }
    plan = build_plan(
        _request(ConnectorKind.MIRROR_SOURCE, Mode.AFTER_LAST_MATCH),
        decide(Mode.AFTER_LAST_MATCH, ranges, scans),
    )
    assert plan.document == {
        "c": [
            {
                "partition": {"cluster": "east", "partition": 1, "topic": "t"},
                "offset": {"offset": 16},
            }
        ]
    }
    assert [p["status"] for p in plan.summary["partitions"]] == ["unchanged", "changed"]


def test_nothing_to_rewind_says_whether_anything_matched() -> None:
    none_matched = build_plan(
        _request(ConnectorKind.SINK), decide(Mode.FIRST_MATCH, RANGES[1:], SCANS)
    )
    text = nothing_to_rewind(none_matched, "value.x > 1", 1)
    assert text == (
        "no record matched 'value.x > 1' in 5 records of 1 partitions of c: nothing to rewind, "
        "no plan written"
    )
    at_targets = build_plan(
        _request(ConnectorKind.SINK, Mode.AFTER_LAST_MATCH),
        decide(Mode.AFTER_LAST_MATCH, [PartitionRange("t", 0, 10, 20, 18)], SCANS),
    )
    assert at_targets.entries == []
    text = nothing_to_rewind(at_targets, "value.x > 1", 1)
    assert text.startswith(
        "3 records matched 'value.x > 1' in 10 records of 1 partitions of c, but no partition "
        "would change: nothing to rewind, no plan written"
    )
    assert "t-0: last match at 17; the connector is already at 18: unchanged" in text


def test_plan_files_round_trip_and_are_import_documents(tmp_path: Path) -> None:
    plan = build_plan(_request(ConnectorKind.SINK), decide(Mode.FIRST_MATCH, RANGES, SCANS))
    out = tmp_path / "plan.json"
    side = write_plan(plan, out)
    assert side == summary_path(out) == tmp_path / "plan.summary.json"
    # `offsetd offsets import` reads the plan as any other document.
    assert documents.parse_document(out.read_text()) == plan.document
    loaded = load_plan(out)
    assert loaded.entries == plan.entries
    assert loaded.summary["predicate"] == "value.x > 1"
    assert "password" not in side.read_text().lower()


def test_load_plan_refuses_an_edited_document(tmp_path: Path) -> None:
    plan = build_plan(_request(ConnectorKind.SINK), decide(Mode.FIRST_MATCH, RANGES, SCANS))
    out = tmp_path / "plan.json"
    write_plan(plan, out)
    edited = plan.document
    edited["c"][0]["offset"]["kafka_offset"] = 0
    out.write_text(json.dumps(edited))
    with pytest.raises(InvalidDocument, match="changed after it was computed"):
        load_plan(out)


def test_load_plan_needs_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    out.write_text('{"c": []}')
    with pytest.raises(InvalidDocument, match=r"plan.summary.json is missing"):
        load_plan(out)


def test_render_summary_lists_every_partition() -> None:
    plan = build_plan(_request(ConnectorKind.SINK), decide(Mode.FIRST_MATCH, RANGES, SCANS))
    text = render_summary(plan.summary)
    assert "1 partition changes, 1 unchanged" in text
    assert "t-0" in text
    assert "t-1" in text
    assert "first match at 12" in text
