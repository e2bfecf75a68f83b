"""offsetd.engine.tally: suppressed decisions counted, planned ones never hidden, counts exact."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.engine import ConnectorState, Decision
from offsetd.engine.decide import decide_firings
from offsetd.engine.decision import Suppression
from offsetd.engine.tally import fold_suppressed, tally_record
from tests.unit.engine.test_engine_decide import MIN, SEC, Feed, rules

WINDOW = 10 * MIN


def storm_rules() -> Any:
    """A count-1 rule with a cooldown and a budget (fires on every failure), and a rule it
    inhibits: the shape of the shipped poison-record rules in a DLQ storm."""
    return rules(
        {
            "name": "skip",
            "match": {"kind": "dlq_record"},
            "when": {"count": 1, "within": "10m"},
            "limits": {"cooldown": "2m", "budget": {"max": 2, "per": "1h"}},
            "inhibits": {"rules": ["restart"], "for": "15m"},
        },
        {
            "name": "restart",
            "match": {"kind": "task_status", "state": "FAILED"},
            "when": {"count": 1, "within": "10m"},
        },
    )


def latest_versions(written: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a compacted audit topic keeps: the last record per id, which must never hold a
    smaller count than a version written before it."""
    latest: dict[str, dict[str, Any]] = {}
    for record in written:
        before = latest.get(record["id"])
        assert before is None or record["count"] > before["count"], (before, record)
        latest[record["id"]] = record
    return latest


STEPS = (1, 50, 500, 5 * SEC, 40 * SEC, 3 * MIN)


def random_event(feed: Feed, rng: random.Random, t: int) -> Any:
    """A DLQ record (60 %), a FAILED task status (30 %), or the connector STOPPED or RUNNING
    (which ends an inhibition early, mid-frame)."""
    draw = rng.random()
    if draw < 0.6:
        return feed.dlq(t, record_offset=rng.randrange(20))
    if draw < 0.9:
        return feed.task(t)
    return feed.connector(t, "STOPPED" if draw < 0.95 else "RUNNING")


def run_storm(
    seed: int, events: int, batch: int, steps: tuple[int, ...] = STEPS
) -> tuple[list[Decision], list[Decision], Any]:
    """Feed a random mix of DLQ records and FAILED statuses, folding each batch's decisions as
    the daemon does; return every decision made, the planned ones kept, the audit."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    feed = Feed(storm_rules())
    made: list[Decision] = []
    kept: list[Decision] = []
    written: list[dict[str, Any]] = []
    t = 0
    pending: list[Decision] = []
    for i in range(events):
        t += rng.choice(steps)
        event = random_event(feed, rng, t)
        pending += feed.feed(event)
        if (i + 1) % batch == 0 or i == events - 1:
            made += pending
            planned, tallies = fold_suppressed(feed.state, pending, WINDOW)
            kept += planned
            written += [tally_record(feed.state, tally, WINDOW) for tally in tallies]
            pending = []
    return made, kept, latest_versions(written)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), events=st.integers(1, 400), batch=st.integers(1, 70))
def test_counts_add_up_and_no_planned_decision_is_hidden(
    seed: int, events: int, batch: int
) -> None:
    made, kept, audit = run_storm(seed, events, batch)
    planned = [d for d in made if d.outcome == "planned"]
    suppressed = [d for d in made if d.outcome == "suppressed"]
    assert kept == planned  # every planned decision, in order, as it was
    assert sum(r["count"] for r in audit.values()) == len(suppressed)
    for reason in ("inhibited", "cooldown", "budget"):
        counted = sum(r["count"] for r in audit.values() if r["reason"] == reason)
        assert counted == sum(1 for d in suppressed if d.reason == reason), reason
    assert all(r["outcome"] == f"suppressed_{r['reason']}" for r in audit.values())


def test_a_storm_is_a_few_records_each_tied_to_the_action_it_follows() -> None:
    # 3,000 failures in about 12 minutes of event time
    made, kept, audit = run_storm(seed=7, events=3000, batch=70, steps=(1, 50, 200, 500))
    suppressed = [d for d in made if d.outcome == "suppressed"]
    assert len(suppressed) > 20 * len(audit)  # thousands of decisions, a few records
    for record in audit.values():
        if record["reason"] in ("cooldown", "budget"):  # the action whose limits held them back
            assert record["incident"] in {d.id for d in kept if d.rule == record["rule"]}
    inhibited = [r for r in audit.values() if r["reason"] == "inhibited"]
    assert inhibited
    skips = {d.id for d in kept if d.rule == "skip"}
    assert all(r["rule"] == "restart" and r["incident"] in skips for r in inhibited)


def test_first_and_last_name_the_events_and_windows_only_move_forward() -> None:
    feed = Feed(storm_rules())
    window = 15 * SEC
    decisions: list[Decision] = []
    for t, record in ((0, 1), (5 * SEC, 2), (10 * SEC, 3), (20 * SEC, 4)):  # within the cooldown
        decisions += feed.feed(feed.dlq(t, record_offset=record))
    planned, tallies = fold_suppressed(feed.state, decisions, window)
    assert [d.event_time_ms for d in planned] == [0]
    first_window, second_window = tallies
    assert (first_window["count"], second_window["count"]) == (2, 1)
    assert first_window["first"]["record"] == "orders-3@2"
    assert first_window["last"]["record"] == "orders-3@3"
    assert first_window["last"]["topic"] == "dlq"
    assert first_window["last"]["event_time_ms"] == 10 * SEC
    assert second_window["window_start_ms"] == window
    # a late event from the first window: counted in the current one, never a smaller
    # version of the first window's record
    late = feed.feed(feed.dlq(12 * SEC, record_offset=5), now=21 * SEC)
    _planned, [again] = fold_suppressed(feed.state, late, window)
    assert (again["id"], again["count"]) == (second_window["id"], 2)


def test_a_new_action_starts_a_new_tally() -> None:
    feed = Feed(storm_rules())
    decisions: list[Decision] = []
    for t in (0, 1 * MIN, 3 * MIN, 4 * MIN):  # planned, cooldown, planned (after 2m), cooldown
        decisions += feed.feed(feed.dlq(t, record_offset=t))
    planned, tallies = fold_suppressed(feed.state, decisions, WINDOW)
    assert len(planned) == 2
    assert [(t["incident"], t["count"]) for t in tallies] == [
        (planned[0].id, 1),
        (planned[1].id, 1),
    ]
    assert len({t["id"] for t in tallies}) == 2


def test_the_tallies_survive_the_state_round_trip() -> None:
    feed = Feed(storm_rules())
    decisions: list[Decision] = []
    for t in (0, 1 * SEC, 2 * SEC):
        decisions += feed.feed(feed.dlq(t, record_offset=t))
    fold_suppressed(feed.state, decisions, WINDOW)
    copy = ConnectorState.from_json(feed.state.to_json())
    more = feed.feed(feed.dlq(3 * SEC, record_offset=9))
    _p, [grown] = fold_suppressed(copy, more, WINDOW)
    assert grown["count"] == 3  # the restarted owner counts on from the durable state


def test_an_inhibition_that_ends_within_the_frame_keeps_its_incident() -> None:
    """The restarts a skip held back belong to that skip, even when the connector's STOPPED
    and RUNNING end the inhibition before the frame's decisions are folded."""
    feed = Feed(storm_rules())
    made = feed.feed(feed.dlq(0, record_offset=1))  # the skip: planned, inhibits the restarts
    for t in (1 * SEC, 2 * SEC, 3 * SEC):
        made += feed.feed(feed.task(t))
    made += feed.feed(feed.connector(4 * SEC, "STOPPED"))
    made += feed.feed(feed.connector(5 * SEC, "RUNNING"))
    assert not feed.state.inhibitions
    [skip], [held] = fold_suppressed(feed.state, made, WINDOW)
    assert (held["rule"], held["reason"], held["count"]) == ("restart", "inhibited", 3)
    assert held["incident"] == skip.id


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), events=st.integers(1, 300), batch=st.integers(1, 70))
def test_the_daemons_light_firings_fold_into_exactly_the_same_audit(
    seed: int, events: int, batch: int
) -> None:
    """`decide_firings` (the daemon: suppressed firings as light `Suppression`s) and `decide`
    (rule tests, the per-record pipeline: every firing a `Decision`) leave the same state and
    write the same audit: planned decisions, tally records (ids, counts, first and last)."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    feed = Feed(storm_rules())
    light_state = ConnectorState()
    full: list[Any] = []
    light: list[Any] = []
    t = 0
    for i in range(events):
        t += rng.choice(STEPS)
        event = random_event(feed, rng, t)
        now = t + rng.choice((0, 0, 30 * SEC))
        full += feed.feed(event, now=now)
        light += decide_firings(light_state, event, feed.rules, feed.meta, now)
        if (i + 1) % batch == 0 or i == events - 1:
            assert [(d.rule, d.outcome, d.reason, d.id) for d in light] == [
                (d.rule, d.outcome, d.reason, d.id) for d in full
            ]
            assert any(isinstance(d, Suppression) for d in light) or not any(
                d.outcome == "suppressed" and d.reason != "inhibited" for d in full
            )
            planned_full, tallies_full = fold_suppressed(feed.state, full, WINDOW)
            planned_light, tallies_light = fold_suppressed(light_state, light, WINDOW)
            assert planned_light == planned_full
            assert [tally_record(light_state, x, WINDOW) for x in tallies_light] == [
                tally_record(feed.state, x, WINDOW) for x in tallies_full
            ]
            assert light_state.to_json() == feed.state.to_json()
            full, light = [], []
