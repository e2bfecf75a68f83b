"""offsetd.engine.later.settle/release: a decision whose action did not run gives back its limits.

The real case (issue 13): the shipped skip rule ended `not_located` and its `inhibits` held the
restart rule off for 15 minutes while the connector stayed FAILED. These tests drive the real
engine (`decide`) and then report an executor outcome as the daemon does (`settle`).
"""

from __future__ import annotations

from typing import cast

import pytest

from offsetd.engine import ConnectorState, Decision
from offsetd.engine.later import (
    NOT_RUN_OUTCOMES,
    OutcomeNews,
    did_not_run,
    outcome_news,
    release,
)
from offsetd.engine.later import settle as settle_news
from offsetd.engine.state import ConnectorState as State
from offsetd.events.decode import Malformed
from offsetd.events.frames import decode_frame, decode_nudge, encode_frame, encode_nudge
from offsetd.rules import RuleSet
from tests.unit.engine.test_engine_decide import (
    MIN,
    RESTART,
    SEC,
    SKIP_BY_RECORD,
    Feed,
    fired_at,
    not_before,
    poison_rules,
    rules,
)


def settle(
    state: State,
    decision: Decision,
    outcome: str,
    rules: RuleSet,
    now: int,
    *,
    would_be: str | None = None,
) -> list[Decision]:
    """What the daemon does with the executor's outcome (the nudge's news)."""
    return settle_news(state, outcome_news(decision, outcome, would_be), rules, now)


def skip_then_failed(f: Feed) -> tuple[Decision, Decision]:
    """Three DLQ events fire the skip (which inhibits restarts); the FAILED status 1 s later is
    suppressed by that inhibition: the race of Connect's DLQ record before the FAILED status."""
    out: list[Decision] = []
    for t in (0, 1 * MIN, 2 * MIN):
        out += f.feed(f.dlq(t), now=2 * MIN)
    [skip] = out
    [restart] = f.feed(f.task(2 * MIN + SEC))
    assert (skip.rule, skip.outcome) == ("skip", "planned")
    assert (restart.rule, restart.outcome, restart.reason) == ("restart", "suppressed", "inhibited")
    return skip, restart


def test_a_skip_that_was_not_located_lets_the_restart_it_held_back_run() -> None:
    f = Feed(poison_rules())
    skip, held = skip_then_failed(f)
    now = 2 * MIN + 3 * SEC
    [again] = settle(f.state, skip, "not_located", f.rules, now)
    assert (again.rule, again.outcome, again.reason) == ("restart", "planned", None)
    assert again.id != held.id  # a new decision: the suppressed one is in the audit already
    assert again.event_time_ms == held.event_time_ms
    assert again.decided_at_ms == now
    assert skip.id in (again.detail or "")
    assert "not_located" in (again.detail or "")
    assert not_before(again) == 2 * MIN + SEC + 30 * SEC  # the backoff from the failure
    assert f.state.inhibitions == {}
    assert f.state.held == []
    # the skip's cooldown and budget entry are given back too
    assert f.state.rules["skip"]["executed"] == []
    assert f.state.rules["skip"]["last_executed_ms"] is None
    # and a later failure is planned, not inhibited
    assert fired_at(f.feed(f.task(3 * MIN))) == [("restart", 3 * MIN, "planned")]


def test_a_skip_that_ran_keeps_inhibiting_and_its_held_decisions_are_dropped() -> None:
    f = Feed(poison_rules())
    skip, _held = skip_then_failed(f)
    assert settle(f.state, skip, "executed", f.rules, 2 * MIN + 3 * SEC) == []
    assert "restart" in f.state.inhibitions
    assert f.state.held == []
    assert f.feed(f.task(3 * MIN))[0].reason == "inhibited"


def test_awaiting_approval_is_not_an_end() -> None:
    f = Feed(poison_rules())
    skip, _held = skip_then_failed(f)
    assert settle(f.state, skip, "awaiting_approval", f.rules, 2 * MIN + 3 * SEC) == []
    assert "restart" in f.state.inhibitions
    assert len(f.state.held) == 1
    # rejected later: released then
    [again] = settle(f.state, skip, "rejected", f.rules, 2 * MIN + 30 * SEC)
    assert again.outcome == "planned"


def test_a_dry_run_is_released_only_if_enforce_would_not_have_run_it() -> None:
    """Observe mode shows what enforce would do: a dry run enforce would have executed keeps
    its limits; one a guard would have held gives them back, as enforce would have."""
    assert not did_not_run("dry_run", "executed")
    assert did_not_run("dry_run", "suppressed_blast_radius")
    assert not did_not_run("executed")
    assert not did_not_run("failed")
    assert {"not_located", "aborted", "rejected", "suppressed_skip_pending"} <= NOT_RUN_OUTCOMES
    f = Feed(poison_rules())
    skip, _ = skip_then_failed(f)
    assert settle(f.state, skip, "dry_run", f.rules, 2 * MIN + 2 * SEC, would_be="executed") == []
    assert "restart" in f.state.inhibitions
    g = Feed(poison_rules())
    skip, _ = skip_then_failed(g)
    again = settle(g.state, skip, "dry_run", g.rules, 2 * MIN + 2 * SEC, would_be="breaker_open")
    assert fired_at(again) == [("restart", 2 * MIN + SEC, "planned")]


def test_a_release_is_idempotent_after_a_replay() -> None:
    """The outcome's nudge is read again after a crash: the second one finds nothing to give."""
    f = Feed(poison_rules())
    skip, _ = skip_then_failed(f)
    first = settle(f.state, skip, "not_located", f.rules, 2 * MIN + 3 * SEC)
    snapshot = f.state.model_dump()
    assert len(first) == 1
    news = outcome_news(skip, "not_located")
    assert settle(f.state, skip, "not_located", f.rules, 2 * MIN + 4 * SEC) == []
    assert release(f.state, news, f.rules, 2 * MIN + 4 * SEC) == []
    assert f.state.model_dump() == snapshot
    # and through the state's JSON (the Table) as well
    restored = ConnectorState.from_json(f.state.to_json())
    assert release(restored, news, f.rules, 2 * MIN + 4 * SEC) == []
    assert restored.model_dump() == snapshot


def test_the_re_decided_decision_has_a_stable_id() -> None:
    ids = []
    for _ in range(2):
        f = Feed(poison_rules())
        skip, _ = skip_then_failed(f)
        [again] = settle(f.state, skip, "not_located", f.rules, 2 * MIN + 3 * SEC)
        ids.append(again.id)
    assert ids[0] == ids[1]


def test_a_held_decision_past_its_window_is_not_decided_again() -> None:
    restart = {**RESTART, "when": {"count": 1, "within": "1m"}}
    skip = {**SKIP_BY_RECORD, "inhibits": {"rules": "restart", "for": "15m"}}
    f = Feed(rules(restart, skip))
    skip_decision, _ = skip_then_failed(f)
    assert settle(f.state, skip_decision, "not_located", f.rules, 4 * MIN) == []
    assert f.state.inhibitions == {}
    assert f.state.held == []


def test_a_released_restart_gives_back_its_backoff_step_and_cooldown() -> None:
    restart = {**RESTART, "limits": {"cooldown": "5m", "budget": {"max": 100, "per": "1h"}}}
    f = Feed(rules(restart))
    [first] = f.feed(f.task(0))
    assert f.state.restart_backoff == {"attempts": 1, "last_ms": 0}
    assert f.feed(f.task(1 * MIN))[0].reason == "cooldown"
    assert settle(f.state, first, "suppressed_blast_radius", f.rules, 1 * MIN) == []
    assert f.state.restart_backoff is None
    assert f.state.rules["restart"]["last_executed_ms"] is None
    [second] = f.feed(f.task(2 * MIN))
    assert second.outcome == "planned"
    assert second.actions[0].params["attempt"] == 0  # not 1: the first restart never happened


def test_a_release_after_a_later_decision_keeps_that_ones_limits() -> None:
    f = Feed(rules(RESTART))
    [first] = f.feed(f.task(0))
    [second] = f.feed(f.task(1 * MIN))
    assert f.state.restart_backoff == {"attempts": 2, "last_ms": 1 * MIN}
    settle(f.state, first, "not_needed", f.rules, 1 * MIN)
    assert f.state.restart_backoff == {"attempts": 1, "last_ms": 1 * MIN}  # one step fewer
    assert f.state.rules["restart"]["executed"] == [1 * MIN]
    assert f.state.rules["restart"]["last_executed_ms"] == 1 * MIN
    # a second report of the first one changes nothing
    settle(f.state, first, "not_needed", f.rules, 1 * MIN)
    assert f.state.restart_backoff == {"attempts": 1, "last_ms": 1 * MIN}
    assert f.state.rules["restart"]["executed"] == [1 * MIN]
    assert second.outcome == "planned"


def test_a_later_inhibition_by_the_same_rule_is_kept() -> None:
    skip = {
        **SKIP_BY_RECORD,
        "when": {"count": 1, "within": "10m", "key": ["connector", "record"]},
        "inhibits": {"rules": "restart", "for": "15m"},
        "limits": {"cooldown": "0s"},
    }
    f = Feed(rules(RESTART, skip))
    [first] = f.feed(f.dlq(0, 1200))
    [second] = f.feed(f.dlq(1 * MIN, 1300))
    settle(f.state, first, "not_located", f.rules, 1 * MIN)
    assert f.state.inhibitions["restart"]["since_ms"] == 1 * MIN  # the second skip's own
    assert second.outcome == "planned"


def test_released_ids_are_pruned_when_their_limits_expire() -> None:
    f = Feed(rules(RESTART))
    [first] = f.feed(f.task(0))
    settle(f.state, first, "suppressed_opt_out", f.rules, 1 * SEC)
    assert first.id in f.state.released
    f.feed(f.task(2 * 3600 * SEC))  # past the budget window (1h) and the backoff reset (30m)
    assert first.id not in f.state.released


def test_an_ended_inhibition_drops_the_held_decision() -> None:
    """STOPPED then RUNNING: the skip went through; nothing is left to decide again."""
    f = Feed(poison_rules())
    skip_then_failed(f)
    assert len(f.state.held) == 1
    f.feed(f.connector(2 * MIN + 10 * SEC, "STOPPED"))
    f.feed(f.connector(2 * MIN + 20 * SEC, "RUNNING"))
    f.feed(f.task(3 * MIN + 30 * SEC, "RUNNING"))  # the next sweep
    assert f.state.held == []


def test_only_the_latest_held_decision_per_rule_is_kept() -> None:
    f = Feed(poison_rules())
    skip, _ = skip_then_failed(f)
    [later] = f.feed(f.task(2 * MIN + 5 * SEC, task_id=1))
    assert later.reason == "inhibited"
    assert [h["decision"]["id"] for h in f.state.held] == [later.id]
    [again] = settle(f.state, skip, "aborted", f.rules, 2 * MIN + 6 * SEC)
    assert again.task_id == 1


def test_the_outcome_travels_as_a_nudge_on_the_events_topic() -> None:
    """What app.py sends (encode_nudge) and what the owner applies (decode_nudge, settle): a
    nudge is told apart from a frame by its first byte, and survives the JSON round trip."""
    f = Feed(poison_rules())
    skip, _ = skip_then_failed(f)
    value = encode_nudge({"type": "outcome", "outcome": outcome_news(skip, "not_located")})
    assert decode_nudge(encode_frame([])) is None  # a frame is not a nudge ...
    with pytest.raises(Malformed):
        decode_frame(value)  # ... nor a nudge a frame
    news = decode_nudge(value)
    assert news is not None
    assert news["type"] == "outcome"
    told = cast(OutcomeNews, news["outcome"])
    [again] = settle_news(f.state, told, f.rules, 2 * MIN + 3 * SEC)
    assert again.rule == "restart"
    with pytest.raises(Malformed):
        decode_nudge(b"\x02{not json")


def test_a_paused_decision_keeps_its_limits_until_it_ran_or_was_not_needed() -> None:
    """The pause holds a decision for after the resume: its limits stay meanwhile; if it is
    then not needed (the failure went away), they are given back."""
    f = Feed(rules(RESTART))
    [first] = f.feed(f.task(0))
    settle(f.state, first, "suppressed_paused", f.rules, 1 * SEC)
    assert first.id not in f.state.released
    assert f.state.restart_backoff is not None
    assert f.state.restart_backoff["attempts"] == 1
    settle(f.state, first, "not_needed", f.rules, 2 * SEC)
    assert first.id in f.state.released
