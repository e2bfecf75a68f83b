"""Applying a skip-run plan: its runs, the position check, and the quarantine copies (no Kafka:
the copier's Kafka calls are replaced by an in-memory source and quarantine partition)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from offsetd.errors import InvalidDocument
from offsetd.offsets.model import ConnectorKind, OffsetEntry, sink_partition
from offsetd.offsets.rewind_plan import (
    Mode,
    PartitionRange,
    Request,
    RewindPlan,
    build_plan,
    decide,
    summary_path,
    write_plan,
)
from offsetd.recordchecks import TIMESTAMP_CREATE_TIME, KafkaRecord
from offsetd.remediation.quarantine import QuarantineFailed
from offsetd.remediation.quarantine_format import H_SAGA_KEY, decode_copy
from offsetd.remediation.skiprun import (
    RunCopier,
    SkipRunJob,
    check_positions,
    copy_headers,
    quarantine_context,
    skip_run_job,
    skip_run_job_of_file,
)
from tests.unit.spark.test_spark_plan import scan_of

# Partition 0: a run 10..12 from the committed offset 10. Partition 1: no committed offset, and
# a compacted log (no record at offset 1): the run is the records at 0 and 2. Partition 2:
# nothing matches, unchanged.
RANGES = [
    PartitionRange("t", 0, 10, 20, committed=10),
    PartitionRange("t", 1, 0, 6, committed=None),
    PartitionRange("t", 2, 4, 9, committed=4),
]
SCANS = {
    ("t", 0): scan_of(0, list(range(10, 20)), {10, 11, 12}),
    ("t", 1): scan_of(1, [0, 2, 3, 5], {0, 2}),
    ("t", 2): scan_of(2, list(range(4, 9)), set()),
}


def _plan(mode: Mode = Mode.SKIP_RUN) -> RewindPlan:
    request = Request("orders-sink", ConnectorKind.SINK, "value.status = 'bad'", mode, "west")
    return build_plan(request, decide(mode, RANGES, SCANS))


def sink(offset: int | None, partition: int) -> OffsetEntry:
    return OffsetEntry(
        sink_partition("t", partition), None if offset is None else {"kafka_offset": offset}
    )


def test_the_runs_of_a_skip_run_plan() -> None:
    plan = _plan()
    job = skip_run_job(plan)
    assert job is not None
    assert [(r.partition, r.first, r.last, r.records, r.committed) for r in job.runs] == [
        (0, 10, 12, 3, 10),
        (1, 0, 2, 2, None),
    ]
    assert job.records == 5
    assert job.key == f"skip-run/orders-sink/{plan.summary['document_sha256'][:16]}"
    assert job.describe() == ["t-0 10..12 (3 records)", "t-1 0..2 (2 records)"]


def test_other_modes_quarantine_nothing() -> None:
    assert skip_run_job(_plan(Mode.FIRST_MATCH)) is None


def test_a_summary_that_does_not_describe_the_document_is_refused() -> None:
    plan = _plan()
    rows = [dict(p) for p in plan.summary["partitions"]]
    rows[0]["skipped_run"] = {"first": 10, "last": 11}  # ends before the new offset 13
    with pytest.raises(InvalidDocument, match=r"moves t-0 to 13, but its summary records no"):
        skip_run_job(RewindPlan(plan.connector, plan.entries, {**plan.summary, "partitions": rows}))
    rows = [dict(p) for p in plan.summary["partitions"]]
    rows[1]["skipped_run"] = None
    with pytest.raises(InvalidDocument, match="t-1"):
        skip_run_job(RewindPlan(plan.connector, plan.entries, {**plan.summary, "partitions": rows}))


def test_plan_files_are_recognised_by_their_summary(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    write_plan(_plan(), out)
    job = skip_run_job_of_file(str(out))
    assert job is not None
    assert len(job.runs) == 2
    # A first-match plan, or a document without a summary, is an ordinary offsets document.
    other = tmp_path / "other.json"
    write_plan(_plan(Mode.FIRST_MATCH), other)
    assert skip_run_job_of_file(str(other)) is None
    plain = tmp_path / "plain.json"
    plain.write_text(out.read_text())
    assert not summary_path(plain).exists()
    assert skip_run_job_of_file(str(plain)) is None
    # An edited skip-run document no longer matches its runs: refused.
    edited = json.loads(out.read_text())
    edited["orders-sink"][0]["offset"]["kafka_offset"] = 19
    out.write_text(json.dumps(edited))
    with pytest.raises(InvalidDocument, match="changed after it was computed"):
        skip_run_job_of_file(str(out))


def _job() -> SkipRunJob:
    job = skip_run_job(_plan())
    assert job is not None
    return job


def test_runs_must_still_start_where_the_connector_is() -> None:
    job = _job()
    check_positions(job, [sink(10, 0)])  # as computed (partition 1 had no offset)
    check_positions(job, [sink(10, 0), sink(0, 1)])  # someone set it to the run's first record
    with pytest.raises(InvalidDocument, match=r"t-0 is at 7 \(the plan was computed at 10"):
        check_positions(job, [sink(7, 0)])
    check_positions(job, [sink(13, 0), sink(3, 1)])  # applied already: again is harmless
    with pytest.raises(InvalidDocument, match="nothing quarantined or patched"):
        check_positions(job, [sink(15, 0)])  # delivered records after the run since


def _record(partition: int, offset: int) -> KafkaRecord:
    return KafkaRecord(
        topic="t",
        partition=partition,
        offset=offset,
        key=f"k{offset}".encode(),
        value=f'{{"p": {partition}, "o": {offset}}}'.encode(),
        headers=(("trace", b"abc"),),
        timestamp_type=TIMESTAMP_CREATE_TIME,
        timestamp_ms=1_700_000_000_000 + offset,
    )


class MemoryCopier(RunCopier):
    """The copier with an in-memory source log and quarantine partition instead of Kafka."""

    def __init__(self, source: Mapping[int, Sequence[int]], fail_after: int | None = None) -> None:
        super().__init__({}, "offsetd.quarantine", {}, chunk=2, now_ms=lambda: 42)
        self.source = {p: [_record(p, o) for o in offsets] for p, offsets in source.items()}
        self.stored: list[KafkaRecord] = []
        self.fail_after = fail_after

    def target_partition(self, key: str) -> tuple[int, int]:
        return 1, len(self.stored)

    def existing_copies(self, partition: int, end: int, key: str) -> set[tuple[str, int, int]]:
        found = set()
        for stored in self.stored[:end]:
            decoded = decode_copy(stored)
            if decoded.saga_key == key and decoded.original is not None:
                o = decoded.original
                found.add((o.topic, o.partition, o.offset))
        return found

    def read_chunk(self, topic: str, partition: int, start: int, limit: int) -> list[KafkaRecord]:
        return [r for r in self.source[partition] if r.offset >= start][:limit]

    def produce(
        self, partition: int, key: str, records: Sequence[KafkaRecord], context: Mapping[str, str]
    ) -> None:
        for record in records:
            if self.fail_after is not None and len(self.stored) >= self.fail_after:
                raise QuarantineFailed("broker said no")
            headers = tuple(
                (k, v.encode() if isinstance(v, str) else v)
                for k, v in copy_headers(record, key, context, 42)
            )
            self.stored.append(
                KafkaRecord(
                    "offsetd.quarantine",
                    partition,
                    len(self.stored),
                    record.key,
                    record.value,
                    headers,
                    TIMESTAMP_CREATE_TIME,
                    record.timestamp_ms,
                )
            )


SOURCE = {0: list(range(10, 20)), 1: [0, 2, 3, 5]}


def test_every_record_of_every_run_is_copied_in_the_skip_saga_format() -> None:
    job = _job()
    copier = MemoryCopier(SOURCE)
    result = copier.copy(job, quarantine_context(job, "local", "d1"))
    assert (result.copied, result.already, result.partition) == (5, 0, 1)
    decoded = [decode_copy(r) for r in copier.stored]
    assert [(d.original.partition, d.original.offset) for d in decoded if d.original] == [
        (0, 10),
        (0, 11),
        (0, 12),
        (1, 0),
        (1, 2),
    ]
    for d in decoded:
        source = _record(d.original.partition, d.original.offset) if d.original else None
        assert source is not None
        assert (d.stored.key, d.stored.value) == (source.key, source.value)
        assert d.stored.timestamp_ms == source.timestamp_ms
        assert d.original_headers == (("trace", b"abc"),)
        assert d.saga_key == job.key
        assert d.connector == "orders-sink"
        assert d.headers["offsetd.connect.cluster"] == "local"
        assert d.headers["offsetd.decision.id"] == "d1"
        assert d.headers["offsetd.rewind.predicate"] == "value.status = 'bad'"
        assert d.quarantined_at_ms == 42


def test_applying_again_copies_nothing_twice_and_finishes_a_partial_copy() -> None:
    job = _job()
    context = quarantine_context(job, "local")
    copier = MemoryCopier(SOURCE, fail_after=3)
    with pytest.raises(QuarantineFailed, match="broker said no"):
        copier.copy(job, context)
    assert len(copier.stored) == 3
    copier.fail_after = None
    result = copier.copy(job, context)
    assert (result.copied, result.already) == (2, 3)
    again = copier.copy(job, context)
    assert (again.copied, again.already) == (0, 5)
    originals = [decode_copy(r).original for r in copier.stored]
    assert len(originals) == len(set(originals)) == 5
    # Another plan's copies in the same partition are not mistaken for this one's.
    other = MemoryCopier(SOURCE)
    other.stored = [
        KafkaRecord(r.topic, r.partition, r.offset, r.key, r.value, _rekeyed(r.headers))
        for r in copier.stored
    ]
    assert other.copy(job, context).copied == 5


def _rekeyed(
    headers: tuple[tuple[str, bytes | None], ...],
) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((k, b"skip-run/else/0" if k == H_SAGA_KEY else v) for k, v in headers)


def test_a_run_that_cannot_be_read_whole_fails_before_anything_is_patched() -> None:
    job = _job()
    # Retention removed offset 10 since the plan: the run would be copied without its head.
    copier = MemoryCopier({0: list(range(11, 20)), 1: [0, 2, 3, 5]})
    with pytest.raises(QuarantineFailed, match=r"t-0 10..12 \(3 records\) cannot be quarantined"):
        copier.copy(job, quarantine_context(job, "local"))
    assert copier.stored == []  # found out before its first copy


def test_an_unreadable_summary_beside_a_plan_is_refused_not_ignored(tmp_path: Path) -> None:
    """Fail closed: it may be a skip-run plan's summary, and without it nothing is quarantined."""
    document = tmp_path / "plan.json"
    document.write_text("{}")
    assert skip_run_job_of_file(document) is None  # no summary: an ordinary document
    summary_path(document).write_text("{not json")
    with pytest.raises(InvalidDocument, match="cannot be read"):
        skip_run_job_of_file(document)
