"""Skipping a poison record on the real stack: exactly once, crash or no crash, never lossy.

Slow on purpose (about 8 minutes in one lane): every crash point of the skip saga is a test of
its own, ~22 s each, because each kills a real saga process and a new one recovers it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.events.models import RecordRef, SourceRecord
from offsetd.remediation.faults import CRASH_EXIT_CODE
from offsetd.remediation.quarantine import read_quarantined
from offsetd.remediation.sagas import STEPS
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.saga_runner import spawn


@dataclass(frozen=True)
class Poisoned:
    name: str
    topic: str
    poison: int
    sink: Path
    dlq: str


def with_saga_sections(data: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The config `data` with this test's own audit, sagas, control and quarantine topics."""
    data["connect_clusters"]["local"]["dlq_topics"] = []
    data["daemon"] = {"audit_topic": unique("offsetd.audit"), "data_dir": str(tmp_path / "s")}
    data["remediation"] = {
        "sagas_topic": unique("offsetd.sagas"),
        "control_topic": unique("offsetd.control"),
        "quarantine_topic": unique("offsetd.quarantine"),
        "verify_stable_for": "2s",
        "blast_radius": {"max_failing_connectors": 50},
    }
    return data


@pytest.fixture
def remediation_config(stack: StackInfo, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data = with_saga_sections(stack.offsetd_config(), tmp_path)
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path, data


def make_poisoned(connect: ConnectClient, west: str, tmp_path: Path) -> Poisoned:
    """A FileStreamSink FAILED on a non-JSON record in the middle of a batch, with a DLQ."""
    topic, name, dlq = unique("poison"), unique("poison-sink"), unique("dlq")
    create_topic(west, topic)
    create_topic(west, dlq)
    before = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(3)]
    after = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(4, 7)]
    # One batch, nothing committed yet: the failure's committed offset is not the poison one.
    offsets = produce(west, topic, [*before, (b"bad", b"{not json"), *after])
    sink = tmp_path / f"{name}.txt"
    connect.create(
        name,
        dlq_json_file_sink(topic, sink, dlq),
    )

    def failed() -> bool:
        status = connect.status(name)
        return status is not None and [t["state"] for t in status["tasks"]] == ["FAILED"]

    wait_for(f"{name} to fail on the poison record", failed, timeout_s=60)
    return Poisoned(name, topic, offsets[3], sink, dlq)


def skip_decision(p: Poisoned, mode: str = "enforce") -> Decision:
    record = RecordRef(topic=p.topic, partition=0, offset=p.poison)
    source = SourceRecord(topic=p.dlq, partition=0, offset=0, timestamp_ms=int(time.time() * 1000))
    return Decision(
        id=unique("decision"),
        rule="poison-record-skip",
        mode=mode,
        connect_cluster="local",
        connector=p.name,
        task_id=0,
        key=f"connector={p.name},record={p.topic}-0@{p.poison}",
        actions=(
            PlannedAction(
                type="skip-record",
                params={
                    "record": record.model_dump(),
                    "record_status": "exact",
                    "next_offset": p.poison + 1,
                },
            ),
        ),
        record=record,
        record_status="exact",
        outcome="planned",
        reason=None,
        detail=None,
        event_time_ms=source.timestamp_ms,
        decided_at_ms=source.timestamp_ms,
        inputs=DecisionInputs(
            events=(source,),
            trigger=EventSummary(
                kind="dlq_record", task_id=0, stage="VALUE_CONVERTER", record=record
            ),
        ),
    )


def assert_skipped_once(
    connect: ConnectClient, west: str, data: dict[str, Any], p: Poisoned
) -> None:
    quarantined = [
        q
        for q in read_quarantined(
            {"bootstrap.servers": west}, data["remediation"]["quarantine_topic"]
        )
        if q.connector == p.name
    ]
    assert len(quarantined) == 1, [q.ref for q in quarantined]
    copy = quarantined[0]
    assert copy.original == RecordRef(topic=p.topic, partition=0, offset=p.poison)
    assert copy.stored.value == b"{not json"
    connect.wait_running(p.name)
    offsets = connect.offsets(p.name)["offsets"]
    assert offsets
    assert offsets[0]["offset"]["kafka_offset"] >= p.poison + 1
    # Every good record after the poison one reached the sink, and none before it was lost.
    wait_for(
        "all good records in the sink",
        lambda: p.sink.exists() and len(p.sink.read_text().splitlines()) == 6,
        timeout_s=60,
    )
    lines = p.sink.read_text().splitlines()
    assert lines == [f"{{n={i}}}" for i in (0, 1, 2, 4, 5, 6)], lines


CRASH_POINTS = [
    (step, when) for step in STEPS for when in ("before", "after-action", "after-progress")
]


@pytest.mark.parametrize(("step", "when"), CRASH_POINTS, ids=[f"{s}-{w}" for s, w in CRASH_POINTS])
def test_a_skip_killed_at_any_point_completes_exactly_once(
    connect: ConnectClient,
    west: str,
    tmp_path: Path,
    remediation_config: tuple[Path, dict[str, Any]],
    step: str,
    when: str,
) -> None:
    config, data = remediation_config
    p = make_poisoned(connect, west, tmp_path)
    decision = tmp_path / "decision.json"
    decision.write_text(skip_decision(p).model_dump_json())
    try:
        crashed = spawn(config, "run", str(decision), fault=f"crash:{step}:{when}")
        assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr[-3000:]
        recovered = spawn(config, "recover")
        assert recovered.returncode == 0, recovered.stderr[-3000:]
        assert_skipped_once(connect, west, data, p)
        again = spawn(config, "recover")  # a second restart finds nothing left to do
        assert again.returncode == 0, again.stderr[-3000:]
        assert_skipped_once(connect, west, data, p)
    finally:
        connect.delete(p.name)
