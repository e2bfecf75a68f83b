"""Self-healing as a new user meets it: the shipped rules (rules/examples, skip rules promoted to
enforce), a real `offsetd run`, and the timing the field has rather than the demo's.

- A poison record in the middle of its batch, with and without a DLQ. Connect drops the whole
  batch, so the group's committed offset is the batch's start, not the record; and with a DLQ
  the decision comes from the DLQ record, ~0.5 s before Connect reports the task FAILED. Both
  sinks must be healed: every good record delivered exactly once, the poison record in
  quarantine exactly once, the connector's config as it was.
- Five sinks failing together, restarted together (the moment the count of FAILED connectors
  *now* is lowest): the blast radius must hold every skip, audit each decision once, and say so
  in a metric an alert can use.
- A restart that finds nothing FAILED any more is audited as such, not as a restart.

About 3 minutes in one lane: the mid-batch heal waits out the shipped restart rule's real
backoff (30 s, then 60 s) before the third failure skips; it is the one test that proves it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from offsetd.remediation.locate import MAX_POLL_RECORDS_KEY
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import (
    POISON,
    Setup,
    Sink,
    cleanup,
    committed,
    daemon_setup,
    good,
    ours,
    task_states,
    wait_committed,
    wait_failed,
)
from tests.integration.test_skip_without_dlq import config_of

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "rules" / "examples"


def shipped_rules(folder: Path) -> None:
    """rules/examples as shipped, with the skip rules promoted from approve to enforce (what the
    examples tell a user to do once the audit looks right). Nothing else changes."""
    for old in folder.glob("*.yaml"):
        old.unlink()
    for path in EXAMPLES.glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    poison = folder / "poison-record.yaml"
    yaml = YAML()
    rules = yaml.load(poison.read_text())
    for rule in rules:
        if rule["name"] in ("poison-record-skip", "poison-record-skip-located"):
            assert rule["mode"] == "approve"
            rule["mode"] = "enforce"
    with poison.open("w") as out:
        yaml.dump(rules, out)


def shorten_restart_backoff(folder: Path) -> None:
    """The shipped restart rule with its backoff and cooldown shortened through its own
    settings (1 s doubling, no 20 s cooldown): for tests that need a heal, not its timing. The
    real 30 s / 60 s backoff is proven once, by the mid-batch heal below."""
    path = folder / "poison-record.yaml"
    yaml = YAML()
    rules = yaml.load(path.read_text())
    for rule in rules:
        if rule["name"] == "poison-record-restart":
            rule["actions"][0]["backoff"] = {"initial": "1s", "factor": 2, "max": "10s"}
            rule["limits"]["cooldown"] = "1s"
    with path.open("w") as out:
        yaml.dump(rules, out)


def quick_shipped_rules(folder: Path) -> None:
    """`shipped_rules` with `shorten_restart_backoff`."""
    shipped_rules(folder)
    shorten_restart_backoff(folder)


def delivered(sink: Sink) -> list[int]:
    """The `n` of every record the FileStreamSink wrote (one line per record, `{n=7}`)."""
    out: list[int] = []
    for line in sink.lines():
        out.append(int(line.strip("{}").split("=")[1]))
    return out


def decisions(setup: Setup, connector: str) -> list[dict[str, Any]]:
    return [r for r in setup.audit() if r.get("kind") is None and r["connector"] == connector]


def wait_skip(setup: Setup, connector: str, timeout_s: float) -> dict[str, Any]:
    """The first skip outcome of `connector`; fails at once when it is not `executed`
    (not_located, aborted, ... would otherwise be waited out)."""

    def probe() -> dict[str, Any] | None:
        for r in setup.outcomes(connector):
            if any(a["type"] == "skip-record" for a in r["actions"]):
                return r
        return None

    found = wait_for(f"{connector}: a skip outcome", probe, timeout_s)
    assert found["outcome"] == "executed", [
        (r["rule"], r["outcome"], r["message"]) for r in setup.outcomes(connector)
    ]
    return found


def assert_healed(connect: ConnectClient, sink: Sink, original: dict[str, str]) -> None:
    """Every good record (0..62) delivered exactly once and in order, the poison record never;
    the committed offset past it; the task RUNNING with the config it had before."""
    wait_for(
        f"{sink.name} to deliver every good record",
        lambda: len(sink.lines()) >= 63,
        timeout_s=60,
    )
    assert task_states(connect, sink.name) == ["RUNNING"]
    assert delivered(sink) == list(range(63)), sink.name
    assert committed(connect, sink.name) == 64
    config = config_of(connect, sink.name)
    assert MAX_POLL_RECORDS_KEY not in config
    assert config == original


def test_a_poison_record_mid_batch_is_healed_with_and_without_a_dlq_by_the_shipped_rules(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    # The blast radius has its own test below; here other tests' leftovers must not hold it.
    # Its settle (a wait before counting) is off, so the skip reaches the locator while the
    # DLQ record's FAILED status is still on its way: the race this test is about.
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        sinks: list[Sink] = []
        try:
            for suffix, with_dlq in (("dlq", True), ("nodlq", False)):
                topic = unique(f"{setup.prefix}-{suffix}")
                create_topic(setup.west, topic)
                produce(setup.west, topic, good(range(3)))
                name = f"{setup.prefix}-{suffix}"
                out = tmp_path / f"{name}.txt"
                config = (
                    dlq_json_file_sink(topic, out, setup.dlq)
                    if with_dlq
                    else json_file_sink(topic, out, **{"errors.tolerance": "none"})
                )
                connect.create(name, config)
                connect.wait_running(name)
                sinks.append(Sink(name, topic, out))
            originals = {s.name: config_of(connect, s.name) for s in sinks}
            for sink in sinks:
                wait_committed(connect, sink, 3)
            setup.start()
            # One batch holds 30 good records and then the poison record (one produce call, one
            # fetch); 30 more good records follow.
            poison = {}
            for sink in sinks:
                offsets = produce(setup.west, sink.topic, [*good(range(3, 33)), POISON])
                offsets += produce(setup.west, sink.topic, good(range(33, 63)))
                poison[sink.name] = offsets[30]
                assert poison[sink.name] == 33
            for sink in sinks:
                wait_failed(connect, sink)
                # Nothing of the failed batch was delivered: the committed offset is its start.
                assert committed(connect, sink.name) == 3
            # The shipped restart rule restarts after 30 s and 60 s; the third failure skips.
            for sink, rule in zip(
                sinks, ("poison-record-skip", "poison-record-skip-located"), strict=True
            ):
                done = wait_skip(setup, sink.name, timeout_s=300)
                assert done["rule"] == rule, done
                assert done["record"] == {
                    "topic": sink.topic,
                    "partition": 0,
                    "offset": poison[sink.name],
                }
                assert done["located_by"] == "single_record_batches", done
            for sink in sinks:
                assert_healed(connect, sink, originals[sink.name])
                outcomes = [r["outcome"] for r in setup.outcomes(sink.name)]
                assert "not_located" not in outcomes, setup.outcomes(sink.name)
            kept = ours(setup, setup.quarantined())
            assert sorted(
                (q.connector, q.original.offset if q.original else None, q.stored.value)
                for q in kept
            ) == sorted((s.name, poison[s.name], POISON[1]) for s in sinks)
            time.sleep(3)  # nothing more may happen: no second skip, no restart loop
            for sink in sinks:
                skips = [
                    r
                    for r in setup.outcomes(sink.name)
                    if any(a["type"] == "skip-record" for a in r["actions"])
                    and r["outcome"] == "executed"
                ]
                assert len(skips) == 1, skips
        finally:
            cleanup(connect, *sinks)


def test_five_sinks_failing_together_and_restarted_together_are_all_held_by_the_blast_radius(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """Default guards (at most 3 failing connectors within 5 minutes). The daemon runs through
    the whole failure: it sees the first failures, then the test restarts all five at once
    twice, as an operator or Strimzi's autoRestart would, so the third failure of each comes
    while the others are RESTARTING or RUNNING again (FAILED now: as few as one)."""
    with daemon_setup(stack, tmp_path, mode="enforce") as setup:
        shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        topic = unique(f"{setup.prefix}-topic")
        create_topic(setup.west, topic)
        produce(setup.west, topic, good(range(3)))
        sinks: list[Sink] = []
        try:
            for i in range(5):
                name = f"{setup.prefix}-s{i}"
                out = tmp_path / f"{name}.txt"
                connect.create(name, dlq_json_file_sink(topic, out, setup.dlq))
                sinks.append(Sink(name, topic, out))
            for sink in sinks:
                connect.wait_running(sink.name)
                wait_committed(connect, sink, 3)
            daemon = setup.start()
            poison = produce(setup.west, topic, [POISON, *good([4])])[0]
            for round_ in range(2):
                for sink in sinks:
                    wait_failed(connect, sink)
                for sink in sinks:  # together: one request right after the other
                    response = connect.http.post(
                        connect.path(sink.name, "/restart"),
                        params={"includeTasks": "true", "onlyFailed": "true"},
                    )
                    assert response.status_code == 202, (round_, response.text)
            for sink in sinks:
                wait_failed(connect, sink)
            for sink in sinks:
                held = setup.wait_outcome(sink.name, "suppressed_blast_radius", timeout_s=90)
                assert held["guard"] == "blast_radius"
            # Every skip decision of every sink (the third failure) is held, and audited once.
            time.sleep(8)  # settle (5 s) and the guard's reads: late outcomes would show now
            for sink in sinks:
                skips = [
                    d for d in decisions(setup, sink.name) if d["rule"] == "poison-record-skip"
                ]
                assert len(skips) == 1, skips
                results = setup.outcomes(sink.name)
                by_decision: dict[str, list[str]] = {}
                for r in results:
                    by_decision.setdefault(r["decision_id"], []).append(r["outcome"])
                assert by_decision[skips[0]["id"]] == ["suppressed_blast_radius"], results
                assert all(len(v) == 1 for v in by_decision.values()), by_decision
                assert "executed" not in {o for v in by_decision.values() for o in v}, results
                held = next(r for r in results if r["decision_id"] == skips[0]["id"])
                failing = int(held["message"].split(" connectors failing")[0])
                assert failing >= 5, held["message"]
                assert "(limit 3)" in held["message"]
                assert all(s.name in held["message"] for s in sinks), held["message"]
                assert committed(connect, sink.name) == poison
                assert task_states(connect, sink.name) == ["FAILED"]
            assert ours(setup, setup.quarantined()) == []

            # The shipped rules see every connector of the stack: what other tests left failing
            # is held too. The metric counts every hold of this daemon, and so does its audit.
            def holds() -> int:
                return sum(
                    1
                    for r in setup.audit()
                    if r.get("kind") == "remediation" and r["outcome"] == "suppressed_blast_radius"
                )

            ours_held = sum(
                1
                for s in sinks
                for r in setup.outcomes(s.name)
                if r["outcome"] == "suppressed_blast_radius"
            )
            counted = daemon.metric("offsetd_blast_radius_holds_total", connect_cluster="local")
            assert counted >= ours_held >= len(sinks)
            wait_for(
                "the holds metric to match the audit",
                lambda: (
                    daemon.metric("offsetd_blast_radius_holds_total", connect_cluster="local")
                    == holds()
                ),
                timeout_s=30,
            )
            gauge = daemon.metric(
                "offsetd_blast_radius_failing_connectors", connect_cluster="local"
            )
            assert gauge >= 5
        finally:
            cleanup(connect, *sinks)


def test_a_restart_that_finds_nothing_failed_is_audited_as_not_needed(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """A sink fails at start (its output folder is missing); the rule's restart waits for its
    backoff, and in the meantime the operator fixes the folder and restarts it. The daemon's
    restart then restarts nothing, and must say so."""
    remediation = {"blast_radius": {"max_failing_connectors": 100}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        rules = Path(setup.data["daemon"]["rules_dir"])
        for old in rules.glob("*.yaml"):
            old.unlink()
        rule = {
            "name": "restart-later",
            "description": "Restart this test's failed sinks after 15 s.",
            "mode": "enforce",
            "match": {"kind": "task_status", "state": "FAILED", "connector": f"{setup.prefix}-*"},
            "when": {"count": 1, "within": "10m"},
            "actions": [{"type": "restart-failed-tasks", "backoff": {"initial": "15s"}}],
            "limits": {"budget": {"max": 10, "per": "1h"}, "cooldown": "0s"},
        }
        with (rules / "restart-later.yaml").open("w") as out:
            YAML().dump(rule, out)
        daemon = setup.start()
        topic = unique(f"{setup.prefix}-topic")
        create_topic(setup.west, topic)
        name = f"{setup.prefix}-sink"
        folder = tmp_path / "not-yet"
        sink = Sink(name, topic, folder / "out.txt")
        connect.create(name, json_file_sink(topic, sink.out))
        try:
            wait_failed(connect, sink)
            decision = wait_for(
                "the restart decision",
                lambda: next(iter(decisions(setup, name)), None),
                timeout_s=60,
            )
            assert decision["outcome"] == "planned"
            folder.mkdir()
            response = connect.http.post(
                connect.path(name, "/restart"),
                params={"includeTasks": "true", "onlyFailed": "true"},
            )
            assert response.status_code == 202, response.text
            wait_for("the sink to run", lambda: task_states(connect, name) == ["RUNNING"])
            result = setup.wait_outcome(name, "not_needed", timeout_s=60)
            assert result["decision_id"] == decision["id"]
            assert result["message"].startswith("nothing to restart: connector RUNNING"), result
            posts = [c for c in result["http_calls"] if c["method"] == "POST"]
            assert [(c["path"], c["status"]) for c in posts] == [
                (f"/connectors/{name}/restart", 202)
            ]
            assert [r["outcome"] for r in setup.outcomes(name)] == ["not_needed"]
            assert (
                daemon.metric(
                    "offsetd_remediation_outcomes_total", rule="restart-later", outcome="not_needed"
                )
                == 1
            )
        finally:
            cleanup(connect, sink)
