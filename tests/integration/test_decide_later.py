"""Decisions that depend on what offsetd learns after the event, end to end (issue 13).

- A failure that arrives before offsetd knows the connector: a sink created right after another
  connector changed fails on its first record (no DLQ, `errors.tolerance=none`). The restart
  rule needs `connector_type: sink`, and the cluster-wide metadata refresh (rate-limited, here
  also refused by a FaultProxy for as long as the test runs, so that the race is provoked, not
  left to timing) has not seen the sink. Before: the FAILED status was counted and never decided
  (a failed task sends no further status). Now the event waits, offsetd reads that one
  connector, and the event is decided and acted on.
- A rule whose action did not run does not inhibit others: a skip that cannot locate its record
  (no DLQ names it, one-record batches off, no check: `not_located`) fires on the same FAILED
  status as the restart rule it inhibits, so the restart is always decided while the skip is
  pending and is suppressed (`inhibited`). Before: the restart stayed inhibited for the skip's 15
  minutes while the sink stayed FAILED. Now the skip's outcome gives the inhibition back and the
  restart is decided again, planned and executed.

Each test has its own daemon, topics and rules (matching only its own connectors).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.faultproxy import CLOSE, FaultProxy
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import (
    POISON,
    Setup,
    cleanup,
    daemon_setup,
    good,
    poisoned_sink,
    task_states,
    wait_failed,
)

pytestmark = pytest.mark.integration

FAST_RESTART = {
    "type": "restart-failed-tasks",
    "backoff": {"initial": "1s", "factor": 2, "max": "5s", "reset_after": "30m"},
}


def write_rules(setup: Setup, rules: list[dict[str, Any]]) -> None:
    """This test's rules only (in this order), instead of daemon_setup's skip rule."""
    folder = setup.tmp / "rules"
    for path in folder.glob("*.yaml"):
        path.unlink()
    with (folder / "rules.yaml").open("w") as out:
        YAML().dump(rules, out)


def typed_restart(prefix: str) -> dict[str, Any]:
    """Like the shipped poison-record-restart: needs the connector's type."""
    return {
        "name": "typed-restart",
        "description": "Restart a sink's failed tasks (needs connector metadata).",
        "mode": "enforce",
        "match": {
            "kind": "task_status",
            "state": "FAILED",
            "connector": f"{prefix}-*",
            "connector_type": "sink",
        },
        "when": {"count": 1, "within": "10m"},
        "actions": [FAST_RESTART],
        "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
    }


def decisions(setup: Setup, connector: str, rule: str) -> list[dict[str, Any]]:
    return [
        r
        for r in setup.audit()
        if r.get("kind") is None and r.get("connector") == connector and r["rule"] == rule
    ]


def outcomes(setup: Setup, connector: str, rule: str) -> list[dict[str, Any]]:
    return [r for r in setup.outcomes(connector) if r.get("rule") == rule]


def wait_rule_outcome(
    setup: Setup, connector: str, rule: str, outcome: str, timeout_s: float
) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def probe() -> dict[str, Any] | None:
        setup._alive()
        seen[:] = outcomes(setup, connector, rule)
        return next((r for r in seen if r["outcome"] == outcome), None)

    try:
        return wait_for(f"{connector}: {rule} {outcome}", probe, timeout_s)
    except AssertionError as timed_out:
        shown = [(r.get("outcome"), r.get("message")) for r in seen]
        log = setup.daemon.log()[-6000:] if setup.daemon is not None else ""
        raise AssertionError(f"{timed_out}\noutcomes: {shown}\ndaemon log:\n{log}") from None


def test_a_sink_failing_before_offsetd_knows_it_is_decided_when_its_metadata_arrives(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with (
        FaultProxy(str(connect.http.base_url)) as proxy,
        daemon_setup(stack, tmp_path, mode="enforce", connect_url=proxy.url) as setup,
    ):
        write_rules(setup, [typed_restart(setup.prefix)])
        daemon = setup.start()
        other = f"{setup.prefix}-other"
        sink = f"{setup.prefix}-sink"
        try:
            # From here on the cluster-wide refresh learns nothing (each answer is lost): the
            # rate-limited refresh that would come "a bit later" is as late as can be.
            proxy.inject("GET", r"^/connectors$", CLOSE, times=None, query_regex="expand=info")
            # another connector changes (its status triggers a refresh, which rate-limits the
            # next one) ...
            quiet = unique(f"{setup.prefix}-quiet")
            create_topic(setup.west, quiet)
            connect.create(other, json_file_sink(quiet, tmp_path / "other.txt"))
            # ... and right after, a sink whose very first record is poison (no DLQ)
            topic = unique(f"{setup.prefix}-topic")
            create_topic(setup.west, topic)
            produce(setup.west, topic, [POISON, *good(range(3))])
            connect.create(sink, json_file_sink(topic, tmp_path / "sink.txt"))
            wait_for(f"{sink} to fail", lambda: task_states(connect, sink) == ["FAILED"], 60)
            failed_at = time.monotonic()

            executed = wait_rule_outcome(setup, sink, "typed-restart", "executed", 60)
            took = time.monotonic() - failed_at
            assert took < 45, f"the restart came {took:.0f} s after the failure"
            [first, *_] = decisions(setup, sink, "typed-restart")
            assert first["outcome"] == "planned"
            assert first["inputs"]["trigger"]["state"] == "FAILED"
            assert executed["decision_id"] in {
                d["id"] for d in decisions(setup, sink, "typed-restart")
            }
            # the race was real: the cluster-wide refresh never answered, the one-connector read
            # did, and the event waited for it (the gauge is back to 0 once decided)
            refreshes = [c for c in proxy.faulted() if "expand=info" in c.query]
            assert refreshes, proxy.calls
            reads = [
                c for c in proxy.calls if c.method == "GET" and c.path == f"/connectors/{sink}"
            ]
            assert reads, proxy.calls
            assert reads[0].status == 200, reads
            assert "metadata is known: deciding its waiting events" in daemon.log()
            assert daemon.metric("offsetd_events_waiting_for_metadata", connector=sink) == 0
        finally:
            proxy.clear()
            connect.delete(sink)
            connect.delete(other)


def test_a_skip_that_did_not_run_does_not_inhibit_the_restart(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="enforce") as setup:
        skip = {
            "name": "unlocatable-skip",
            "description": "Skip on FAILED without a record: nothing can locate it here.",
            "mode": "enforce",
            "match": {"kind": "task_status", "state": "FAILED", "connector": f"{setup.prefix}-*"},
            "when": {"count": 1, "within": "10m"},
            "actions": [{"type": "skip-record", "single_record_batches": False}],
            "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
            "inhibits": {"rules": ["typed-restart"], "for": "15m"},
        }
        # the skip first: on the same FAILED status it fires first and inhibits the restart
        write_rules(setup, [skip, typed_restart(setup.prefix)])
        daemon = setup.start()
        sink, _poison = poisoned_sink(connect, setup, good(range(4, 7)))
        try:
            wait_failed(connect, sink)
            located = wait_rule_outcome(setup, sink.name, "unlocatable-skip", "not_located", 90)
            assert located["not_located"] == "no_method", located
            executed = wait_rule_outcome(setup, sink.name, "typed-restart", "executed", 60)
            restarts = decisions(setup, sink.name, "typed-restart")
            by_id = {d["id"]: d for d in restarts}
            decision = by_id[executed["decision_id"]]
            assert decision["outcome"] == "planned"
            # the provoked order: the first restart decision was inhibited by the pending skip
            # (counted in a tally tied to that skip), then decided again when the skip's
            # outcome came back
            skips = decisions(setup, sink.name, "unlocatable-skip")
            first = setup.tallies(sink.name, "typed-restart")[0]
            assert (first["outcome"], first["reason"]) == ("suppressed_inhibited", "inhibited")
            assert first["incident"] in {s["id"] for s in skips}, (first, skips)
            assert "did not run (not_located)" in (decision["detail"] or ""), decision
            assert decision["event_time_ms"] == first["first"]["event_time_ms"]
            assert (
                daemon.metric(
                    "offsetd_decisions_released_total",
                    rule="unlocatable-skip",
                    outcome="not_located",
                )
                >= 1
            )
            # and the restart really reached Connect: the task ran again (and re-failed on the
            # poison record, which no one skipped)
            restarted = [r for r in setup.outcomes(sink.name) if r.get("rule") == "typed-restart"]
            assert any(r["outcome"] == "executed" for r in restarted)
            calls = executed.get("http_calls", [])
            assert any(c["method"] == "POST" and c["path"].endswith("/restart") for c in calls)
        finally:
            cleanup(connect, sink)
