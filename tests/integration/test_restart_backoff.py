"""Restarts on the stack, in real (shortened) time: only when the failure class says a restart
can help, with a backoff measured between the restarts Connect really received.

The rules are the shipped examples (rules/examples), with their delays shortened to seconds
and scoped to this test's connectors; nothing else changes. The daemon runs before the failures
start, so it sees them as they happen.

About 2.5 minutes in one lane: the backoff is measured between restarts Connect really
received, so the (shortened) delays are waited out.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import POISON, Setup, daemon_setup, good

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Other tests' failed connectors share the stack's Connect: not an outage for these tests.
WIDE = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}

EXAMPLES = Path(__file__).resolve().parents[2] / "rules" / "examples"
BACKOFF = {"initial": "2s", "factor": 2, "max": "8s", "reset_after": "5m"}


@pytest.fixture(autouse=True)
def delete_new_connectors(stack: StackInfo) -> Iterator[None]:
    """The connectors a test made are deleted after it: a FAILED one left behind would count
    in every later test's blast radius."""
    url = stack.connect["url"]
    before = set(httpx.get(f"{url}/connectors", timeout=30).json())
    yield
    for name in set(httpx.get(f"{url}/connectors", timeout=30).json()) - before:
        httpx.delete(f"{url}/connectors/{name}", timeout=30)


def shipped_rules_fast(setup: Setup) -> None:
    """rules/examples with seconds instead of minutes in the restart backoffs, no cooldowns
    on the restart rules and a larger transient budget; and the config scoped to this test."""
    folder = Path(setup.data["daemon"]["rules_dir"])
    shutil.rmtree(folder)
    folder.mkdir()
    yaml = YAML()
    for path in EXAMPLES.glob("*.yaml"):
        rules = yaml.load(path.read_text())
        for rule in rules if isinstance(rules, list) else [rules]:
            for action in rule["actions"]:
                if action["type"] == "restart-failed-tasks":
                    action["backoff"] = dict(BACKOFF)
                    rule["limits"]["cooldown"] = "0s"
            if rule["name"] == "transient-restart":
                rule["limits"]["budget"] = {"max": 20, "per": "1h"}
        with (folder / path.name).open("w") as out:
            yaml.dump(rules, out)
    setup.data["remediation"]["scope"] = {"connectors": [f"{setup.prefix}*"]}
    with setup.config.open("w") as out:
        YAML().dump(setup.data, out)


def executed(setup: Setup, connector: str, rule: str) -> list[dict[str, Any]]:
    return [
        r for r in setup.outcomes(connector) if r["rule"] == rule and r["outcome"] == "executed"
    ]


def decided(setup: Setup, connector: str, rule: str) -> list[dict[str, Any]]:
    return [
        r
        for r in setup.audit()
        if r.get("kind") != "remediation" and r.get("connector") == connector and r["rule"] == rule
    ]


def task_trace(connect: ConnectClient, name: str) -> str:
    status = connect.status(name) or {}
    return "".join(t.get("trace", "") for t in status.get("tasks", []) if t["state"] == "FAILED")


def file_sink(
    setup: Setup, connect: ConnectClient, out: Path, records: int = 0, tasks: int = 1
) -> str:
    """Start the daemon, then a JSON file sink writing to `out` (its topic holds `records`
    good records): the daemon sees its failures as they happen. Returns its name."""
    topic = unique(f"{setup.prefix}-t")
    create_topic(setup.west, topic, partitions=tasks)
    if records:
        produce(setup.west, topic, good(range(records)))
    name = f"{setup.prefix}-files"
    setup.start()
    connect.create(name, json_file_sink(topic, out, **{"tasks.max": str(tasks)}))
    return name


def test_a_sink_whose_folder_is_missing_is_restarted_with_growing_delays_until_it_is_there(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        shipped_rules_fast(setup)
        folder = tmp_path / "mnt" / "out"
        out = folder / "orders.txt"
        name = file_sink(setup, connect, out, records=5)

        wait_for("four restarts", lambda: len(executed(setup, name, "transient-restart")) >= 4, 120)
        assert "java.nio.file.NoSuchFileException" in task_trace(connect, name)
        folder.mkdir(parents=True)  # the volume is there now
        wait_for(
            "the records delivered",
            lambda: out.exists() and len(out.read_text().splitlines()) == 5,
            120,
        )
        status = connect.wait_running(name)
        assert all(t["state"] == "RUNNING" for t in status["tasks"])

        restarts = executed(setup, name, "transient-restart")
        params = [r["actions"][0]["params"] for r in restarts]
        delays = [p["delay_ms"] for p in params]
        assert delays[:4] == [2000, 4000, 8000, 8000], delays  # doubling, capped at 8s
        assert [p["attempt"] for p in params[:4]] == [0, 1, 2, 3]  # counted from 0
        # measured: each restart reached Connect no sooner than its delay after the failure
        # before it, and not much later (a task start fails in well under a second here)
        sent = [r["decided_at_ms"] for r in restarts]
        gaps = [(b - a) / 1000 for a, b in itertools.pairwise(sent)]
        for gap, delay in zip(gaps[:3], delays[1:4], strict=True):
            assert delay / 1000 <= gap < delay / 1000 + 6, (gaps, delays)
        print(f"restart gaps {gaps} s for delays {delays} ms")
        assert not decided(setup, name, "unknown-failure-notify")
        assert not decided(setup, name, "poison-record-restart")
        time.sleep(5)  # healthy: nothing more is restarted
        assert len(executed(setup, name, "transient-restart")) == len(restarts)


def test_restarts_stop_when_the_failure_becomes_one_a_restart_cannot_fix(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        shipped_rules_fast(setup)
        parent = tmp_path / "mnt"
        name = file_sink(setup, connect, parent / "out" / "orders.txt", records=3)
        wait_for("two restarts", lambda: len(executed(setup, name, "transient-restart")) >= 2, 90)
        # someone "fixes" it wrong: the folder's place is taken by a file
        parent.mkdir()
        (parent / "out").write_text("not a folder\n")
        wait_for(
            "the failure told to a person",
            lambda: executed(setup, name, "unknown-failure-notify"),
            90,
        )
        assert "Not a directory" in task_trace(connect, name)
        restarts = len(executed(setup, name, "transient-restart"))
        time.sleep(3 * 8 + 5)  # three maximal backoffs: no restart comes
        assert len(executed(setup, name, "transient-restart")) == restarts
        state = (connect.status(name) or {})["tasks"][0]["state"]
        assert state == "FAILED"  # left for a person, not flapping


def test_a_deserialization_failure_is_never_restarted_in_a_loop(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """No DLQ, the skip rules in approve mode as shipped, nobody approves: the poison rule
    restarts twice (what counting to three failures needs), the third failure plans the skip,
    which waits for a person and holds the restarts; the transient rule never restarts it."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        shipped_rules_fast(setup)
        topic = unique(f"{setup.prefix}-t")
        create_topic(setup.west, topic)
        produce(setup.west, topic, [*good(range(3)), POISON])
        name = f"{setup.prefix}-json"
        setup.start()
        connect.create(
            name, json_file_sink(topic, tmp_path / "out.txt", **{"errors.tolerance": "none"})
        )
        try:
            wait_for(
                "the skip waiting for approval",
                lambda: any(
                    r["outcome"] == "awaiting_approval"
                    for r in setup.outcomes(name)
                    if r["rule"] == "poison-record-skip-located"
                ),
                120,
            )
        except AssertionError as exc:
            seen = [(r["rule"], r["outcome"], r.get("reason")) for r in setup.audit()]
            raise AssertionError(f"{exc}; audit: {seen}") from None
        time.sleep(3 * 8 + 5)  # three maximal backoffs: no restart comes
        assert len(executed(setup, name, "poison-record-restart")) == 2
        assert not decided(setup, name, "transient-restart")
        assert "DataException" in task_trace(connect, name)
        assert (connect.status(name) or {})["tasks"][0]["state"] == "FAILED"
