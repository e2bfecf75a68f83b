"""Connect misbehaving mid-saga, on the real stack: 409s, 500s, lost answers and a frozen worker.

The skip saga talks to the real Connect worker through `FaultProxy`, which forwards every request
and answers only the chosen ones with Connect's exact 409/500 bodies (or loses the answer). The
saga runs in this process through `build_remediator`, the code path `offsetd run` uses, so its
metrics can be read from its registry. "Connect stops answering" is the worker's own JVM
SIGSTOPped (its PID from the stack's process records) and SIGCONTed, always, in a `finally`.

Policy under test (`offsetd/remediation/skip/`): each step retries within
`remediation.max_retries`; when the retries run out with nothing written, the connector is put
back (outcome `failed`); when the offsets were written, it is left STOPPED
(`offsetd_connector_left_stopped` = 1, snapshot `left-stopped`). Never STOPPED and silent.

About 2.5 minutes in one lane: Connect's answers are withheld, or its JVM frozen, for as long as
it takes each step's retries to run out.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.config import load_settings
from offsetd.devstack.faultproxy import (
    DROP_ANSWER,
    REBALANCE_409,
    REQUEST_TIMEOUT_500,
    RETRIABLE_500,
    ZOMBIE_SINK_500,
    FaultProxy,
)
from offsetd.devstack.procs import ProcessRecord
from offsetd.devstack.stack import Stack, StackInfo
from offsetd.offsets.snapshots import KafkaSnapshotStore
from offsetd.remediation.quarantine import read_quarantined
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.saga_runner import remediation_layer
from tests.integration.test_remediation import Poisoned, skip_decision

pytestmark = pytest.mark.integration

RULE = "poison-record-skip"
PATCH = r"^/connectors/[^/]+/offsets$"
GOOD_LINES = [f"{{n={i}}}" for i in (0, 1, 2, 4, 5, 6)]
FREEZE_S = 20.0  # longer than the remediation layer's 15 s request timeout


@dataclass
class Run:
    """One remediation through the proxy: its outcome, metrics and audit record."""

    outcome: str
    registry: CollectorRegistry
    audit: dict[str, Any]
    data: dict[str, Any]
    elapsed_s: float

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def proxy(stack: StackInfo) -> Iterator[FaultProxy]:
    with FaultProxy(stack.connect["url"]) as running:
        yield running


def write_config(stack: StackInfo, tmp_path: Path, url: str, max_retries: int) -> Path:
    """offsetd.yaml for the stack, with Connect reached through `url` (the proxy)."""
    data = stack.offsetd_config()
    data["connect_clusters"]["local"]["url"] = url
    data["daemon"] = {"audit_topic": unique("offsetd.audit"), "data_dir": str(tmp_path / "s")}
    data["offsets"] = {"snapshots_topic": unique("offsetd.snapshots")}
    data["remediation"] = {
        "sagas_topic": unique("offsetd.sagas"),
        "control_topic": unique("offsetd.control"),
        "quarantine_topic": unique("offsetd.quarantine"),
        "verify_stable_for": "2s",
        "max_retries": max_retries,
        "blast_radius": {"max_failing_connectors": 50},
    }
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path


def poisoned_sink(connect: ConnectClient, west: str, tmp_path: Path) -> Poisoned:
    """A FileStreamSink FAILED on a non-JSON record that starts its batch (DLQ names it).

    Three good records are delivered and committed first, so the failed batch starts at the
    poison record and the committed offset is N: the saga needs no locating step, and the
    faults below hit the skip itself.
    """
    topic, name, dlq = unique("fault"), unique("fault-sink"), unique("fault-dlq")
    create_topic(west, topic)
    create_topic(west, dlq)
    produce(west, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(3)])
    sink = tmp_path / f"{name}.txt"
    connect.create(
        name,
        dlq_json_file_sink(topic, sink, dlq),
    )
    wait_for(f"{name} to commit the first 3 records", lambda: committed(connect, name) == 3)
    after = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(4, 7)]
    offsets = produce(west, topic, [(b"bad", b"{not json"), *after])
    wait_for(
        f"{name} to fail on the poison record", lambda: task_states(connect, name) == ["FAILED"]
    )
    assert committed(connect, name) == offsets[0] == 3
    return Poisoned(name, topic, offsets[0], sink, dlq)


def committed(connect: ConnectClient, name: str) -> int | None:
    entries = connect.offsets(name)["offsets"]
    return int(entries[0]["offset"]["kafka_offset"]) if entries else None


def task_states(connect: ConnectClient, name: str) -> list[str]:
    status = connect.status(name)
    return [t["state"] for t in status["tasks"]] if status else []


def connector_state(connect: ConnectClient, name: str) -> str:
    status = connect.status(name)
    assert status is not None
    return str(status["connector"]["state"])


async def _remediate(config: Path, p: Poisoned) -> tuple[str, CollectorRegistry]:
    registry = CollectorRegistry()
    async with remediation_layer(config, registry) as (remediator, audit):
        decision = skip_decision(p)
        await audit.write(decision.audit_record())
        outcome = await remediator.handle(decision)
    return outcome, registry


def remediate(config: Path, p: Poisoned) -> Run:
    started = time.monotonic()
    outcome, registry = asyncio.run(_remediate(config, p))
    elapsed = time.monotonic() - started
    data = load_settings(config)
    records = read_records(
        data.kafka_clusters["west"].client_config(), data.daemon.audit_topic, timeout_s=30
    )
    done = [r for r in records if r.get("kind") == "remediation" and r.get("connector") == p.name]
    assert len(done) == 1, done
    with config.open() as raw:
        plain = YAML(typ="safe").load(raw)
    return Run(outcome, registry, done[0], plain, elapsed)


def quarantined(west: str, run: Run, p: Poisoned) -> list[Any]:
    topic = run.data["remediation"]["quarantine_topic"]
    return [
        q for q in read_quarantined({"bootstrap.servers": west}, topic) if q.connector == p.name
    ]


def snapshot_status(west: str, run: Run) -> str:
    topic = run.data["offsets"]["snapshots_topic"]
    with KafkaSnapshotStore({"bootstrap.servers": west}, topic) as store:
        return store.get(str(run.audit["snapshot_id"])).status


def assert_skipped_once(connect: ConnectClient, west: str, run: Run, p: Poisoned) -> None:
    """Quarantined once, the group past N, RUNNING, every good record delivered, none lost."""
    copies = quarantined(west, run, p)
    assert len(copies) == 1, [q.ref for q in copies]
    original = copies[0].original
    assert original is not None
    assert (original.topic, original.offset) == (p.topic, p.poison)
    assert copies[0].stored.value == b"{not json"
    connect.wait_running(p.name)
    wait_for(
        "the group past the poison record", lambda: (committed(connect, p.name) or 0) > p.poison
    )
    wait_for(
        "every good record in the sink",
        lambda: p.sink.exists() and len(p.sink.read_text().splitlines()) == len(GOOD_LINES),
    )
    assert p.sink.read_text().splitlines() == GOOD_LINES
    labels = {"connect_cluster": "local", "connector": p.name}
    assert run.metric("offsetd_records_skipped_total", **labels, topic=p.topic) == 1
    assert run.metric("offsetd_records_quarantined_total", **labels, topic=p.topic) == 1
    assert run.metric("offsetd_connector_left_stopped", **labels) == 0
    assert run.metric("offsetd_connector_stopped_seconds_total", **labels) > 0
    assert run.metric("offsetd_remediation_outcomes_total", rule=RULE, outcome="executed") == 1
    assert run.metric("offsetd_remediation_outcomes_total", rule=RULE, outcome="failed") == 0


def calls_of(proxy: FaultProxy, method: str, suffix: str) -> list[tuple[int | None, str | None]]:
    return [
        (c.status, c.fault) for c in proxy.calls if c.method == method and c.path.endswith(suffix)
    ]


# -- (a) transient refusals and a lost answer: retried, and the skip completes ------------------


def test_transient_409_500_and_lost_answers_are_retried_and_the_skip_completes(
    stack: StackInfo, connect: ConnectClient, west: str, tmp_path: Path, proxy: FaultProxy
) -> None:
    p = poisoned_sink(connect, west, tmp_path)
    config = write_config(stack, tmp_path, proxy.url, max_retries=2)
    # Matched in this order, once each.
    proxy.inject("PUT", r"/stop$", REBALANCE_409)
    proxy.inject("PATCH", PATCH, REBALANCE_409)
    proxy.inject("PATCH", PATCH, RETRIABLE_500)
    proxy.inject("PATCH", PATCH, DROP_ANSWER)  # Connect applies it; the answer is lost
    proxy.inject("PUT", r"/resume$", REQUEST_TIMEOUT_500)
    try:
        run = remediate(config, p)
        assert run.outcome == "executed", run.audit["message"]
        assert run.audit["saga_status"] == "done"
        assert_skipped_once(connect, west, run, p)
        assert calls_of(proxy, "PUT", "/stop") == [(409, "rebalance_409"), (204, None)]
        assert calls_of(proxy, "PATCH", "/offsets") == [
            (409, "rebalance_409"),
            (500, "retriable_500"),
            (None, "drop_answer"),
            (200, None),  # read back at the target, written again for Connect's message
        ]
        assert calls_of(proxy, "PUT", "/resume") == [
            (500, "request_timeout_500"),
            (202, None),
        ]
        # the audit holds every answer the saga got, the refusals included
        statuses = [(c["method"], c["status"]) for c in run.audit["http_calls"]]
        assert ("PATCH", 409) in statuses
        assert ("PATCH", 500) in statuses
        assert ("PUT", 500) in statuses
        assert run.metric("offsetd_connect_requests_total", method="PATCH", code="409") == 1
        assert run.metric("offsetd_connect_requests_total", method="PUT", code="500") == 1
        assert snapshot_status(west, run) == "applied"
    finally:
        connect.delete(p.name)


# -- (b) persistent faults after the stop: rolled back, or left STOPPED, and said so ------------


def test_patch_refused_beyond_the_retries_puts_the_connector_back_unchanged(
    stack: StackInfo, connect: ConnectClient, west: str, tmp_path: Path, proxy: FaultProxy
) -> None:
    p = poisoned_sink(connect, west, tmp_path)
    config = write_config(stack, tmp_path, proxy.url, max_retries=1)
    proxy.inject("PATCH", PATCH, ZOMBIE_SINK_500, times=None)  # zombie sink tasks: never stops
    try:
        run = remediate(config, p)
        assert run.outcome == "failed"
        assert run.audit["saga_status"] == "failed"
        assert "offsets unchanged" in run.audit["message"], run.audit["message"]
        assert "was put back" in run.audit["message"] or "RUNNING again" in run.audit["message"]
        # 8 tries by the client, twice (max_retries=1): every PATCH refused, nothing forwarded
        patches = calls_of(proxy, "PATCH", "/offsets")
        assert patches == [(500, "zombie_sink_500")] * 16, patches
        # rolled back: resumed (not STOPPED), the group still at N, the poison record not skipped
        assert connector_state(connect, p.name) == "RUNNING"
        assert committed(connect, p.name) == p.poison
        wait_for("the task to fail again on N", lambda: task_states(connect, p.name) == ["FAILED"])
        assert p.sink.read_text().splitlines() == GOOD_LINES[:3]
        assert snapshot_status(west, run) == "failed"
        labels = {"connect_cluster": "local", "connector": p.name}
        assert run.metric("offsetd_remediation_outcomes_total", rule=RULE, outcome="failed") == 1
        assert run.metric("offsetd_connector_left_stopped", **labels) == 0
        assert run.metric("offsetd_connector_stopped_seconds_total", **labels) > 40
        assert run.metric("offsetd_records_skipped_total", **labels, topic=p.topic) == 0
        assert run.metric("offsetd_notifications_total", rule=RULE, result="logged") == 1
        # The copy was made before the stop (no copy, no skip); the record stays where it was.
        assert len(quarantined(west, run, p)) == 1

        # Connect heals; the next decision on the same record finishes the skip and finds the
        # copy made the first time (same saga key): still exactly one quarantine record.
        proxy.clear()
        outcome, _registry = asyncio.run(_remediate(config, p))
        assert outcome == "executed"
        assert len(quarantined(west, run, p)) == 1
        connect.wait_running(p.name)
        wait_for("the group past N", lambda: (committed(connect, p.name) or 0) > p.poison)
        wait_for(
            "every good record in the sink",
            lambda: len(p.sink.read_text().splitlines()) == len(GOOD_LINES),
        )
        assert p.sink.read_text().splitlines() == GOOD_LINES
    finally:
        connect.delete(p.name)


def test_resume_refused_beyond_the_retries_leaves_it_stopped_and_says_so(
    stack: StackInfo, connect: ConnectClient, west: str, tmp_path: Path, proxy: FaultProxy
) -> None:
    p = poisoned_sink(connect, west, tmp_path)
    config = write_config(stack, tmp_path, proxy.url, max_retries=2)
    proxy.inject("PUT", r"/resume$", REQUEST_TIMEOUT_500, times=None)
    try:
        run = remediate(config, p)
        assert run.outcome == "failed"
        assert run.audit["saga_status"] == "left_stopped"
        message = run.audit["message"]
        assert "left STOPPED" in message, message
        assert str(run.audit["snapshot_id"]) in message, message
        assert calls_of(proxy, "PUT", "/resume") == [(500, "request_timeout_500")] * 3
        # written and read back, then left STOPPED for a person: exactly what the audit says
        assert connector_state(connect, p.name) == "STOPPED"
        assert task_states(connect, p.name) == []
        assert committed(connect, p.name) == p.poison + 1
        assert [e["offset"]["kafka_offset"] for e in run.audit["after"]] == [p.poison + 1]
        assert snapshot_status(west, run) == "left-stopped"
        labels = {"connect_cluster": "local", "connector": p.name}
        assert run.metric("offsetd_connector_left_stopped", **labels) == 1
        assert run.metric("offsetd_remediation_outcomes_total", rule=RULE, outcome="failed") == 1
        assert run.metric("offsetd_connector_stopped_seconds_total", **labels) > 0
        assert run.metric("offsetd_notifications_total", rule=RULE, result="logged") == 1
        assert len(quarantined(west, run, p)) == 1
        # The person resumes it: it goes on past the poison record and loses nothing.
        assert connect.http.put(connect.path(p.name, "/resume")).status_code == 202
        connect.wait_running(p.name)
        wait_for(
            "every good record in the sink",
            lambda: len(p.sink.read_text().splitlines()) == len(GOOD_LINES),
        )
        assert p.sink.read_text().splitlines() == GOOD_LINES
    finally:
        connect.delete(p.name)


# -- (c) Connect stops answering: the worker's JVM frozen mid-saga ------------------------------


def connect_process(stack: StackInfo) -> ProcessRecord:
    found = [r for r in Stack(Path(stack.run_dir)).live_processes() if r.name == "connect-1"]
    assert len(found) == 1, found
    return found[0]


def _signal(worker: ProcessRecord, sig: signal.Signals) -> None:
    if worker.matches_live_process():  # never a PID that is no longer the worker
        os.kill(worker.pid, sig)


def test_connect_frozen_mid_saga_longer_than_the_request_timeout(
    stack: StackInfo,
    connect: ConnectClient,
    west: str,
    tmp_path: Path,
    proxy: FaultProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = poisoned_sink(connect, west, tmp_path)
    config = write_config(stack, tmp_path, proxy.url, max_retries=3)
    worker = connect_process(stack)
    frozen: list[float] = []
    done = threading.Event()

    def freeze_after_stop() -> None:
        """SIGSTOP the worker as soon as the saga's stop was accepted; SIGCONT after FREEZE_S."""
        deadline = time.monotonic() + 180
        while not done.is_set() and time.monotonic() < deadline:
            if (204, None) in calls_of(proxy, "PUT", "/stop"):
                try:
                    _signal(worker, signal.SIGSTOP)
                    frozen.append(time.monotonic())
                    done.wait(FREEZE_S)
                finally:
                    _signal(worker, signal.SIGCONT)
                    frozen.append(time.monotonic())
                return
            time.sleep(0.05)

    thread = threading.Thread(target=freeze_after_stop, daemon=True)
    caplog.set_level(logging.WARNING, logger="offsetd.remediation")
    thread.start()
    try:
        run = remediate(config, p)
    finally:
        done.set()
        thread.join(timeout=FREEZE_S + 5)
        _signal(worker, signal.SIGCONT)
    try:
        assert len(frozen) == 2, frozen
        assert frozen[1] - frozen[0] >= FREEZE_S - 0.5, frozen
        # The saga ran through the freeze: a request timed out and was retried within limits.
        retries = [r.getMessage() for r in caplog.records if "retry 1 of 3" in r.getMessage()]
        assert any("did not answer" in text for text in retries), caplog.text[-3000:]
        assert run.elapsed_s > FREEZE_S
        state = connector_state(connect, p.name)
        labels = {"connect_cluster": "local", "connector": p.name}
        # Never STOPPED and silent: STOPPED only with the audit and the metric saying so.
        if state == "STOPPED":
            assert run.audit["saga_status"] == "left_stopped", run.audit["message"]
            assert run.metric("offsetd_connector_left_stopped", **labels) == 1
        assert run.outcome == "executed", run.audit["message"]
        assert_skipped_once(connect, west, run, p)
    finally:
        connect.delete(p.name)
