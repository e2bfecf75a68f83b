"""offsetd.engine.decide: windows in event time, replays, idempotency, limits, interactions."""

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.engine import ConnectorState, Decision, decide, prune
from offsetd.engine.decide import MAX_KEYS
from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    RecordRef,
    SourceRecord,
    TaskStatusEvent,
    error_from_trace,
)
from offsetd.rules import ConnectorMeta, Rule, RuleSet
from offsetd.rules.matching import AnyEvent

SEC = 1000
MIN = 60 * SEC
SINK = ConnectorMeta("io.confluent.connect.jdbc.JdbcSinkConnector", "sink")
TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler\n"
    "Caused by: org.apache.kafka.connect.errors.DataException: bad record\n"
)


class Feed:
    """Events for one connector with increasing source offsets, fed through `decide`."""

    def __init__(self, rules: RuleSet, meta: ConnectorMeta | None = SINK) -> None:
        self.rules = rules
        self.meta = meta
        self.state = ConnectorState()
        self.offsets: dict[str, int] = {}

    def source(self, topic: str, t: int, offset: int | None) -> SourceRecord:
        if offset is None:
            offset = self.offsets.get(topic, 0)
        self.offsets[topic] = max(self.offsets.get(topic, 0), offset + 1)
        return SourceRecord(topic=topic, partition=0, offset=offset, timestamp_ms=t)

    def task(
        self,
        t: int,
        state: str | None = "FAILED",
        *,
        task_id: int = 0,
        trace: str = TRACE,
        offset: int | None = None,
    ) -> TaskStatusEvent:
        return TaskStatusEvent(
            connect_cluster="local",
            connector="orders-sink",
            source=self.source("connect-status", t, offset),
            task_id=task_id,
            state=state,
            worker_id="w1:8083",
            generation=3,
            error=error_from_trace(trace) if state == "FAILED" else None,
        )

    def connector(self, t: int, state: str | None) -> ConnectorStatusEvent:
        return ConnectorStatusEvent(
            connect_cluster="local",
            connector="orders-sink",
            source=self.source("connect-status", t, None),
            state=state,
        )

    def dlq(
        self, t: int, record_offset: int | None = 1200, *, offset: int | None = None
    ) -> DlqRecordEvent:
        record = None
        if record_offset is not None:
            record = RecordRef(topic="orders", partition=3, offset=record_offset)
        return DlqRecordEvent(
            connect_cluster="local",
            connector="orders-sink",
            source=self.source("dlq", t, offset),
            task_id=0,
            record=record,
            error=ErrorInfo(exception_class="org.apache.kafka.connect.errors.DataException"),
        )

    def feed(self, event: AnyEvent, now: int | None = None) -> list[Decision]:
        now = event.source.timestamp_ms if now is None else now
        self.state, decisions = decide(self.state, event, self.rules, self.meta, now)
        return decisions


def rules(*specs: dict[str, Any]) -> RuleSet:
    base: dict[str, Any] = {"actions": [{"type": "notify"}]}
    return RuleSet(Rule.model_validate({**base, **spec}) for spec in specs)


def failed_3_in_10m(**extra: Any) -> RuleSet:
    return rules(
        {
            "name": "r",
            "match": {"kind": "task_status", "state": "FAILED"},
            "when": {"count": 3, "within": "10m"},
            **extra,
        }
    )


def fired_at(decisions: list[Decision]) -> list[tuple[str, int, str]]:
    return [(d.rule, d.event_time_ms, d.outcome) for d in decisions]


# -- windows, event time, the injected clock ------------------------------------------------------


def test_fires_on_the_nth_event_within_the_window() -> None:
    f = Feed(failed_3_in_10m())
    assert f.feed(f.task(0)) == []
    assert f.feed(f.task(5 * MIN)) == []
    [d] = f.feed(f.task(10 * MIN))  # 0, 5m, 10m: three within 10m (inclusive)
    assert (d.rule, d.outcome, d.event_time_ms, d.decided_at_ms) == (
        "r",
        "planned",
        10 * MIN,
        10 * MIN,
    )
    assert [e.timestamp_ms for e in d.inputs.events] == [0, 5 * MIN, 10 * MIN]


def test_the_window_slides() -> None:
    f = Feed(failed_3_in_10m())
    for t in (0, 5 * MIN, 10 * MIN + 1):
        assert f.feed(f.task(t)) == []  # 0 and 10m+1 are more than 10m apart
    assert fired_at(f.feed(f.task(14 * MIN))) == [("r", 14 * MIN, "planned")]  # 5m, 10m+1, 14m


def test_a_firing_consumes_the_window() -> None:
    f = Feed(failed_3_in_10m(limits={"cooldown": "0s"}))
    out = [f.feed(f.task(t * MIN)) for t in range(7)]
    assert [bool(d) for d in out] == [False, False, True, False, False, True, False]


def test_now_is_only_now_event_time_drives_windows() -> None:
    f = Feed(failed_3_in_10m())
    # the events arrive a few minutes late: still fresh enough, and counted by event time
    assert f.feed(f.task(0), now=3 * MIN) == []
    assert f.feed(f.task(1 * MIN), now=4 * MIN) == []
    [d] = f.feed(f.task(2 * MIN), now=5 * MIN)
    assert (d.event_time_ms, d.decided_at_ms) == (2 * MIN, 5 * MIN)


def test_replayed_history_never_fires_but_updates_status() -> None:
    f = Feed(failed_3_in_10m())
    now = 2 * 3600 * SEC
    for t in (0, 1 * MIN, 2 * MIN, 3 * MIN):
        assert f.feed(f.task(t), now=now) == []
    assert f.state.tasks[0]["state"] == "FAILED"
    assert f.state.rules == {}  # stale events are not counted either
    # exactly `within` old still counts; one millisecond more does not
    g = Feed(rules({"name": "once", "match": {"kind": "task_status"}}))
    assert g.feed(g.task(0), now=10 * MIN + 1) == []
    assert len(g.feed(g.task(1), now=10 * MIN + 1)) == 1


def test_replay_then_live_does_not_mix_old_counts() -> None:
    f = Feed(failed_3_in_10m())
    now = 3600 * SEC
    f.feed(f.task(0), now=now)
    f.feed(f.task(1 * MIN), now=now)
    assert f.feed(f.task(now), now=now) == []  # live: one failure, not three


def test_restarts_by_anyone_count_once_per_status_record() -> None:
    f = Feed(failed_3_in_10m())
    sequence = ["FAILED", "RUNNING", "FAILED", "RESTARTING", "RUNNING", "FAILED"]
    out = [f.feed(f.task(i * MIN, state)) for i, state in enumerate(sequence)]
    assert [len(d) for d in out] == [0, 0, 0, 0, 0, 1]


# -- idempotency and ids --------------------------------------------------------------------------


def test_the_same_event_twice_is_counted_once() -> None:
    f = Feed(failed_3_in_10m())
    first = f.task(0, offset=7)
    assert f.feed(first) == []
    assert f.feed(first) == []
    assert f.feed(f.task(1 * MIN, offset=7)) == []  # same coordinates: ignored completely
    assert f.feed(f.task(1 * MIN, offset=5)) == []  # below the high-water mark
    assert len(f.state.rules["r"]["windows"]["connector=orders-sink"]) == 1
    f.feed(f.task(2 * MIN))
    assert len(f.feed(f.task(3 * MIN))) == 1


def test_a_replay_after_a_crash_is_not_counted_twice() -> None:
    f = Feed(failed_3_in_10m())
    events = [f.task(t * MIN) for t in range(3)]
    f.feed(events[0])
    f.feed(events[1])
    saved = f.state.to_json()
    [d] = f.feed(events[2])
    # crash: the state written before the last event is restored, and everything is re-read
    f.state = ConnectorState.from_json(saved)
    replayed = [x for e in events for x in f.feed(e)]
    assert [x.id for x in replayed] == [d.id]  # the same decision, with the same id
    assert f.feed(events[2]) == []


def test_decision_ids_are_stable_and_distinct() -> None:
    def run() -> list[str]:
        f = Feed(failed_3_in_10m(limits={"cooldown": "0s"}))
        return [d.id for t in range(6) for d in f.feed(f.task(t * MIN))]

    first, second = run(), run()
    assert first == second
    assert len(first) == len(set(first)) == 2
    assert all(len(i) == 32 for i in first)


def test_status_state_and_tombstones() -> None:
    f = Feed(rules())
    f.feed(f.task(0, "RUNNING", task_id=0))
    f.feed(f.task(1, "FAILED", task_id=1))
    f.feed(f.connector(2, "RUNNING"))
    assert f.state.connector_status is not None
    assert f.state.connector_status["state"] == "RUNNING"
    assert f.state.tasks[0] == {
        "state": "RUNNING",
        "generation": 3,
        "worker_id": "w1:8083",
        "time_ms": 0,
    }
    assert f.state.tasks[1]["state"] == "FAILED"
    f.feed(f.task(3, None, task_id=1))
    f.feed(f.connector(4, None))
    assert list(f.state.tasks) == [0]
    assert f.state.connector_status is None
    assert (f.state.connect_cluster, f.state.connector) == ("local", "orders-sink")


# -- limits, modes, suppression -------------------------------------------------------------------


def once(**extra: Any) -> RuleSet:
    return rules({"name": "r", "match": {"kind": "task_status", "state": "FAILED"}, **extra})


def test_cooldown_suppresses_and_is_counted_on_planned_decisions_only() -> None:
    f = Feed(once(limits={"cooldown": "2m"}))
    out = [d for t in (0, 1 * MIN, 119 * SEC, 2 * MIN, 3 * MIN) for d in f.feed(f.task(t))]
    assert [(d.event_time_ms, d.outcome, d.reason) for d in out] == [
        (0, "planned", None),
        (1 * MIN, "suppressed", "cooldown"),
        (119 * SEC, "suppressed", "cooldown"),
        (2 * MIN, "planned", None),  # measured from the last planned one, not the suppressed
        (3 * MIN, "suppressed", "cooldown"),
    ]
    assert out[1].detail is not None


def test_budget_per_rule_and_connector() -> None:
    f = Feed(once(limits={"cooldown": "0s", "budget": {"max": 2, "per": "1h"}}))
    out = [d for t in (0, 10, 20, 30, 60) for d in f.feed(f.task(t * MIN))]
    assert [(d.outcome, d.reason) for d in out] == [
        ("planned", None),
        ("planned", None),
        ("suppressed", "budget"),
        ("suppressed", "budget"),
        ("planned", None),  # the first left the hour
    ]


def test_disabled_rules_are_audited_as_suppressed_and_use_no_budget() -> None:
    f = Feed(once(enabled=False, limits={"budget": {"max": 1, "per": "1h"}}))
    [d] = f.feed(f.task(0))
    assert (d.outcome, d.reason) == ("suppressed", "disabled")
    assert f.state.rules["r"]["executed"] == []


def test_mode_never_suppresses() -> None:
    for mode in ("observe", "approve", "enforce"):
        f = Feed(once(mode=mode))
        [d] = f.feed(f.task(0))
        assert (d.mode, d.outcome, d.reason) == (mode, "planned", None)


def test_limits_survive_a_restart_with_the_state() -> None:
    f = Feed(once(limits={"cooldown": "10m"}))
    assert f.feed(f.task(0))[0].outcome == "planned"
    f.state = ConnectorState.from_json(f.state.to_json())
    assert f.feed(f.task(5 * MIN))[0].reason == "cooldown"


# -- actions: restart backoff, skip-record targets ------------------------------------------------

RESTART = {
    "name": "restart",
    "match": {"kind": "task_status", "state": "FAILED"},
    "actions": [
        {
            "type": "restart-failed-tasks",
            "backoff": {"initial": "30s", "factor": 2, "max": "2m", "reset_after": "30m"},
        }
    ],
    "limits": {"cooldown": "0s", "budget": {"max": 100, "per": "1h"}},
}


def not_before(d: Decision) -> int:
    value = d.actions[0].params["not_before_ms"]
    assert isinstance(value, int)
    return value


def test_restart_backoff_grows_per_connector_and_resets() -> None:
    f = Feed(rules(RESTART))
    times = [0, 1 * MIN, 3 * MIN, 6 * MIN, 10 * MIN]
    out = [d for t in times for d in f.feed(f.task(t))]
    assert [not_before(d) - d.event_time_ms for d in out] == [
        30_000,
        60_000,
        120_000,
        120_000,
        120_000,
    ]
    assert out[0].actions[0].params["backoff"] == {
        "initial": "30s",
        "max": "2m",
        "factor": 2.0,
        "reset_after": "30m",
    }
    # quiet for longer than reset_after: back to the initial delay
    [d] = f.feed(f.task(41 * MIN))
    assert (d.actions[0].params["attempt"], not_before(d)) == (0, 41 * MIN + 30_000)


def test_suppressed_restarts_do_not_grow_the_backoff() -> None:
    spec = {**RESTART, "limits": {"cooldown": "1m"}}
    f = Feed(rules(spec))
    out = [d for t in (0, 10 * SEC, 2 * MIN) for d in f.feed(f.task(t))]
    assert [(d.outcome, d.actions[0].params["delay_ms"]) for d in out] == [
        ("planned", 30_000),
        ("suppressed", 60_000),  # what it would have been
        ("planned", 60_000),
    ]


SKIP_BY_RECORD = {
    "name": "skip",
    "match": {"kind": "dlq_record"},
    "when": {"count": 3, "within": "10m", "key": ["connector", "record"]},
    "actions": [{"type": "skip-record"}],
}


def test_skip_record_exact_from_dlq_events() -> None:
    f = Feed(rules(SKIP_BY_RECORD))
    out = [d for t in range(3) for d in f.feed(f.dlq(t * MIN))]
    [d] = out
    assert d.record == RecordRef(topic="orders", partition=3, offset=1200)
    assert d.record_status == "exact"
    assert d.key == "connector=orders-sink,record=orders-3@1200"
    assert d.actions[0].params == {
        "single_record_batches": True,
        "check": None,
        "record": {"topic": "orders", "partition": 3, "offset": 1200},
        "record_status": "exact",
        "next_offset": 1201,
    }
    assert d.inputs.trigger.kind == "dlq_record"
    assert d.inputs.trigger.record == d.record
    assert [e.topic for e in d.inputs.events] == ["dlq"] * 3


def test_a_different_record_does_not_count_toward_the_same_skip() -> None:
    f = Feed(rules(SKIP_BY_RECORD))
    out = [
        d for t, r in enumerate([1200, 1201, 1200, 1201, 1202]) for d in f.feed(f.dlq(t * MIN, r))
    ]
    assert out == []
    [d] = f.feed(f.dlq(6 * MIN, 1201))
    assert d.record == RecordRef(topic="orders", partition=3, offset=1201)


def test_dlq_events_without_a_record_are_not_counted_per_record() -> None:
    f = Feed(rules(SKIP_BY_RECORD))
    assert [d for t in range(5) for d in f.feed(f.dlq(t * MIN, None))] == []


def test_skip_record_to_locate_when_the_events_do_not_name_one_record() -> None:
    by_task = {
        "name": "skip",
        "match": {"kind": "task_status", "state": "FAILED"},
        "when": {"count": 2},
        "actions": [{"type": "skip-record"}],
    }
    f = Feed(rules(by_task))
    f.feed(f.task(0))
    [d] = f.feed(f.task(1 * MIN))
    # a status trace never names the record; the committed offset is not used to guess
    assert (d.record, d.record_status) == (None, "to_locate")
    assert d.actions[0].params["next_offset"] is None
    mixed = {**SKIP_BY_RECORD, "when": {"count": 2, "key": "connector"}}
    g = Feed(rules(mixed))
    g.feed(g.dlq(0, 1200))
    [d] = g.feed(g.dlq(1 * MIN, 1201))
    assert (d.record, d.record_status) == (None, "to_locate")


def test_record_status_only_for_skip_rules() -> None:
    f = Feed(rules({"name": "p", "match": {"kind": "dlq_record"}, "actions": [{"type": "pause"}]}))
    [d] = f.feed(f.dlq(0))
    assert d.record_status is None
    assert d.record == RecordRef(topic="orders", partition=3, offset=1200)


def test_rewind_timestamp_is_resolved_at_load() -> None:
    spec = {
        "name": "rw",
        "match": {"kind": "task_status"},
        "actions": [{"type": "rewind", "to_timestamp": "1970-01-01T00:01:00+00:00"}],
    }
    f = Feed(rules(spec))
    [d] = f.feed(f.task(0))
    assert d.actions[0].params["to_timestamp_ms"] == 60_000


# -- inhibition: the skip stops the restarts ------------------------------------------------------


def poison_rules() -> RuleSet:
    skip = {**SKIP_BY_RECORD, "inhibits": {"rules": "restart", "for": "15m"}}
    return rules(RESTART, skip)


def test_a_skip_inhibits_restarts_until_stopped_then_running() -> None:
    f = Feed(poison_rules())
    decisions: list[Decision] = []
    for t in (0, 1 * MIN, 2 * MIN):
        decisions += f.feed(f.dlq(t))
        decisions += f.feed(f.task(t + SEC))
    assert fired_at(decisions) == [
        ("restart", 1 * SEC, "planned"),
        ("restart", 1 * MIN + SEC, "planned"),
        ("skip", 2 * MIN, "planned"),
        ("restart", 2 * MIN + SEC, "suppressed"),
    ]
    assert decisions[-1].reason == "inhibited"
    assert "skip" in (decisions[-1].detail or "")
    f.feed(f.connector(3 * MIN, "RUNNING"))  # RUNNING alone (no STOPPED first) does not lift it
    assert f.feed(f.task(4 * MIN))[0].reason == "inhibited"
    f.feed(f.connector(5 * MIN, "STOPPED"))
    f.feed(f.connector(6 * MIN, "RUNNING"))
    assert f.state.inhibitions == {}
    assert f.feed(f.task(7 * MIN))[0].outcome == "planned"


def test_an_inhibition_expires() -> None:
    f = Feed(poison_rules())
    for t in range(3):
        f.feed(f.dlq(t * MIN))
    assert f.feed(f.task(3 * MIN))[0].reason == "inhibited"
    assert f.feed(f.task(2 * MIN + 15 * MIN + 1))[0].outcome == "planned"


def test_a_suppressed_skip_does_not_inhibit() -> None:
    skip = {**SKIP_BY_RECORD, "enabled": False, "inhibits": {"rules": "restart"}}
    f = Feed(rules(RESTART, skip))
    for t in range(3):
        f.feed(f.dlq(t * MIN))
    assert f.feed(f.task(3 * MIN))[0].outcome == "planned"


# -- metadata -------------------------------------------------------------------------------------


def test_rules_needing_metadata_do_not_match_without_it() -> None:
    typed = rules({"name": "t", "match": {"kind": "task_status", "connector_type": "sink"}})
    assert Feed(typed, None).feed(Feed(typed).task(0)) == []
    g = Feed(typed, SINK)
    assert len(g.feed(g.task(0))) == 1


# -- state: JSON, compactness ---------------------------------------------------------------------


def test_state_json_round_trip() -> None:
    f = Feed(poison_rules())
    for t in range(2):
        f.feed(f.dlq(t * MIN))
        f.feed(f.task(t * MIN + SEC))
    text = f.state.to_json()
    again = ConnectorState.from_json(text)
    assert again == f.state
    assert again.to_json() == text
    assert ConnectorState.model_validate(f.state.model_dump()) == f.state


def test_state_is_pruned_as_windows_expire() -> None:
    f = Feed(
        rules(
            SKIP_BY_RECORD,
            {**RESTART, "limits": {"cooldown": "1m", "budget": {"max": 5, "per": "1h"}}},
        )
    )
    for i in range(100):  # many different records, each failing once
        f.feed(f.dlq(i * SEC, 1000 + i))
    f.feed(f.task(100 * SEC))
    assert len(f.state.rules["skip"]["windows"]) == 100
    f.feed(f.task(2 * 3600 * SEC, "RUNNING"))  # hours later
    assert f.state.rules == {}
    assert f.state.restart_backoff is None
    assert len(f.state.to_json()) < 400


def test_a_new_record_at_the_key_limit_is_counted_from_its_first_failure() -> None:
    """With MAX_KEYS keys in a rule's windows, the stalest are dropped before a new key comes
    in. Dropped after it, the new key (no entry yet) ranked stalest of all and went too: that
    record's first failure was lost, and a skip after 3 failures needed 4."""
    f = Feed(rules(SKIP_BY_RECORD))
    for i in range(MAX_KEYS):  # every key taken, each seen once
        f.feed(f.dlq(i * 10, 100_000 + i))
    assert len(f.state.rules["skip"]["windows"]) == MAX_KEYS
    fired = [d for n in range(3) for d in f.feed(f.dlq((MAX_KEYS + n) * 10, 7))]
    assert [d.record.offset for d in fired if d.record] == [7]  # at its third failure
    assert len(f.state.rules["skip"]["windows"]) <= MAX_KEYS


def test_a_flood_of_distinct_records_keeps_the_state_bounded() -> None:
    f = Feed(rules(SKIP_BY_RECORD))
    for i in range(5000):  # a DLQ flood: every record different, all within the window
        f.feed(f.dlq(i * 10, 100_000 + i))
    windows = f.state.rules["skip"]["windows"]
    assert len(windows) <= MAX_KEYS
    assert "connector=orders-sink,record=orders-3@104999" in windows  # the newest are kept
    assert len(f.state.to_json()) < 16_000
    # a record that keeps failing, among a flood of others seen once, is still counted:
    # keys seen once are evicted first
    g = Feed(rules(SKIP_BY_RECORD))
    fired = []
    for i in range(3000):
        fired += g.feed(g.dlq(i * 10, 7 if i % 50 == 49 else 100_000 + i))
    assert fired
    assert {d.record.offset for d in fired if d.record} == {7}
    assert fired[0].event_time_ms == 1490  # its third failure


def test_prune_forgets_rules_that_are_gone() -> None:
    f = Feed(failed_3_in_10m())
    f.feed(f.task(0))
    assert "r" in f.state.rules
    prune(f.state, rules())
    assert f.state.rules == {}


def test_decisions_are_valid_serialisable_models() -> None:
    f = Feed(poison_rules())
    decisions = [d for t in range(3) for d in f.feed(f.dlq(t * MIN))]
    decisions += f.feed(f.task(3 * MIN))
    for d in decisions:
        again = Decision.model_validate_json(d.model_dump_json())
        assert again == Decision.model_validate(d.model_dump())
        assert again.id == d.id
    with pytest.raises(ValueError, match="frozen"):
        decisions[0].outcome = "suppressed"  # type: ignore[misc]


# -- property: saving and restoring the state between any two events changes nothing --------------


EVENT_KINDS = st.sampled_from(["failed", "running", "dlq-a", "dlq-b", "stopped", "conn-running"])


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(EVENT_KINDS, st.integers(min_value=0, max_value=4 * MIN)), max_size=40
    ),
    cut=st.integers(min_value=0, max_value=40),
    replay=st.booleans(),
)
def test_restoring_state_mid_stream_changes_nothing(
    steps: list[tuple[str, int]], cut: int, replay: bool
) -> None:
    def events(f: Feed) -> list[AnyEvent]:
        out: list[AnyEvent] = []
        t = 0
        for kind, gap in steps:
            t += gap
            if kind == "failed":
                out.append(f.task(t))
            elif kind == "running":
                out.append(f.task(t, "RUNNING"))
            elif kind.startswith("dlq"):
                out.append(f.dlq(t, 1200 if kind == "dlq-a" else 1300))
            else:
                out.append(f.connector(t, "STOPPED" if kind == "stopped" else "RUNNING"))
        return out

    straight = Feed(poison_rules())
    expected = [d for e in events(straight) for d in straight.feed(e)]

    resumed = Feed(poison_rules())
    stream = events(resumed)
    got: list[Decision] = []
    for e in stream[:cut]:
        got += resumed.feed(e)
    resumed.state = ConnectorState.from_json(resumed.state.to_json())
    if replay:  # a crash re-reads what was already processed
        for e in stream[:cut]:
            assert resumed.feed(e) == []
    for e in stream[cut:]:
        got += resumed.feed(e)
    assert got == expected


def test_audit_record_and_summary() -> None:
    ruleset = poison_rules()
    f = Feed(ruleset)
    [d] = [d for t in range(3) for d in f.feed(f.dlq(t * MIN))]
    record = d.audit_record(ruleset)
    assert record["id"] == d.id
    assert record["outcome"] == "planned"
    assert record["rule_spec"]["name"] == "skip"
    assert record["rule_spec"]["inhibits"] == {"rules": ["restart"], "for": "15m"}
    assert "rule_spec" not in d.audit_record()
    assert json.loads(json.dumps(record)) == record
    assert d.summary() == (
        "rule=skip connector=local/orders-sink mode=observe outcome=planned "
        "actions=[skip-record] task=0 record=orders-3@1200 record_status=exact "
        "event_time_ms=120000"
    )


def test_the_core_imports_no_io_libraries() -> None:
    code = (
        "import sys, offsetd.engine, offsetd.rules, offsetd.ruletest\n"
        "io = {'faust', 'httpx', 'confluent_kafka', 'prometheus_client', 'pyspark', 'aiokafka'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & io))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
