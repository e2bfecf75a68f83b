"""Events decided once the connector's metadata is known (offsetd.engine.decide.defer and
offsetd.engine.later.redecide_deferred).

The real case (issue 13): a sink created shortly after another connector changed fails on its
first record; the rate-limited metadata refresh has not seen it yet, so the rule on
`connector_type: sink` did not match, and a FAILED task sends no further status: it was never
decided. Here the engine keeps such an event and decides it when the metadata arrives, with the
rules that needed it only (the others counted it already), within their windows.
"""

from __future__ import annotations

from typing import Any

from offsetd.engine import ConnectorState
from offsetd.engine.decide import MAX_DEFERRED
from offsetd.engine.later import redecide_deferred
from offsetd.rules import ConnectorMeta
from tests.unit.engine.test_engine_decide import MIN, SEC, SINK, Feed, fired_at, rules

SOURCE = ConnectorMeta("io.debezium.connector.postgresql.PostgresConnector", "source")
TYPED = {
    "name": "typed",
    "match": {"kind": "task_status", "state": "FAILED", "connector_type": "sink"},
    "when": {"count": 1, "within": "10m"},
}
UNTYPED = {
    "name": "untyped",
    "match": {"kind": "task_status", "state": "FAILED"},
    "when": {"count": 2, "within": "10m"},
}


def unknown(*specs: dict[str, Any]) -> Feed:
    return Feed(rules(*specs), meta=None)


def test_an_event_a_typed_rule_needs_waits_and_is_decided_when_the_metadata_arrives() -> None:
    f = unknown(TYPED)
    assert f.feed(f.task(0)) == []
    assert len(f.state.deferred) == 1
    decisions, expired = redecide_deferred(f.state, f.rules, SINK, 5 * SEC)
    assert expired == 0
    assert fired_at(decisions) == [("typed", 0, "planned")]
    assert decisions[0].decided_at_ms == 5 * SEC
    assert f.state.deferred == []


def test_without_metadata_nothing_happens_and_the_event_keeps_waiting() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0))
    assert redecide_deferred(f.state, f.rules, None, 5 * SEC) == ([], 0)
    assert len(f.state.deferred) == 1


def test_the_metadata_may_say_the_rule_does_not_match() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0))
    assert redecide_deferred(f.state, f.rules, SOURCE, 5 * SEC) == ([], 0)
    assert f.state.deferred == []


def test_rules_that_did_not_need_the_metadata_do_not_count_the_event_twice() -> None:
    f = unknown(TYPED, UNTYPED)
    f.feed(f.task(0))
    decisions, _ = redecide_deferred(f.state, f.rules, SINK, 1 * SEC)
    assert fired_at(decisions) == [("typed", 0, "planned")]
    # untyped (2 within 10m) saw the first failure once, live: the second one fires it
    assert fired_at(f.feed(f.task(1 * MIN))) == [("untyped", 1 * MIN, "planned")]


def test_only_events_some_typed_rule_could_match_wait() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0, "RUNNING"))  # the typed rule wants FAILED
    f.feed(f.dlq(1 * SEC))  # ... and task statuses
    assert f.state.deferred == []
    g = unknown(UNTYPED)  # no rule needs metadata
    g.feed(g.task(0))
    assert g.state.deferred == []


def test_a_replayed_old_event_does_not_wait() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0), now=2 * 3600 * SEC)
    assert f.state.deferred == []


def test_an_event_that_waited_past_its_window_is_not_decided_but_counted() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0))
    decisions, expired = redecide_deferred(f.state, f.rules, SINK, 10 * MIN + 1)
    assert (decisions, expired) == ([], 1)
    assert f.state.deferred == []


def test_an_unless_on_the_type_waits_too() -> None:
    """Without metadata an `unless connector_type: source` cannot exclude: deciding now could
    act on the very connectors the rule's author excluded."""
    spec = {
        "name": "not-sources",
        "match": {"kind": "task_status", "state": "FAILED", "unless": {"connector_type": "source"}},
    }
    f = unknown(spec)
    assert f.feed(f.task(0)) == []
    assert redecide_deferred(f.state, f.rules, SOURCE, 1 * SEC) == ([], 0)
    g = unknown(spec)
    g.feed(g.task(0))
    assert fired_at(redecide_deferred(g.state, g.rules, SINK, 1 * SEC)[0]) == [
        ("not-sources", 0, "planned")
    ]


def test_deferred_events_survive_the_state_json_and_are_decided_once() -> None:
    f = unknown(TYPED)
    f.feed(f.dlq(0))  # not waiting (a DLQ event, the rule wants task statuses)
    f.feed(f.task(1 * SEC))
    restored = ConnectorState.from_json(f.state.to_json())
    [decision] = redecide_deferred(restored, f.rules, SINK, 2 * SEC)[0]
    # a replay of the nudge after a crash before the state was written decides the same again
    replayed = ConnectorState.from_json(f.state.to_json())
    [again] = redecide_deferred(replayed, f.rules, SINK, 3 * SEC)[0]
    assert again.id == decision.id  # the audit keeps it once
    # after the state was written, nothing is left to decide
    assert redecide_deferred(restored, f.rules, SINK, 4 * SEC) == ([], 0)


def test_the_deferred_list_is_bounded() -> None:
    f = unknown(TYPED)
    for t in range(MAX_DEFERRED + 5):
        f.feed(f.task(t * SEC))
    assert len(f.state.deferred) == MAX_DEFERRED
    assert f.state.deferred[0]["time_ms"] == 5 * SEC  # the oldest went first


def test_dlq_events_wait_without_their_headers() -> None:
    spec = {"name": "typed-dlq", "match": {"kind": "dlq_record", "connector_type": "sink"}}
    f = unknown(spec)
    f.feed(f.dlq(0))
    [entry] = f.state.deferred
    assert "headers" not in entry["event"]
    [decision] = redecide_deferred(f.state, f.rules, SINK, 1 * SEC)[0]
    assert decision.record is not None
    assert decision.record.offset == 1200


def test_deferred_events_are_pruned_past_every_window() -> None:
    f = unknown(TYPED)
    f.feed(f.task(0))
    f.feed(f.task(3600 * SEC, "RUNNING"))  # the next sweep: an hour later in event time
    assert f.state.deferred == []
