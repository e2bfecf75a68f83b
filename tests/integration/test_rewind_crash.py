"""A rewind killed at any point on the real stack ends exactly once: rewound, or rolled back.

The rewind saga's recovery (`RewindRunner.recover`, reached through the executor's
`_recover_rewind`) is what stands between a daemon killed mid-rewind and a sink connector left
STOPPED, rewound twice, or rewound without anyone knowing. Its decisions are unit-tested; this
proves them against a real Connect worker: one process (`saga_runner run`, the daemon's own
remediation layer) dies with `os._exit` at a chosen fault point, a fresh one (`saga_runner
recover`, what `offsetd run` does at start) finishes the work, and a third finds nothing left.

Killed once the offsets are written, the rewind completes: the committed offset is the target,
the records from the target on reach the sink once more (each exactly once, none before it),
the connector is RUNNING again, one snapshot was taken and one patch applied, the saga `done`.
Killed after the saga was recorded but before the write, it is rolled back: RUNNING again,
nothing re-delivered, the saga `aborted`. Killed before anything was recorded, the decision has
no outcome and the restarted process runs it afresh. Every way, there is one outcome in the audit.

Slow on purpose (about 4 minutes in one lane): every crash point of the rewind is a real
process killed and a new one recovering it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.snapshots import KafkaSnapshotStore, Snapshot
from offsetd.remediation.faults import CRASH_EXIT_CODE
from offsetd.remediation.rewind import REWIND_STEPS, rewind_key
from offsetd.remediation.sagas import SagaRecord, SagaStore
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.saga_runner import spawn

RECORDS = 10
TARGET = 5  # the first offset whose timestamp is at or after the rewind's time
GAP_MS = 10_000  # records 0-4 and 5-9 are this far apart; the target time is in between


@dataclass(frozen=True)
class Env:
    config: Path
    bootstrap: str  # the Kafka cluster of the Connect cluster: topics, sagas, snapshots
    sagas_topic: str
    snapshots_topic: str
    audit_topic: str


@dataclass(frozen=True)
class Sink:
    name: str
    topic: str
    out: Path
    target_ms: int

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []


@dataclass(frozen=True)
class Case:
    """Where the first process dies, what it must have left, and how recovery must end."""

    step: str
    when: str
    at_crash: tuple[str, ...] | None  # the saga's recorded steps at the crash (None: no saga)
    state: str  # the connector's state at the crash
    rewound: bool  # recovery ends with the rewind done (else: rolled back, nothing re-delivered)
    snapshots: tuple[str, ...]  # the statuses of the connector's snapshots at the end, sorted

    @property
    def id(self) -> str:
        return f"{self.step}-{self.when}"

    @property
    def completed(self) -> tuple[str, ...]:
        """The saga's steps at the end: recovery records none again; with no saga at the
        crash, the decision had no outcome, so the restarted process ran it from the start."""
        return REWIND_STEPS if self.at_crash is None else self.at_crash


STOP = ("snapshot", "stop")
PATCH = ("snapshot", "stop", "patch")
CASES = [
    # Nothing recorded: the decision has no outcome, the restarted process rewinds afresh.
    Case("snapshot", "before", None, "RUNNING", True, ("applied",)),
    # ... and the first process's snapshot stays `planned`, never applied.
    Case("snapshot", "after-action", None, "RUNNING", True, ("applied", "planned")),
    # Recorded, not stopped: nothing to undo.
    Case("snapshot", "after-progress", ("snapshot",), "RUNNING", False, ("planned",)),
    Case("stop", "before", ("snapshot",), "RUNNING", False, ("planned",)),
    # Stopped by the dead process, offsets untouched: put back RUNNING, nothing re-delivered.
    Case("stop", "after-action", ("snapshot",), "STOPPED", False, ("failed",)),
    Case("stop", "after-progress", STOP, "STOPPED", False, ("failed",)),
    Case("patch", "before", STOP, "STOPPED", False, ("failed",)),
    # Offsets written and read back, not recorded: recovery sees the target and resumes.
    Case("patch", "after-action", STOP, "STOPPED", True, ("applied",)),
    Case("patch", "after-progress", PATCH, "STOPPED", True, ("applied",)),
    Case("resume", "before", PATCH, "STOPPED", True, ("applied",)),
    # Resumed (and re-delivering) but not recorded: recovery must not call it "unchanged".
    Case("resume", "after-action", PATCH, "RUNNING", True, ("applied",)),
    Case("resume", "after-progress", REWIND_STEPS, "RUNNING", True, ("applied",)),
]
assert {(c.step, c.when) for c in CASES} == {
    (step, when) for step in REWIND_STEPS for when in ("before", "after-action", "after-progress")
}


@pytest.fixture
def env(stack: StackInfo, tmp_path: Path) -> Env:
    data = stack.offsetd_config()
    alias = data["connect_clusters"]["local"]["kafka_cluster"]
    data["connect_clusters"]["local"]["dlq_topics"] = []
    audit, sagas, snapshots = unique("offsetd.audit"), unique("offsetd.sagas"), unique("snaps")
    data["daemon"] = {"audit_topic": audit, "data_dir": str(tmp_path / "s")}
    data["offsets"] = {"snapshots_topic": snapshots}
    data["remediation"] = {
        "sagas_topic": sagas,
        "control_topic": unique("offsetd.control"),
        "quarantine_topic": unique("offsetd.quarantine"),
        "blast_radius": {"max_failing_connectors": 1000},
    }
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return Env(path, stack.clusters[alias]["bootstrap.servers"], sagas, snapshots, audit)


def committed(connect: ConnectClient, name: str) -> int | None:
    entries = connect.offsets(name)["offsets"]
    return int(entries[0]["offset"]["kafka_offset"]) if entries else None


def states(connect: ConnectClient, name: str) -> tuple[str | None, list[str]]:
    status = connect.status(name)
    if status is None:
        return None, []
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def delivered(n: Sequence[int]) -> list[str]:
    return [f"{{n={i}}}" for i in n]


def start_sink(connect: ConnectClient, env: Env, tmp_path: Path) -> Sink:
    """A RUNNING JSON FileStreamSink that delivered and committed records 0-9."""
    topic, name = unique("rewind-crash"), unique("rewind-crash-sink")
    create_topic(env.bootstrap, topic)
    base = int(time.time() * 1000) - 60_000
    stamps = [(n, base + n + (GAP_MS if n >= TARGET else 0)) for n in range(RECORDS)]
    records = [(f"k{n}".encode(), json.dumps({"n": n}).encode()) for n, _ in stamps]
    times = [ts for _, ts in stamps]
    assert produce(env.bootstrap, topic, records, timestamps=times) == list(range(RECORDS))
    out = tmp_path / f"{name}.txt"
    connect.create(name, json_file_sink(topic, out))
    connect.wait_running(name)
    sink = Sink(name, topic, out, base + TARGET + GAP_MS // 2)
    wait_for(f"{name} to commit {RECORDS}", lambda: committed(connect, name) == RECORDS)
    assert sink.lines() == delivered(range(RECORDS))
    return sink


def rewind_decision(sink: Sink) -> Decision:
    now = int(time.time() * 1000)
    return Decision(
        id=unique("decision"),
        rule="rewind-crash",
        mode="enforce",
        connect_cluster="local",
        connector=sink.name,
        task_id=None,
        key=f"connector={sink.name}",
        actions=(PlannedAction(type="rewind", params={"to_timestamp_ms": sink.target_ms}),),
        record=None,
        record_status=None,
        outcome="planned",
        reason=None,
        detail=None,
        event_time_ms=now,
        decided_at_ms=now,
        inputs=DecisionInputs(
            events=(), trigger=EventSummary(kind="connector_status", state="PAUSED")
        ),
    )


def sagas_of(env: Env, connector: str) -> list[SagaRecord]:
    store = SagaStore({"bootstrap.servers": env.bootstrap}, env.sagas_topic)
    store.start()
    try:
        return [r for r in store.all() if r.connector == connector]
    finally:
        store.close()


def snapshots_of(env: Env, connector: str) -> list[Snapshot]:
    store = KafkaSnapshotStore({"bootstrap.servers": env.bootstrap}, env.snapshots_topic)
    return store.list(connector=connector, limit=None)


def outcomes_of(env: Env, decision_id: str) -> list[dict[str, Any]]:
    records = read_records({"bootstrap.servers": env.bootstrap}, env.audit_topic)
    return [
        r for r in records if r.get("kind") == "remediation" and r.get("decision_id") == decision_id
    ]


def kafka_offsets(entries: Sequence[OffsetEntry]) -> list[int]:
    return [int(str((e.offset or {})["kafka_offset"])) for e in entries]


def assert_crashed_at(connect: ConnectClient, env: Env, sink: Sink, case: Case, key: str) -> None:
    """The dead process left exactly what the fault point says: a check of the crash itself."""
    sagas = sagas_of(env, sink.name)
    if case.at_crash is None:
        assert sagas == [], sagas
    else:
        [saga] = sagas
        assert saga.key == key
        assert saga.status == "running", saga
        assert saga.completed == case.at_crash, saga.completed
    state, _tasks = states(connect, sink.name)
    assert state == case.state, (state, case)
    if case.state == "STOPPED":
        # Nothing moves a STOPPED sink's offsets: the write happened or it did not.
        assert committed(connect, sink.name) == (TARGET if case.rewound else RECORDS)
    elif case.at_crash is None or "stop" not in case.at_crash:
        assert committed(connect, sink.name) == RECORDS  # never stopped, never written


def assert_ended_once(
    connect: ConnectClient, env: Env, sink: Sink, case: Case, decision_id: str, key: str
) -> None:
    wait_for(
        f"{sink.name} and its task RUNNING",
        lambda: states(connect, sink.name) == ("RUNNING", ["RUNNING"]),
    )
    expected = delivered([*range(RECORDS), *(range(TARGET, RECORDS) if case.rewound else [])])
    wait_for(f"{sink.name} to deliver {expected}", lambda: sink.lines() == expected, timeout_s=60)
    wait_for(
        f"{sink.name} to commit {RECORDS} again", lambda: committed(connect, sink.name) == RECORDS
    )
    # Committed up to the end: anything still to come would be a second rewind's re-delivery.
    assert sink.lines() == expected

    [saga] = sagas_of(env, sink.name)
    assert saga.key == key
    assert saga.status == ("done" if case.rewound else "aborted"), (saga.status, saga.error)
    assert saga.completed == case.completed, saga.completed  # recovery writes no step again

    snapshots = snapshots_of(env, sink.name)
    assert sorted(s.status for s in snapshots) == list(case.snapshots), snapshots
    [snapshot] = [s for s in snapshots if s.id == saga.snapshot_id]
    assert kafka_offsets(snapshot.before) == [RECORDS]
    if case.rewound:  # the one snapshot that took effect is the saga's, and says so
        assert snapshot.status == "applied", snapshot
        assert kafka_offsets(snapshot.after) == [TARGET]

    outcomes = outcomes_of(env, decision_id)
    assert [o["outcome"] for o in outcomes] == ["executed" if case.rewound else "aborted"], outcomes


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_rewind_killed_at_any_point_ends_exactly_once(
    connect: ConnectClient, env: Env, tmp_path: Path, case: Case
) -> None:
    sink = start_sink(connect, env, tmp_path)
    decision = rewind_decision(sink)
    decision_file = tmp_path / "decision.json"
    decision_file.write_text(decision.model_dump_json())
    key = rewind_key("local", sink.name, decision.id)
    try:
        crashed = spawn(
            env.config, "run", str(decision_file), fault=f"crash:{case.step}:{case.when}"
        )
        assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr[-3000:]
        assert f"injected crash at {case.step}:{case.when}" in crashed.stderr
        assert_crashed_at(connect, env, sink, case, key)

        recovered = spawn(env.config, "recover")
        assert recovered.returncode == 0, recovered.stderr[-3000:]
        assert_ended_once(connect, env, sink, case, decision.id, key)

        again = spawn(env.config, "recover")  # a second restart finds nothing left to do
        assert again.returncode == 0, again.stderr[-3000:]
        assert_ended_once(connect, env, sink, case, decision.id, key)
    finally:
        connect.delete(sink.name)
