"""The guardrails (pure): each guard, their order, the breaker helper and the control state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from offsetd.config import RemediationSettings
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.events.models import RecordRef, SourceRecord
from offsetd.metrics.instruments import REMEDIATION_OUTCOMES, RemediationMetrics
from offsetd.offsets.registry import write_refusal_for
from offsetd.remediation.control import publish_gauges
from offsetd.remediation.control_state import (
    Approval,
    ControlState,
    approval_record,
    breaker_record,
    optout_record,
    pause_record,
    skips_record,
)
from offsetd.remediation.guards import (
    PROCEED,
    GuardContext,
    StatusSample,
    Verdict,
    WritePermit,
    class_allowed,
    count_failing,
    evaluate,
    failing_now,
    failing_within,
    open_breaker_if_recent_skip,
)

NOW = 10_000_000
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
MM2 = "org.apache.kafka.connect.mirror.MirrorSourceConnector"


def decision(
    *,
    mode: str = "enforce",
    actions: tuple[str, ...] = ("skip-record",),
    outcome: str = "planned",
    reason: str | None = None,
    connector: str = "orders-sink",
    id: str = "d1",
) -> Decision:
    source = SourceRecord(topic="connect-status", partition=0, offset=7, timestamp_ms=NOW)
    return Decision(
        id=id,
        rule="skip-poison",
        mode=mode,
        connect_cluster="local",
        connector=connector,
        task_id=0,
        key="connector=orders-sink",
        actions=tuple(PlannedAction(type=a, params={}) for a in actions),
        record=RecordRef(topic="orders", partition=0, offset=41),
        record_status="exact",
        outcome=outcome,
        reason=reason,
        detail=None if reason is None else f"engine said {reason}",
        event_time_ms=NOW,
        decided_at_ms=NOW,
        inputs=DecisionInputs(
            events=(source,), trigger=EventSummary(kind="task_status", state="FAILED")
        ),
    )


def ctx(
    state: ControlState | None = None,
    *,
    settings: RemediationSettings | None = None,
    connector_class: str | None = SINK,
    connector_type: str | None = "sink",
    orchestrator: str = "none",
    failing: int | None = 1,
) -> GuardContext:
    return GuardContext(
        settings=settings or RemediationSettings(),
        control=state or ControlState(),
        connector_class=connector_class,
        connector_type=connector_type,
        offsets_refusal=write_refusal_for("local", orchestrator),
        failing_connectors=failing,
        now_ms=NOW,
    )


def state_with(*records: Any) -> ControlState:
    state = ControlState()
    for record in records:
        state.apply_record(record)
    return state


def check(verdict: Verdict, outcome: str, guard: str) -> None:
    assert (verdict.outcome, verdict.guard) == (outcome, guard), verdict
    if outcome != PROCEED:
        assert outcome in REMEDIATION_OUTCOMES
        assert verdict.permit is None
        assert not verdict.proceed


# -- each guard ---------------------------------------------------------------------------------


def test_all_clear_in_enforce_mode_proceeds_with_a_permit() -> None:
    verdict = evaluate(decision(), ctx())
    check(verdict, PROCEED, "none")
    assert verdict.proceed
    assert verdict.permit is not None
    assert verdict.permit.decision_id == "d1"


def test_a_permit_cannot_be_made_outside_the_guards() -> None:
    with pytest.raises(TypeError):
        WritePermit("d1", object())


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("disabled", "suppressed_disabled"),
        ("inhibited", "suppressed_inhibited"),
        ("cooldown", "suppressed_cooldown"),
        ("budget", "suppressed_budget"),
    ],
)
def test_engine_suppressions_map_to_explicit_outcomes(reason: str, outcome: str) -> None:
    verdict = evaluate(decision(outcome="suppressed", reason=reason), ctx())
    check(verdict, outcome, "engine")
    assert verdict.detail == f"engine said {reason}"


def test_observe_is_a_dry_run_that_says_what_enforce_would_do() -> None:
    clear = evaluate(decision(mode="observe"), ctx())
    check(clear, "dry_run", "mode")
    assert clear.would_be == "executed"
    paused = state_with(pause_record(True, "alice", NOW - 1, "db migration"))
    held = evaluate(decision(mode="observe"), ctx(paused))
    check(held, "dry_run", "mode")
    assert held.would_be == "suppressed_paused"
    assert "alice" in held.detail


def test_observe_never_gets_a_permit_even_when_approved() -> None:
    approved = state_with(
        approval_record(
            Approval("d1", "approved", "skip-poison", "local", "orders-sink", "s", NOW, "bob", NOW)
        )
    )
    verdict = evaluate(decision(mode="observe"), ctx(approved))
    check(verdict, "dry_run", "mode")


def test_strimzi_clusters_are_refused() -> None:
    check(evaluate(decision(), ctx(orchestrator="strimzi")), "refused_strimzi", "strimzi")


def test_global_pause_suppresses_and_resume_lifts_it() -> None:
    paused = state_with(pause_record(True, "alice", NOW - 5, "maintenance"))
    verdict = evaluate(decision(), ctx(paused))
    check(verdict, "suppressed_paused", "pause")
    assert "alice" in verdict.detail
    assert "maintenance" in verdict.detail
    paused.apply_record(pause_record(False, "bob", NOW - 1))
    check(evaluate(decision(), ctx(paused)), PROCEED, "none")


def test_opt_out_by_config_glob_and_by_command() -> None:
    settings = RemediationSettings(opt_out=["orders-*"])
    check(evaluate(decision(), ctx(settings=settings)), "suppressed_opt_out", "opt_out")
    state = state_with(optout_record("local", "orders-sink", opted_out=True, by="al", at_ms=NOW))
    check(evaluate(decision(), ctx(state)), "suppressed_opt_out", "opt_out")
    state.apply_record(optout_record("local", "orders-sink", opted_out=False, by="al", at_ms=NOW))
    check(evaluate(decision(), ctx(state)), PROCEED, "none")
    other_cluster = state_with(
        optout_record("other", "orders-sink", opted_out=True, by="al", at_ms=NOW)
    )
    check(evaluate(decision(), ctx(other_cluster)), PROCEED, "none")


def test_open_breaker_holds_until_reset() -> None:
    state = state_with(
        breaker_record("local", "orders-sink", open=True, by="offsetd", at_ms=NOW, why="again")
    )
    verdict = evaluate(decision(actions=("restart-failed-tasks",)), ctx(state))
    check(verdict, "breaker_open", "breaker")
    assert "offsetd breaker reset orders-sink" in verdict.detail
    state.apply_record(
        breaker_record("local", "orders-sink", open=False, by="bob", at_ms=NOW, why="reset")
    )
    check(evaluate(decision(), ctx(state)), PROCEED, "none")


@pytest.mark.parametrize(
    ("connector_class", "connector_type", "allowed"),
    [
        (SINK, "sink", True),
        (MM2, "source", True),
        (SOURCE, "source", False),
        (None, None, False),
        ("com.example.IcebergSink", "unknown", False),
    ],
)
def test_skip_allowlist_defaults(
    connector_class: str | None, connector_type: str | None, allowed: bool
) -> None:
    verdict = evaluate(
        decision(), ctx(connector_class=connector_class, connector_type=connector_type)
    )
    if allowed:
        check(verdict, PROCEED, "none")
    else:
        check(verdict, "refused_not_allowed", "allowlist")


def test_allowlist_globs_and_only_offset_moving_actions() -> None:
    only_mm2 = RemediationSettings(skip_allowlist=["org.apache.kafka.connect.mirror.*"])
    assert class_allowed(only_mm2, MM2, "source")
    assert not class_allowed(only_mm2, SINK, "sink")  # `sink` is not in this list
    check(evaluate(decision(), ctx(settings=only_mm2)), "refused_not_allowed", "allowlist")
    check(
        evaluate(decision(actions=("rewind",)), ctx(settings=only_mm2)),
        "refused_not_allowed",
        "allowlist",
    )
    restart = decision(actions=("restart-failed-tasks",))
    check(evaluate(restart, ctx(connector_class=SOURCE, connector_type="source")), PROCEED, "none")


def test_blast_radius_above_the_limit_and_unknown_count() -> None:
    settings = RemediationSettings(blast_radius={"max_failing_connectors": 2})
    check(evaluate(decision(), ctx(settings=settings, failing=2)), PROCEED, "none")
    verdict = evaluate(decision(), ctx(settings=settings, failing=3))
    check(verdict, "suppressed_blast_radius", "blast_radius")
    assert "3 connectors failing" in verdict.detail
    check(
        evaluate(decision(actions=("restart-failed-tasks",)), ctx(settings=settings, failing=3)),
        "suppressed_blast_radius",
        "blast_radius",
    )
    check(
        evaluate(decision(), ctx(settings=settings, failing=None)),
        "suppressed_blast_radius",
        "blast_radius",
    )


def test_skip_budget_counts_the_durable_history_within_the_window() -> None:
    settings = RemediationSettings(skip_budget={"max": 2, "per": "1h"})
    state = ControlState()
    state.apply_record(skips_record(state, "local", "orders-sink", NOW - 3_600_000, 3_600_000))
    state.apply_record(skips_record(state, "local", "orders-sink", NOW - 60_000, 3_600_000))
    # the first skip is exactly one window old: it no longer counts
    assert state.skips_within("local", "orders-sink", NOW, 3_600_000) == 1
    check(evaluate(decision(), ctx(state, settings=settings)), PROCEED, "none")
    state.apply_record(skips_record(state, "local", "orders-sink", NOW - 1000, 3_600_000))
    verdict = evaluate(decision(), ctx(state, settings=settings))
    check(verdict, "suppressed_budget", "skip_budget")
    # the budget is about skips: a restart still goes
    check(
        evaluate(decision(actions=("restart-failed-tasks",)), ctx(state, settings=settings)),
        PROCEED,
        "none",
    )
    # and it is per connector
    check(evaluate(decision(connector="other"), ctx(state, settings=settings)), PROCEED, "none")


def test_approve_mode_waits_then_proceeds_or_is_rejected() -> None:
    waiting = evaluate(decision(mode="approve"), ctx())
    check(waiting, "awaiting_approval", "approval")
    assert "offsetd approve d1" in waiting.detail
    pending = Approval("d1", "pending", "skip-poison", "local", "orders-sink", "s", NOW)
    state = state_with(approval_record(pending))
    check(evaluate(decision(mode="approve"), ctx(state)), "awaiting_approval", "approval")
    state.apply_record(
        approval_record(
            Approval("d1", "approved", "skip-poison", "local", "orders-sink", "s", NOW, "bob", NOW)
        )
    )
    approved = evaluate(decision(mode="approve"), ctx(state))
    check(approved, PROCEED, "approval")
    assert approved.proceed
    assert "bob" in approved.detail
    # an approval is for one decision id only
    check(evaluate(decision(mode="approve", id="d2"), ctx(state)), "awaiting_approval", "approval")
    state.apply_record(
        approval_record(
            Approval("d1", "rejected", "skip-poison", "local", "orders-sink", "s", NOW, "eve", NOW)
        )
    )
    check(evaluate(decision(mode="approve"), ctx(state)), "rejected", "approval")


def test_notify_only_decisions_pass_the_connect_guards() -> None:
    state = state_with(
        pause_record(True, "alice", NOW),
        breaker_record("local", "orders-sink", open=True, by="offsetd", at_ms=NOW, why="x"),
    )
    verdict = evaluate(
        decision(actions=("notify",)), ctx(state, failing=50, orchestrator="strimzi")
    )
    check(verdict, PROCEED, "none")


# -- order --------------------------------------------------------------------------------------


def test_guard_order_first_holding_guard_wins() -> None:
    """Every guard holds at once; removing them one by one reveals the documented order."""
    settings = RemediationSettings(
        blast_radius={"max_failing_connectors": 1}, skip_budget={"max": 1, "per": "1h"}
    )
    state = state_with(
        pause_record(True, "alice", NOW),
        optout_record("local", "orders-sink", opted_out=True, by="al", at_ms=NOW),
        breaker_record("local", "orders-sink", open=True, by="offsetd", at_ms=NOW, why="x"),
        skips_record(ControlState(), "local", "orders-sink", NOW - 10, 3_600_000),
        approval_record(
            Approval("d1", "rejected", "skip-poison", "local", "orders-sink", "s", NOW, "eve", NOW)
        ),
    )
    everything: dict[str, Any] = {
        "orchestrator": "strimzi",
        "connector_class": SOURCE,
        "connector_type": "source",
        "failing": 5,
    }
    d = decision(mode="approve")
    assert (
        evaluate(
            decision(mode="approve", outcome="suppressed", reason="cooldown"),
            ctx(state, settings=settings, **everything),
        ).guard
        == "engine"
    )
    order = []
    lifts: list[tuple[str, Callable[[], object]]] = [
        ("strimzi", lambda: everything.update(orchestrator="none")),
        ("pause", lambda: state.apply_record(pause_record(False, "bob", NOW))),
        (
            "opt_out",
            lambda: state.apply_record(
                optout_record("local", "orders-sink", opted_out=False, by="b", at_ms=NOW)
            ),
        ),
        (
            "breaker",
            lambda: state.apply_record(
                breaker_record("local", "orders-sink", open=False, by="b", at_ms=NOW, why="r")
            ),
        ),
        ("allowlist", lambda: everything.update(connector_class=SINK, connector_type="sink")),
        ("blast_radius", lambda: everything.update(failing=1)),
        ("skip_budget", state.skips.clear),
        ("approval", lambda: None),
    ]
    for _guard, lift in lifts:
        order.append(evaluate(d, ctx(state, settings=settings, **everything)).guard)
        lift()
    assert order == [g for g, _ in lifts]
    assert evaluate(d, ctx(state, settings=settings, **everything)).outcome == "rejected"


# -- the breaker helper -------------------------------------------------------------------------


def test_failure_soon_after_a_skip_at_the_skipped_record_opens_the_breaker() -> None:
    settings = RemediationSettings(breaker_window="10m")
    state = ControlState()
    skip_at = NOW - 100_000
    state.apply_record(
        skips_record(state, "local", "orders-sink", skip_at, 3_600_000, record="orders-0@41")
    )
    record = open_breaker_if_recent_skip(
        state, settings, "local", "orders-sink", skip_at + 30_000, record="orders-0@41",
        decision_id="d9",
    )  # fmt: skip
    assert record is not None
    assert record.key == "breaker/local/orders-sink"
    assert record.value["open"] is True
    assert record.value["decision_id"] == "d9"
    assert "30.0 s after a skip, at orders-0@41" in record.value["why"]
    assert "the failure did not move" in record.value["why"]
    state.apply_record(record)
    assert state.open_breaker("local", "orders-sink") is not None
    # already open: nothing more to write
    assert (
        open_breaker_if_recent_skip(
            state, settings, "local", "orders-sink", NOW, record="orders-0@41"
        )
        is None
    )


@pytest.mark.parametrize(
    ("failure", "opens"),
    [
        ("orders-0@41", True),  # the skipped record again: the skip did not help
        ("orders-0@12", True),  # before it: the offsets went back
        ("orders-0@42", False),  # the next record: a new poison record, not a failed skip
        ("orders-1@3", False),  # another partition
        (None, False),  # no record named (a status): judged where it is located
    ],
)
def test_only_a_failure_that_did_not_move_opens_the_breaker(
    failure: str | None, opens: bool
) -> None:
    settings = RemediationSettings(breaker_window="10m")
    state = ControlState()
    state.apply_record(
        skips_record(state, "local", "orders-sink", NOW, 3_600_000, record="orders-0@41")
    )
    record = open_breaker_if_recent_skip(
        state, settings, "local", "orders-sink", NOW + 1_000, record=failure
    )
    assert (record is not None) is opens


@pytest.mark.parametrize(
    ("failure_delta_ms", "opens"),
    [(-1, False), (0, False), (1, True), (600_000, True), (600_001, False)],
)
def test_breaker_window_edges(failure_delta_ms: int, opens: bool) -> None:
    """The failure that was skipped (at or before the skip) never counts; the window is closed."""
    settings = RemediationSettings(breaker_window="10m")
    state = ControlState()
    state.apply_record(skips_record(state, "local", "orders-sink", NOW, 3_600_000, record="t-0@5"))
    record = open_breaker_if_recent_skip(
        state, settings, "local", "orders-sink", NOW + failure_delta_ms, record="t-0@5"
    )
    assert (record is not None) is opens


def test_no_skip_no_breaker() -> None:
    assert (
        open_breaker_if_recent_skip(ControlState(), RemediationSettings(), "local", "x", NOW)
        is None
    )


# -- the control state --------------------------------------------------------------------------


def test_control_state_folds_latest_values_and_ignores_garbage() -> None:
    state = ControlState()
    state.apply("pause", {"paused": True, "by": "a", "at_ms": 1, "reason": "r"})
    state.apply("pause", {"paused": False, "by": "b", "at_ms": 2})
    assert state.paused is None
    assert state.pause is not None
    assert state.pause.by == "b"
    state.apply("nonsense/key", {"x": 1})
    state.apply("breaker/only-one-part", {"open": True})
    state.apply("approval/d1", {"status": "maybe"})
    state.apply("skips/local/c", {"times_ms": "not a list of ints"})
    assert state.ignored == 4
    assert not state.approvals
    assert not state.breakers
    assert not state.skips
    state.apply("optout/local/a/b", {"opted_out": True, "by": "x", "at_ms": 3})
    assert state.opt_out("local", "a/b") is not None  # connector names may contain '/'
    state.apply("optout/local/a/b", None)
    assert state.opt_out("local", "a/b") is None


def test_skip_history_is_pruned_when_written() -> None:
    state = ControlState()
    for at in (0, 10, 20):
        state.apply_record(skips_record(state, "local", "c", at, 15))
    assert state.skip_times("local", "c") == (10, 20)
    assert state.last_skip("local", "c") == 20


def test_pending_approvals_are_listed_oldest_first() -> None:
    state = state_with(
        approval_record(Approval("b", "pending", "r", "local", "c", "s", 20)),
        approval_record(Approval("a", "pending", "r", "local", "c", "s", 10)),
        approval_record(Approval("c", "approved", "r", "local", "c", "s", 5, "x", 6)),
    )
    assert [a.decision_id for a in state.pending_approvals()] == ["a", "b"]


def test_gauges_follow_the_state() -> None:
    registry = CollectorRegistry()
    metrics = RemediationMetrics.create(registry)
    state = state_with(
        pause_record(True, "alice", NOW),
        breaker_record("local", "a", open=True, by="offsetd", at_ms=NOW, why="x"),
        breaker_record("local", "b", open=False, by="bob", at_ms=NOW, why="reset"),
    )
    publish_gauges(state, metrics)
    assert registry.get_sample_value("offsetd_automation_paused") == 1
    labels = {"connect_cluster": "local"}
    assert registry.get_sample_value("offsetd_breaker_open", {**labels, "connector": "a"}) == 1
    assert registry.get_sample_value("offsetd_breaker_open", {**labels, "connector": "b"}) == 0
    state.apply_record(pause_record(False, "bob", NOW))
    publish_gauges(state, metrics)
    assert registry.get_sample_value("offsetd_automation_paused") == 0


def test_count_failing_counts_a_connector_once_whether_it_or_its_tasks_failed() -> None:
    def entry(connector: str, *tasks: str) -> dict[str, object]:
        return {
            "status": {
                "connector": {"state": connector},
                "tasks": [{"id": i, "state": t} for i, t in enumerate(tasks)],
            }
        }

    expanded = {
        "a": entry("RUNNING", "RUNNING"),
        "b": entry("RUNNING", "FAILED", "FAILED"),
        "c": entry("FAILED"),
        "d": entry("PAUSED", "RUNNING", "FAILED"),
        "e": {"status": None},  # just created: no status yet
    }
    assert count_failing(expanded) == 3
    assert count_failing({}) == 0
    assert failing_now(expanded) == {"b", "c", "d"}


# -- the blast radius's window ------------------------------------------------------------------

MINUTE = 60_000


def test_failures_within_the_window_count_although_the_connectors_run_again() -> None:
    """Five sinks failed a minute ago and are being restarted: now none is FAILED, the window
    still holds five. This is the moment an outage looks smallest to a count of the present."""
    samples = [StatusSample(f"s{i}", "FAILED", NOW - MINUTE + i) for i in range(5)]
    samples += [StatusSample(f"s{i}", "RUNNING", NOW - 1000) for i in range(5)]
    existing = {f"s{i}" for i in range(5)} | {"quiet"}
    assert failing_within(samples, NOW, 5 * MINUTE, existing=existing) == {
        "s0",
        "s1",
        "s2",
        "s3",
        "s4",
    }


def test_a_connector_failing_in_a_loop_counts_once() -> None:
    samples = [StatusSample("loop", "FAILED", NOW - i * 1000) for i in range(50)]
    assert failing_within(samples, NOW, 5 * MINUTE, existing={"loop"}) == {"loop"}


def test_failures_older_than_the_window_and_other_states_do_not_count() -> None:
    samples = [
        StatusSample("old", "FAILED", NOW - 5 * MINUTE - 1),
        StatusSample("edge", "FAILED", NOW - 5 * MINUTE),
        StatusSample("paused", "PAUSED", NOW),
        StatusSample("gone", None, NOW),  # a tombstone
    ]
    existing = {"old", "edge", "paused", "gone"}
    assert failing_within(samples, NOW, 5 * MINUTE, existing=existing) == {"edge"}


def test_deleted_connectors_do_not_count_and_failing_now_adds_the_rest() -> None:
    """A connector deleted since its failure is no outage of this cluster; one failing now
    counts even when its FAILED record is older than the window (it never recovered)."""
    samples = [StatusSample("deleted", "FAILED", NOW), StatusSample("recent", "FAILED", NOW)]
    found = failing_within(
        samples,
        NOW,
        5 * MINUTE,
        existing={"recent", "stuck"},
        failing={"stuck", "deleted-too"},
    )
    assert found == {"recent", "stuck"}


def test_the_blast_radius_verdict_names_the_window_and_the_connectors() -> None:
    settings = RemediationSettings(blast_radius={"max_failing_connectors": 3, "within": "2m"})
    names = tuple(f"sink-{i}" for i in range(12))
    context = GuardContext(
        settings=settings,
        control=ControlState(),
        connector_class=SINK,
        connector_type="sink",
        offsets_refusal=None,
        failing_connectors=len(names),
        now_ms=NOW,
        failing_names=names,
    )
    verdict = evaluate(decision(), context)
    check(verdict, "suppressed_blast_radius", "blast_radius")
    assert verdict.detail.startswith("12 connectors failing on local now or within the last 120 s")
    assert "(limit 3): sink-0, sink-1" in verdict.detail
    assert "sink-9 and 2 more" in verdict.detail
    assert "sink-10" not in verdict.detail
