"""The rewind action's pure parts: its target, the plan check, and what recovery does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from offsetd.config import Settings
from offsetd.engine import Decision
from offsetd.errors import InvalidDocument
from offsetd.offsets.backend import StepwiseBackend
from offsetd.offsets.change import Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry, sink_partition
from offsetd.offsets.rewind_plan import (
    PLAN_FORMAT,
    Mode,
    PartitionRange,
    PartitionScan,
    Request,
    RewindPlan,
    build_plan,
    decide,
    document_hash,
    load_plan,
    write_plan,
)
from offsetd.remediation.quarantine import QuarantineFailed
from offsetd.remediation.rewind import (
    REWIND_STEPS,
    RewindRefused,
    RewindResult,
    RewindRunner,
    RewindSpec,
    plan_entries,
    recovery_step,
    rewind_key,
    rewind_spec,
)
from offsetd.remediation.sagas import SagaRecord, SagaStore
from offsetd.remediation.skiprun import CopyResult, SkipRunJob

T = 1_795_000_000_000  # a time in epoch ms


def sink(offset: int | None, topic: str = "orders", partition: int = 0) -> OffsetEntry:
    return OffsetEntry(
        sink_partition(topic, partition), None if offset is None else {"kafka_offset": offset}
    )


# -- the target ---------------------------------------------------------------------------------


def test_a_rule_time_arrives_as_epoch_ms_and_wins_over_its_text() -> None:
    spec = rewind_spec({"to_timestamp": "2026-11-18T00:00:00Z", "to_timestamp_ms": T})
    assert spec == RewindSpec(timestamp_ms=T)
    assert "the first record at or after" in spec.describe()


def test_an_iso_time_alone_is_parsed_and_a_zoneless_one_refused() -> None:
    assert rewind_spec({"to_timestamp": "1970-01-01T00:00:01Z"}).timestamp_ms == 1000
    with pytest.raises(RewindRefused, match="no time zone"):
        rewind_spec({"to_timestamp": "2026-11-18T00:00:00"})


def test_a_plan_file_is_a_target() -> None:
    spec = rewind_spec({"plan_file": "/plans/orders.json"})
    assert spec == RewindSpec(plan_file="/plans/orders.json")
    assert spec.describe() == "the plan /plans/orders.json"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"to_timestamp_ms": T, "plan_file": "p.json"},
        {"to_timestamp_ms": True},
        {"to_timestamp_ms": -1},
        {"to_timestamp_ms": "123"},
        {"plan_file": "  "},
        {"plan_file": 7},
    ],
)
def test_anything_but_exactly_one_valid_target_is_refused(params: dict[str, object]) -> None:
    with pytest.raises(RewindRefused):
        rewind_spec(params)


def test_refusals_have_their_own_exit_code() -> None:
    assert RewindRefused.exit_code == 55


# -- plans --------------------------------------------------------------------------------------


def test_a_plan_applies_only_to_its_own_connector_and_kind() -> None:
    entries = [sink(5)]
    assert plan_entries("orders-sink", "sink", entries, "orders-sink", ConnectorKind.SINK, "p") == (
        entries
    )
    with pytest.raises(RewindRefused, match="rewind plan of billing-sink, not of orders-sink"):
        plan_entries("billing-sink", "sink", entries, "orders-sink", ConnectorKind.SINK, "p")
    with pytest.raises(RewindRefused, match="computed for a mirror-source connector"):
        plan_entries(
            "orders-sink", "mirror-source", entries, "orders-sink", ConnectorKind.SINK, "p"
        )
    with pytest.raises(RewindRefused, match="changes no partition"):
        plan_entries("orders-sink", "sink", [], "orders-sink", ConnectorKind.SINK, "p")


def _write_plan(folder: Path, connector: str, entries: list[OffsetEntry]) -> Path:
    """A plan as `offsetd rewind plan` writes it (document + summary with its hash)."""
    bare = RewindPlan(connector, entries)
    summary = {
        "format": PLAN_FORMAT,
        "connector": connector,
        "connector_kind": "sink",
        "document_sha256": document_hash(bare.document),
    }
    out = folder / "plan.json"
    write_plan(RewindPlan(connector, entries, summary), out)
    return out


def test_a_plan_file_read_back_is_checked_against_the_connector(tmp_path: Path) -> None:
    path = _write_plan(tmp_path, "orders-sink", [sink(5), sink(9, partition=1)])
    loaded = load_plan(path)
    got = plan_entries(
        loaded.connector,
        loaded.summary.get("connector_kind"),
        loaded.entries,
        "orders-sink",
        ConnectorKind.SINK,
        str(path),
    )
    assert [(e.partition["kafka_partition"], e.offset) for e in got] == [
        (0, {"kafka_offset": 5}),
        (1, {"kafka_offset": 9}),
    ]
    with pytest.raises(RewindRefused, match="not of billing-sink"):
        plan_entries(
            loaded.connector, "sink", loaded.entries, "billing-sink", ConnectorKind.SINK, "p"
        )


# -- recovery -----------------------------------------------------------------------------------


def record(*completed: str, prior_state: str = "RUNNING") -> SagaRecord:
    return SagaRecord(
        key=rewind_key("local", "orders-sink", "d1"),
        kind="rewind",
        connect_cluster="local",
        connector="orders-sink",
        decision_id="d1",
        rule="rewind-orders",
        epoch=1,
        owner="test",
        completed=completed,
        snapshot_id="snap-1" if completed else None,
        prior_state=prior_state,
    )


BEFORE, AFTER, ELSEWHERE = (sink(10),), (sink(5),), (sink(7),)


def test_the_key_is_per_decision() -> None:
    assert rewind_key("local", "orders-sink", "d1") == "rewind/local/orders-sink/d1"
    assert REWIND_STEPS == ("snapshot", "stop", "patch", "resume")


@pytest.mark.parametrize(
    ("completed", "state", "current", "expected"),
    [
        # stopped by us, nothing written yet: put it back, nothing moved
        (("snapshot", "stop"), "STOPPED", BEFORE, ("restore", False)),
        # written (recorded or not), then killed: put it back, the rewind happened
        (("snapshot", "stop", "patch"), "STOPPED", AFTER, ("restore", True)),
        (("snapshot", "stop"), "STOPPED", AFTER, ("restore", True)),
        # someone else moved the offsets meanwhile, or they cannot be read: a person decides
        (("snapshot", "stop"), "STOPPED", ELSEWHERE, ("left_stopped", False)),
        (("snapshot", "stop", "patch"), "STOPPED", None, ("left_stopped", False)),
        # killed before the stop: untouched, nothing to restore
        (("snapshot",), "RUNNING", BEFORE, ("done", False)),
        # resumed already (by us before the crash, or by a person)
        (("snapshot", "stop", "patch", "resume"), "RUNNING", AFTER, ("done", True)),
        (("snapshot", "stop", "patch"), "RUNNING", AFTER, ("done", True)),
        # resumed before the crash and already committed past the target: the recorded patch
        # says the rewind happened (the offsets are no longer the after-image)
        (("snapshot", "stop", "patch"), "RUNNING", (sink(10),), ("done", True)),
        # the connector was deleted meanwhile
        (("snapshot", "stop"), None, None, ("gone", False)),
    ],
)
def test_recovery_restores_only_what_it_can_trust(
    completed: tuple[str, ...],
    state: str | None,
    current: tuple[OffsetEntry, ...] | None,
    expected: tuple[str, bool],
) -> None:
    assert recovery_step(record(*completed), state, current, BEFORE, AFTER) == expected


def test_a_connector_that_was_stopped_before_the_rewind_stays_stopped() -> None:
    rec = record("snapshot", "stop", "patch", prior_state="STOPPED")
    assert recovery_step(rec, "STOPPED", AFTER, BEFORE, AFTER) == ("done", True)


# -- skip-run plans: quarantine first -----------------------------------------------------------


class _FakeService:
    """Just enough of StepwiseBackend for `RewindRunner.run` to plan; any change is recorded."""

    connect_cluster = "local"

    def __init__(self, before: list[OffsetEntry]) -> None:
        self.before = before
        self.touched: list[str] = []

    async def describe(self, connector: str) -> tuple[ConnectorKind, str, str]:
        return ConnectorKind.SINK, "FileStreamSink", "RUNNING"

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> Plan:
        after = {e.key: e for e in self.before} | {e.key: e for e in patch}
        return Plan(
            connector,
            "alter",
            ConnectorKind.SINK,
            "FileStreamSink",
            "RUNNING",
            1,
            tuple(self.before),
            tuple(patch),
            tuple(after.values()),
        )

    def __getattr__(self, name: str) -> Any:  # snapshot, stop_and_wait, write, ...
        self.touched.append(name)
        raise AssertionError(f"the rewind touched the connector ({name}) before quarantining")


class _Copier:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.jobs: list[tuple[SkipRunJob, dict[str, str]]] = []

    def copy(self, job: SkipRunJob, context: dict[str, str]) -> CopyResult:
        self.jobs.append((job, context))
        if self.error is not None:
            raise self.error
        return CopyResult("offsetd.quarantine", 1, job.records, 0)


class _Runner(RewindRunner):
    def __init__(self, copier: _Copier) -> None:
        super().__init__(Settings())
        self.fake = copier

    async def copier(self, service: Any, connector: str, kind: ConnectorKind) -> Any:
        return self.fake, "the test's quarantine"


def _skip_run_plan_file(folder: Path) -> Path:
    request = Request("orders-sink", ConnectorKind.SINK, "value.bad", Mode.SKIP_RUN, "west")
    ranges = [PartitionRange("orders", 0, 10, 20, committed=10)]
    scans = {
        ("orders", 0): PartitionScan(
            "orders", 0, 10, 3, 10, 19, first_match=10, last_match=12, first_miss=13
        )
    }
    out = folder / "plan.json"
    write_plan(build_plan(request, decide(Mode.SKIP_RUN, ranges, scans)), out)
    return out


def _decision() -> Decision:
    fields = {"id": "d1", "connector": "orders-sink", "connect_cluster": "local", "rule": "r"}
    return cast(Decision, SimpleNamespace(**fields))


def _apply_plan(copier: _Copier, service: _FakeService, path: Path) -> RewindResult:
    """The rule action rewind with `plan_file`, as the executor runs it."""
    return asyncio.run(
        _Runner(copier).run(
            cast(StepwiseBackend, service),
            cast(SagaStore, None),
            _decision(),
            {"plan_file": str(path)},
        )
    )


@pytest.mark.parametrize(
    "error", [QuarantineFailed("broker down"), InvalidDocument("moved since the plan")]
)
def test_a_skip_run_plan_whose_quarantine_fails_touches_nothing(
    tmp_path: Path, error: Exception
) -> None:
    path = _skip_run_plan_file(tmp_path)
    service = _FakeService([sink(10)])
    copier = _Copier(error)
    result = _apply_plan(copier, service, path)
    assert result.outcome == "aborted"
    assert "not all quarantined" in result.message
    assert str(error) in result.message
    assert "nothing was stopped or patched" in result.message
    assert service.touched == []  # no snapshot, no stop, no PATCH
    ((job, context),) = copier.jobs
    assert [(r.first, r.last, r.records) for r in job.runs] == [(10, 12, 3)]
    assert context["decision.id"] == "d1"
    assert context["connect.cluster"] == "local"


def test_a_skip_run_plan_is_refused_when_the_connector_moved(tmp_path: Path) -> None:
    path = _skip_run_plan_file(tmp_path)
    service = _FakeService([sink(11)])  # no longer at the run's start
    copier = _Copier(None)
    result = _apply_plan(copier, service, path)
    assert result.outcome == "aborted"
    assert "moved since the skip-run plan was computed" in result.message
    assert copier.jobs == []
    assert service.touched == []
