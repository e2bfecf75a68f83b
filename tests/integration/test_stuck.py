"""Failures that write nothing, provoked on the real stack: a sink task hung in `put()`, a task
that never starts, idle and paused sinks, five sinks stuck at once, a daemon restart in a stall.

The hung sink is a FileStreamSink whose `file` is a named pipe: held open by this test and never
read, the task is RUNNING, writes until the pipe is full and then blocks in `put()` with nothing
committed. When nobody opens the pipe at all, the task blocks in `start()` (opening it) and never
writes a status: the connector is RUNNING with no task listed. Connect's status says nothing is
wrong in both cases; the daemon reads it from Kafka (progress events) and the shipped
`stuck-tasks.yaml` rules act on it, with their backoffs shortened to seconds and in enforce mode.

The daemon runs before the connectors exist, so it sees the stall start. Its timings here:
Connect commits every second (the stack's `offset.flush.interval.ms`), `progress.stall_after`
is 8 s, `stuck_after` 15 s, and the collector's cycle 2 s.

About 3 minutes in one lane: each stuck state needs its time to become true, and the restarts
are spaced by their (shortened) backoff.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import Setup, daemon_setup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[2] / "rules" / "examples"
STALL_AFTER_S = 8
STUCK_AFTER_S = 15
CYCLE_S = 2
BACKOFF = {"initial": "2s", "factor": 2, "max": "8s", "reset_after": "1h"}
# records of ~120 bytes: 3,000 fill a pipe's 64 KiB many times over
PADDED = [(f"k{i}".encode(), json.dumps({"n": i, "pad": "x" * 100}).encode()) for i in range(3000)]


def stuck_rules(setup: Setup, *, watched: str) -> None:
    """rules/examples/stuck-tasks.yaml for this test's connectors: enforce, backoffs in seconds,
    budgets of 2 (so the notify rule counts 3); `watched` is left to a notify-only rule."""
    folder = Path(setup.data["daemon"]["rules_dir"])
    shutil.rmtree(folder)
    folder.mkdir()
    rules = YAML().load((EXAMPLES / "stuck-tasks.yaml").read_text())
    for rule in rules:
        rule["mode"] = "enforce"
        rule["match"]["connector"] = f"{setup.prefix}-*"
        rule["match"]["unless"] = {"connector": watched}
        for action in rule["actions"]:
            if action["type"] == "restart-tasks":
                action["backoff"] = dict(BACKOFF)
                rule["limits"]["budget"] = {"max": 2, "per": "1h"}
        if rule["when"]["count"] == 4:
            rule["when"]["count"] = 3
            rule["limits"]["cooldown"] = "0s"
    rules.append(
        {
            "name": "watch-notify",
            "mode": "enforce",
            "match": {"kind": "progress", "progress": "stalled", "connector": watched},
            "actions": [{"type": "notify", "severity": "warning"}],
            "limits": {"cooldown": "0s", "budget": {"max": 100, "per": "1h"}},
        }
    )
    with (folder / "stuck-tasks.yaml").open("w") as out:
        YAML().dump(rules, out)
    setup.data["lag"] = {
        **setup.data.get("lag", {}),
        "interval": f"{CYCLE_S}s",
        "stall_after": f"{STALL_AFTER_S}s",
    }
    setup.data["progress"] = {
        "stall_after": f"{STALL_AFTER_S}s",
        "stuck_after": f"{STUCK_AFTER_S}s",
    }
    setup.data["remediation"]["scope"] = {"connectors": [f"{setup.prefix}*"]}
    with setup.config.open("w") as out:
        YAML().dump(setup.data, out)


@contextmanager
def pipes(folder: Path) -> Iterator[dict[str, Path]]:
    """Named pipes by name; at the end each is opened for reading and drained, so no Connect
    thread stays blocked on one (a writer blocked in open() or write() is released)."""
    made: dict[str, Path] = {}

    class Pipes(dict[str, Path]):
        def __missing__(self, name: str) -> Path:
            path = folder / f"{name}.pipe"
            os.mkfifo(path)
            made[name] = path
            self[name] = path
            return path

    try:
        yield Pipes()
    finally:
        for path in made.values():
            release(path)


def release(path: Path) -> None:
    """Open a pipe for reading without blocking and read what waits, then close it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                if not os.read(fd, 1 << 16):
                    time.sleep(0.05)
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        os.close(fd)


def hold_unread(path: Path) -> int:
    """A reader that never reads: a writer can open the pipe and fill it, then blocks."""
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def decisions(setup: Setup, connector: str, rule: str | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in setup.audit()
        if r.get("kind") not in ("remediation", "suppressed")
        and r.get("connector") == connector
        and (rule is None or r.get("rule") == rule)
    ]


def outcomes(setup: Setup, connector: str, rule: str) -> list[dict[str, Any]]:
    return [r for r in setup.outcomes(connector) if r.get("rule") == rule]


def create_paused(connect: ConnectClient, name: str, config: dict[str, str]) -> None:
    """Created PAUSED (KIP-980's initial_state): it never reads a record."""
    response = connect.http.post(
        "/connectors", json={"name": name, "config": config, "initial_state": "PAUSED"}
    )
    assert response.status_code == 201, response.text


@pytest.fixture(autouse=True, scope="module")
def delete_new_connectors(stack: StackInfo) -> Iterator[None]:
    url = stack.connect["url"]
    before = set(httpx.get(f"{url}/connectors", timeout=30).json())
    yield
    for name in set(httpx.get(f"{url}/connectors", timeout=30).json()) - before:
        httpx.delete(f"{url}/connectors/{name}", timeout=30)


def test_hung_and_never_started_tasks_are_restarted_then_told_while_idle_and_paused_are_not(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    wide = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with (
        daemon_setup(stack, tmp_path, mode="enforce", remediation=wide) as setup,
        pipes(tmp_path) as pipe,
    ):
        watched = f"{setup.prefix}-watched"
        stuck_rules(setup, watched=watched)
        west = setup.west
        topics = {n: unique(f"{setup.prefix}-{n}") for n in ("hung", "never", "idle", "paused")}
        for name, topic in topics.items():
            create_topic(west, topic)
            if name != "idle":
                produce(west, topic, PADDED)
        setup.start()
        holder = hold_unread(pipe["hung"])
        hung, never = f"{setup.prefix}-hung", f"{setup.prefix}-never"
        idle, paused = f"{setup.prefix}-idle", f"{setup.prefix}-paused"
        created = time.monotonic()
        connect.create(hung, json_file_sink(topics["hung"], pipe["hung"]))
        connect.create(never, json_file_sink(topics["never"], pipe["never"]))
        connect.create(idle, json_file_sink(topics["idle"], tmp_path / "idle.txt"))
        create_paused(connect, paused, json_file_sink(topics["paused"], tmp_path / "p.txt"))
        try:
            connect.wait_running(hung)
            running = time.monotonic()
            first = wait_for(
                "the hung sink's first restart decision",
                lambda: decisions(setup, hung, "stuck-sink-restart"),
                STALL_AFTER_S + 60,
            )[0]
            detected = time.monotonic() - running
            print(
                f"hung sink: RUNNING {running - created:.1f} s after its creation, decided "
                f"{detected:.1f} s after that (stall_after {STALL_AFTER_S} s, cycle {CYCLE_S} s)"
            )
            # Connect says RUNNING, and nothing was committed: Kafka says what is wrong
            status = connect.status(hung) or {}
            assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
            assert connect.offsets(hung)["offsets"] == []
            assert first["task_id"] == 0
            assert first["mode"] == "enforce"
            trigger = first["inputs"]["trigger"]
            assert trigger["progress"] == "stalled", trigger
            assert "records waiting, nothing committed" in trigger["detail"], trigger
            # within stall_after plus a cycle of the stall's start (the task RUNNING), and
            # the slack of a loaded machine (a cycle's reads, the events topic, the agent)
            assert STALL_AFTER_S - 1 <= detected <= STALL_AFTER_S + CYCLE_S + 12, detected

            # restarts Connect received, each a new episode, with growing delays; then a person
            notified = wait_for(
                "a person told about the hung sink",
                lambda: [
                    r
                    for r in outcomes(setup, hung, "stuck-sink-notify")
                    if r["outcome"] == "executed"
                ],
                150,
            )
            assert notified
            restarts = [
                r for r in outcomes(setup, hung, "stuck-sink-restart") if r["outcome"] == "executed"
            ]
            assert len(restarts) == 2, [
                (r["outcome"], r.get("message")) for r in setup.outcomes(hung)
            ]
            assert all("restarted task 0" in r["message"] for r in restarts), restarts
            planned = [
                d for d in decisions(setup, hung, "stuck-sink-restart") if d["outcome"] == "planned"
            ]
            delays = [d["actions"][0]["params"]["delay_ms"] for d in planned]
            assert delays[:2] == [2000, 4000], delays
            tallies = setup.tallies(hung, "stuck-sink-restart")  # suppressed ones are counted
            assert any(t["reason"] == "budget" for t in tallies), tallies

            # the task that never started: no status at all, restarted after stuck_after
            status = connect.status(never) or {}
            assert status["connector"]["state"] == "RUNNING"
            assert status["tasks"] == []
            unassigned = wait_for(
                "the never-started task restarted",
                lambda: [
                    r
                    for r in outcomes(setup, never, "unassigned-task-restart")
                    if r["outcome"] == "executed"
                ],
                STUCK_AFTER_S + 60,
            )
            assert "restarted task 0" in unassigned[0]["message"], unassigned
            trigger = decisions(setup, never, "unassigned-task-restart")[0]["inputs"]["trigger"]
            assert trigger["progress"] == "unassigned"
            assert "no status" in trigger["detail"]

            # the page says it too: records waiting per task, the state sets
            daemon = setup.daemon
            assert daemon is not None
            labels = {"connect_cluster": "local", "connector": hung, "task": "0"}
            assert daemon.metric("offsetd_connector_progress", **labels, state="stalled") == 1
            assert daemon.metric("offsetd_sink_lag_records", **labels, topic=topics["hung"]) > 0
            assert daemon.metric("offsetd_sink_lag_seconds", **labels, topic=topics["hung"]) > 0
            never_labels = {"connect_cluster": "local", "connector": never, "task": "0"}
            assert (
                daemon.metric("offsetd_connector_progress", **never_labels, state="unassigned") == 1
            )

            # idle (nothing waits) and paused (records wait) for far longer than stall_after
            assert decisions(setup, idle) == []
            assert decisions(setup, paused) == []
            paused_labels = {"connect_cluster": "local", "connector": paused, "task": ""}
            assert (
                daemon.metric("offsetd_connector_progress", **paused_labels, state="inactive") == 1
            )
            assert daemon.metric(
                "offsetd_sink_lag_records", connector=paused, topic=topics["paused"]
            ) == len(PADDED)

            # the hung sink unblocked: it commits, and its state goes back to ok
            drained = threading.Event()
            reader = threading.Thread(target=drain, args=(holder, drained), daemon=True)
            reader.start()
            wait_for(
                "the hung sink committing again",
                lambda: daemon.metric("offsetd_connector_progress", **labels, state="ok") == 1,
                90,
            )
            drained.set()
            reader.join(5)
        finally:
            with contextlib.suppress(OSError):
                os.close(holder)


def drain(fd: int, done: threading.Event) -> None:
    while not done.is_set():
        try:
            os.read(fd, 1 << 16)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            return


STUCK_CONSUMER = {  # MM2's source consumer waits minutes for each fetch: RUNNING, N never moves
    "source.consumer.fetch.min.bytes": "50000000",
    "source.consumer.fetch.max.wait.ms": "300000",
    "source.consumer.request.timeout.ms": "400000",
}


def test_a_stalled_mm2_flow_is_restarted_and_its_lag_series_never_breaks(
    stack: StackInfo, connect: ConnectClient, east: str, tmp_path: Path
) -> None:
    """A MirrorSourceConnector whose source consumer waits minutes for each fetch, from its
    start: RUNNING, 30 records waiting, nothing replicated. No way was found here to make a
    stall that a restart itself cures (a consumer stuck by its config is stuck again after a
    restart), so the test proves the decision on STALL, the restart Connect answered, and the
    way back to OK once the cause is gone, with the lag series on every scrape from the first.

    (A first version stalled a flow that had caught up by changing its config: under load the
    old task replicated the new records before the new one started, and a slow first start
    read STALL instead. Stuck from its creation, the stall is the one provoked.)"""
    wide = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=wide) as setup:
        stuck_rules(setup, watched=f"{setup.prefix}-none")
        topic = unique(f"{setup.prefix}-mirrored")
        create_topic(east, topic)
        produce(east, topic, PADDED[:30])
        name = f"{setup.prefix}-mirror"
        base = connect.http.get(connect.path(mm2.SOURCE_CONNECTOR, "/config")).json()
        config = {
            **base,
            "name": name,
            "topics": topic,
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "offset-syncs.topic.location": "target",
            "sync.topic.configs.enabled": "false",
            "refresh.topics.interval.seconds": "2",
        }
        setup.start()
        daemon = setup.daemon
        assert daemon is not None
        connect.create(name, {**config, **STUCK_CONSUMER})
        connect.wait_running(name, timeout_s=90)
        seen: list[float | None] = []

        def lag_now() -> float | None:
            page = daemon.metrics()
            found = [
                line
                for line in page.splitlines()
                if line.startswith("offsetd_mm2_lag_records{")
                and f'connector="{name}"' in line
                and f'topic="{topic}"' in line
            ]
            value = float(found[0].rsplit(" ", 1)[1]) if found else None
            if seen or value is not None:  # from the series' first scrape on
                seen.append(value)
            return value

        wait_for("the flow's lag series", lambda: lag_now() == 30, 90)

        def restart_done() -> list[dict[str, Any]] | None:
            lag_now()  # sampled every poll: the series must never go away
            done = outcomes(setup, name, "mm2-stalled-flow-restart")
            return [r for r in done if r["outcome"] == "executed"] or None

        restarted = wait_for("the stalled flow restarted", restart_done, STALL_AFTER_S + 90)
        assert "restarted the connector and all its tasks" in restarted[0]["message"], restarted
        decision = decisions(setup, name, "mm2-stalled-flow-restart")[0]
        assert decision["task_id"] is None
        assert decision["inputs"]["trigger"]["progress"] == "stalled"
        assert decision["inputs"]["trigger"]["detail"] == "flow STALL"
        flow = {"connect_cluster": "local", "connector": name, "task": ""}
        assert daemon.metric("offsetd_connector_progress", **flow, state="stalled") == 1

        connect.create(name, config)  # the cause gone
        wait_for(
            "the flow OK again",
            lambda: (
                lag_now() == 0
                and daemon.metric("offsetd_connector_progress", **flow, state="ok") == 1
            ),
            90,
        )
        assert None not in seen, seen  # the lag series never went away
        assert seen.count(30.0) >= 2, seen  # stuck at 30 waiting, scrape after scrape
        connect.delete(name)


def test_five_sinks_stuck_together_are_held_and_a_daemon_restart_decides_no_episode_twice(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """Many connectors stuck at once is an outage, not five hung tasks: the blast radius holds
    the restarts. A connector watched by a notify-only rule is told once per episode, and a
    daemon restarted in the middle of its stall does not tell it again."""
    narrow = {"blast_radius": {"max_failing_connectors": 3, "settle": "0s"}}
    with (
        daemon_setup(stack, tmp_path, mode="enforce", remediation=narrow) as setup,
        pipes(tmp_path) as pipe,
    ):
        watched = f"{setup.prefix}-watched"
        stuck_rules(setup, watched=watched)
        names = [watched, *(f"{setup.prefix}-many{i}" for i in range(5))]
        topics = {name: unique(f"{setup.prefix}-t") for name in names}
        for topic in topics.values():
            create_topic(setup.west, topic)
            produce(setup.west, topic, PADDED[:1500])
        setup.start()
        holders = [hold_unread(pipe[name]) for name in names]
        try:
            for name in names:
                connect.create(name, json_file_sink(topics[name], pipe[name]))
            told = wait_for(
                "the watched sink told",
                lambda: decisions(setup, watched, "watch-notify"),
                STALL_AFTER_S + 60,
            )
            for name in names[1:]:
                held = setup.wait_outcome(name, "suppressed_blast_radius", 90)
                assert held["guard"] == "blast_radius", held
            for name in names[1:]:
                restarts = [
                    r
                    for r in outcomes(setup, name, "stuck-sink-restart")
                    if r["outcome"] == "executed"
                ]
                assert restarts == [], restarts

            daemon = setup.daemon
            assert daemon is not None
            daemon.stop()
            setup.start()  # the same app, its state restored
            restarted = time.monotonic()
            wait_for(
                "the new daemon sees the stall",
                lambda: (
                    setup.daemon is not None
                    and setup.daemon.metric(
                        "offsetd_connector_progress",
                        connect_cluster="local",
                        connector=watched,
                        task="0",
                        state="stalled",
                    )
                    == 1
                ),
                STALL_AFTER_S + 60,
            )
            # the stall is sent every cycle from now on: two more, and time to decide them
            time.sleep(2 * CYCLE_S + 3)
            print(f"the restarted daemon saw the stall {time.monotonic() - restarted:.1f} s in")
            again = decisions(setup, watched, "watch-notify")
            assert [d["id"] for d in again] == [d["id"] for d in told], again
        finally:
            for fd in holders:
                with contextlib.suppress(OSError):
                    os.close(fd)
