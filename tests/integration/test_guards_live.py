"""The guards on a running daemon, end to end: the global pause, a cooldown, a budget that
outlives a restart of the daemon. Unit tests prove each guard's logic; these prove the daemon
obeys them with real events, a real control topic and a real Connect.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_control import cli, ok
from tests.integration.test_guardrails import POISON, Setup, Sink, daemon_setup, good, wait_failed
from tests.integration.test_restart_backoff import (
    decided,
    delete_new_connectors,  # noqa: F401  (autouse fixture)
    executed,
    file_sink,
    shipped_rules_fast,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Other tests' failed connectors share the stack's Connect: not an outage for these tests.
WIDE = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}


def skip_outcomes(setup: Setup, name: str) -> list[str]:
    return [r["outcome"] for r in setup.outcomes(name) if r["rule"] == "guard-skip"]


def poisoned_sink(setup: Setup, connect: ConnectClient, tmp: Path) -> tuple[Sink, int]:
    topic = unique(f"{setup.prefix}-t")
    create_topic(setup.west, topic)
    produce(setup.west, topic, good(range(3)))
    name = f"{setup.prefix}-sink"
    out = tmp / f"{name}.txt"
    connect.create(name, dlq_json_file_sink(topic, out, setup.dlq))
    connect.wait_running(name)
    offsets = produce(setup.west, topic, [POISON, *good(range(3, 6))])
    return Sink(name, topic, out), offsets[0]


def test_a_poison_record_during_a_pause_waits_and_is_skipped_after_the_resume(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        setup.start()
        ok(cli(setup.config, "pause", "--reason", "maintenance", "--by", "alice"))
        sink, poison = poisoned_sink(setup, connect, tmp_path)
        wait_for(
            "the held decision", lambda: "suppressed_paused" in skip_outcomes(setup, sink.name), 60
        )
        wait_failed(connect, sink)
        time.sleep(3)  # paused: nothing is written, the connector stays as it is
        assert skip_outcomes(setup, sink.name) == ["suppressed_paused"]
        assert setup.quarantined() == [] or all(
            q.connector != sink.name for q in setup.quarantined()
        )
        ok(cli(setup.config, "resume-automation", "--by", "bob"))
        done = setup.wait_outcome(sink.name, "executed", timeout_s=120)
        assert done["record"]["offset"] == poison
        connect.wait_running(sink.name)
        wait_for("the records after it", lambda: len(sink.lines()) == 6, 60)
        assert skip_outcomes(setup, sink.name) == ["suppressed_paused", "executed"]


def test_a_paused_decision_whose_failure_was_fixed_by_hand_is_not_acted_on(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        setup.start()
        ok(cli(setup.config, "pause", "--by", "alice"))
        sink, poison = poisoned_sink(setup, connect, tmp_path)
        wait_for(
            "the held decision", lambda: "suppressed_paused" in skip_outcomes(setup, sink.name), 60
        )
        wait_failed(connect, sink)
        # an SRE skips it by hand meanwhile: stop, move past the record, resume
        url = f"{stack.connect['url']}/connectors/{sink.name}"
        httpx.put(f"{url}/stop", timeout=30).raise_for_status()
        wait_for(
            "STOPPED",
            lambda: (connect.status(sink.name) or {})["connector"]["state"] == "STOPPED",
            60,
        )
        body = {
            "offsets": [
                {
                    "partition": {"kafka_topic": sink.topic, "kafka_partition": 0},
                    "offset": {"kafka_offset": poison + 1},
                }
            ]
        }
        httpx.patch(f"{url}/offsets", json=body, timeout=30).raise_for_status()
        httpx.put(f"{url}/resume", timeout=30).raise_for_status()
        connect.wait_running(sink.name)
        ok(cli(setup.config, "resume-automation", "--by", "bob"))
        done = setup.wait_outcome(sink.name, "not_needed", timeout_s=60)
        assert "no longer failing" in done["message"]
        time.sleep(3)
        assert skip_outcomes(setup, sink.name) == ["suppressed_paused", "not_needed"]
        assert all(q.connector != sink.name for q in setup.quarantined())


def test_one_outage_failing_two_tasks_gets_one_restart_the_cooldown_holds_the_second(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """The shipped transient-restart rule as it is (cooldown 1m): two tasks of one sink fail on
    the same missing folder; one restart (of every failed task) is sent, the other decision is
    held by the cooldown."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        shipped_rules_fast(setup)
        rules = Path(setup.data["daemon"]["rules_dir"]) / "transient-restart.yaml"
        rule: dict[str, Any] = YAML().load(rules.read_text())
        rule["limits"]["cooldown"] = "1m"
        with rules.open("w") as out:
            YAML().dump(rule, out)
        name = file_sink(setup, connect, tmp_path / "missing" / "out.txt", tasks=2)
        wait_for(
            "both tasks' decisions",
            lambda: len(decided(setup, name, "transient-restart")) >= 2,
            60,
        )
        time.sleep(5)
        made = decided(setup, name, "transient-restart")
        first_failures = made[:2]
        outcomes = sorted((d["outcome"], d.get("reason")) for d in first_failures)
        assert outcomes == [("planned", None), ("suppressed_cooldown", "cooldown")], made
        assert len(executed(setup, name, "transient-restart")) == 1


def test_a_spent_budget_outlives_a_restart_of_the_daemon(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=WIDE) as setup:
        shipped_rules_fast(setup)
        rules = Path(setup.data["daemon"]["rules_dir"]) / "transient-restart.yaml"
        rule: dict[str, Any] = YAML().load(rules.read_text())
        rule["limits"]["budget"] = {"max": 2, "per": "1h"}
        with rules.open("w") as out:
            YAML().dump(rule, out)
        name = file_sink(setup, connect, tmp_path / "missing" / "out.txt")
        wait_for(
            "the budget spent",
            lambda: any(
                d.get("reason") == "budget" for d in decided(setup, name, "transient-restart")
            ),
            90,
        )
        assert len(executed(setup, name, "transient-restart")) == 2
        daemon = setup.daemon
        assert daemon is not None
        daemon.stop()

        def budget_suppressed() -> int:  # its tally's count: the same record, growing
            tallies = setup.tallies(name, "transient-restart")
            return sum(t["count"] for t in tallies if t["reason"] == "budget")

        before = budget_suppressed()

        def planned() -> int:
            return sum(d["outcome"] == "planned" for d in decided(setup, name, "transient-restart"))

        planned_before = planned()
        setup.start()  # the same app id: the engine state comes back from its changelog
        httpx.post(
            f"{stack.connect['url']}/connectors/{name}/restart",
            params={"includeTasks": "true", "onlyFailed": "true"},
            timeout=30,
        ).raise_for_status()  # a person tries once more: it fails again
        wait_for("the decision after the restart", lambda: budget_suppressed() > before, 90)
        # suppressed by the budget the restarted daemon remembered, counted on, nothing planned
        assert planned() == planned_before
        time.sleep(3)
        assert len(executed(setup, name, "transient-restart")) == 2
