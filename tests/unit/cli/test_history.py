"""`offsetd history`: an incident is one row (its latest outcome, N suppressed) and one story."""

from __future__ import annotations

from typing import Any

import pytest

from offsetd.cli.history import Incident, incident_rows, incidents, story
from offsetd.engine import Decision
from offsetd.engine.tally import fold_suppressed, tally_record
from offsetd.remediation.audit_record import outcome_record
from tests.unit.engine.test_engine_decide import MIN, SEC, Feed
from tests.unit.engine.test_engine_tally import WINDOW, storm_rules


def outcome(decision: Decision, outcome: str, at_ms: int, **extra: Any) -> dict[str, Any]:
    return outcome_record(decision, outcome, "", at_ms, extra)


def storm_audit() -> tuple[list[Decision], list[dict[str, Any]]]:
    """A DLQ storm on one sink, written as the daemon writes it: the first skip executed, every
    later failure suppressed (cooldown, then inhibited restarts), frame by frame."""
    feed = Feed(storm_rules())
    written: list[dict[str, Any]] = []
    planned: list[Decision] = []
    t = 0
    for frame in range(20):
        made: list[Decision] = []
        for _ in range(10):
            t += 500
            made += feed.feed(feed.dlq(t, record_offset=t))
            made += feed.feed(feed.task(t + 1))
        kept, tallies = fold_suppressed(feed.state, made, WINDOW)
        written += [d.audit_record() for d in kept]
        written += [tally_record(feed.state, tally, WINDOW) for tally in tallies]
        for decision in kept:
            planned.append(decision)
            written.append(outcome(decision, "executed", t + 100, guard="none"))
        assert frame < 19 or not kept
    return planned, written


def test_a_storm_is_one_row_per_action_with_its_suppressions_beside_it() -> None:
    planned, written = storm_audit()
    assert len(planned) == 1  # the storm's one action ...
    compacted = {r["id"]: r for r in written}  # ... in what the compacted topic keeps
    found = incidents(compacted.values())
    assert [i.id for i in found] == [planned[0].id]
    [incident] = found
    assert incident.outcome == "executed"
    suppressed = incident.suppressed_count
    assert suppressed == 200 + 200 - 1  # every DLQ record and FAILED status but the first
    [row] = incident_rows(found)
    assert row[1:6] == ("skip", "observe", "executed", "orders-sink", "notify")
    assert row[7] == f"{suppressed} suppressed"


def test_the_story_tells_the_incident_in_order() -> None:
    planned, written = storm_audit()
    [incident] = incidents({r["id"]: r for r in written}.values())
    told = story(incident)
    assert told[0] == (f"incident {planned[0].id}: rule skip on local/orders-sink, now executed")
    assert "decided notify of orders-3@500 (dlq_record); 1 event(s) counted" in told[1]
    rest = "\n".join(told[2:])
    assert "executed (guard none)" not in rest  # the guard that let it pass is not news
    assert any(line.endswith("  executed") for line in told[2:]), told
    assert "suppressed_cooldown x199: rule skip" in rest
    assert "suppressed_inhibited x200: rule restart" in rest
    assert "inhibited by skip" in rest
    times = [line[:23] for line in told[1:]]
    assert times == sorted(times)


def test_suppressions_of_no_action_in_view_get_a_row_of_their_own() -> None:
    feed = Feed(
        storm_rules().__class__(
            r.rule.model_copy(update={"enabled": False}) for r in storm_rules().rules
        )
    )
    made: list[Decision] = []
    for t in (0, 1 * SEC, 2 * MIN):
        made += feed.feed(feed.dlq(t, record_offset=t))
    kept, tallies = fold_suppressed(feed.state, made, WINDOW)
    assert not kept
    found = incidents(tally_record(feed.state, t, WINDOW) for t in tallies)
    assert [(i.decision, i.outcome, i.suppressed_count) for i in found] == [
        (None, "suppressed_disabled", 3)
    ]


def test_an_older_audit_with_suppressed_decisions_one_by_one_still_reads() -> None:
    feed = Feed(storm_rules())
    made: list[Decision] = []
    for t in (0, 1 * SEC, 2 * SEC):
        made += feed.feed(feed.dlq(t, record_offset=t))
    records = [d.audit_record() for d in made]  # as the daemon wrote them before the tallies
    records.append(outcome(made[0], "executed", 5 * SEC))
    records += [outcome(d, "suppressed_cooldown", 5 * SEC) for d in made[1:]]
    found = incidents(records)
    planned_row, loose_row = sorted(incident_rows(found), key=lambda row: row[3])
    assert (planned_row[3], planned_row[7]) == ("executed", "")
    assert (loose_row[3], loose_row[7]) == ("suppressed_cooldown", "2 suppressed")


def test_an_incident_is_found_by_a_unique_prefix_only() -> None:
    from offsetd.cli.history import _find
    from offsetd.errors import IncidentNotFound

    found = [Incident("abc123", None), Incident("abd456", None)]
    assert _find(found, "abc").id == "abc123"
    with pytest.raises(IncidentNotFound, match="2 incidents with id 'ab'"):
        _find(found, "ab")
    with pytest.raises(IncidentNotFound, match="no incident with id 'zz'") as refused:
        _find(found, "zz")
    assert refused.value.exit_code == 62


def test_a_rule_filter_keeps_the_incidents_that_held_the_rule_back() -> None:
    _planned, written = storm_audit()
    [incident] = incidents({r["id"]: r for r in written}.values())
    assert incident.involves("skip")  # its own rule
    assert incident.involves("restart")  # the restarts it inhibited
    assert not incident.involves("other")
    tallies = [r for r in incident.suppressed if r["rule"] == "restart"]
    assert incident.latest_ms >= max(t["last"]["decided_at_ms"] for t in tallies)
