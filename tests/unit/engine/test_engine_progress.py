"""Progress events in the engine: one decision per episode, a grace after each status change,
an episode that outlives its grace shown again, and rules that match progress states."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from offsetd.engine import ConnectorState, decide
from offsetd.events.models import (
    PROGRESS_SOURCE_TOPIC,
    ProgressEvent,
    SourceRecord,
    TaskStatusEvent,
)
from offsetd.rules import ConnectorMeta, Rule, RuleSet
from offsetd.rules.matching import explain

SEC = 1000
T0 = 1_700_000_000_000
GRACE = 30 * SEC
SINK = ConnectorMeta("org.apache.kafka.connect.file.FileStreamSinkConnector", "sink")


def restart_rule(**extra: Any) -> Rule:
    return Rule.model_validate(
        {
            "name": "stuck-sink-restart",
            "mode": "enforce",
            "match": {"kind": "progress", "progress": "stalled", "connector_type": "sink"},
            "when": {"count": 1, "within": "10m", "key": ["connector", "task_id"]},
            "actions": [
                {"type": "restart-tasks", "backoff": {"initial": "10s", "max": "1m", "factor": 2}}
            ],
            "limits": {"budget": {"max": 3, "per": "1h"}, "cooldown": "0s"},
            **extra,
        }
    )


class Feed:
    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.state = ConnectorState()
        self.status_offset = 0
        self.progress_offset = 0

    def status(self, t: int, state: str = "RUNNING", task_id: int = 0) -> list[Any]:
        self.status_offset += 1
        event = TaskStatusEvent(
            connect_cluster="local",
            connector="orders-sink",
            source=SourceRecord(
                topic="connect-status", partition=0, offset=self.status_offset, timestamp_ms=t
            ),
            task_id=task_id,
            state=state,
            worker_id="w1",
            generation=1,
        )
        self.state, made = decide(self.state, event, self.rules, SINK, t)
        return made

    def progress(self, t: int, state: str = "stalled", task_id: int | None = 0) -> list[Any]:
        self.progress_offset += 1
        event = ProgressEvent(
            connect_cluster="local",
            connector="orders-sink",
            source=SourceRecord(
                topic=PROGRESS_SOURCE_TOPIC,
                partition=0,
                offset=t * 1000 + self.progress_offset % 1000,
                timestamp_ms=t,
            ),
            task_id=task_id,
            progress=state,
            since_ms=t,
            grace_ms=GRACE,
            records_waiting=100,
            detail="100 records waiting",
        )
        self.state, made = decide(self.state, event, self.rules, SINK, t)
        return made


def test_one_decision_per_episode_however_often_the_collector_says_it() -> None:
    feed = Feed(RuleSet([restart_rule()]))
    feed.status(T0)
    made = feed.progress(T0 + 60 * SEC)
    assert [(d.rule, d.task_id, d.outcome) for d in made] == [("stuck-sink-restart", 0, "planned")]
    assert made[0].actions[0].type == "restart-tasks"
    assert made[0].actions[0].params["not_before_ms"] == T0 + 70 * SEC  # the backoff's 10 s
    assert made[0].inputs.trigger.progress == "stalled"
    for t in range(61, 89, 10):  # said again every cycle, within the grace: no decision
        assert feed.progress(T0 + t * SEC) == []


def test_a_replayed_progress_nudge_is_ignored() -> None:
    feed = Feed(RuleSet([restart_rule()]))
    feed.status(T0)
    event = ProgressEvent(
        connect_cluster="local",
        connector="orders-sink",
        source=SourceRecord(
            topic=PROGRESS_SOURCE_TOPIC, partition=0, offset=5, timestamp_ms=T0 + 60 * SEC
        ),
        task_id=0,
        progress="stalled",
        since_ms=T0,
        grace_ms=GRACE,
    )
    _, first = decide(feed.state, event, feed.rules, SINK, T0 + 60 * SEC)
    feed.state.progress.clear()  # even with the episode forgotten, the offset was seen
    _, again = decide(feed.state, event, feed.rules, SINK, T0 + 60 * SEC)
    assert len(first) == 1
    assert again == []


def test_a_new_status_record_starts_a_new_episode_after_its_grace() -> None:
    feed = Feed(RuleSet([restart_rule()]))
    feed.status(T0)
    assert len(feed.progress(T0 + 60 * SEC)) == 1
    feed.status(T0 + 75 * SEC, "RESTARTING")
    feed.status(T0 + 76 * SEC, "RUNNING")  # offsetd's restart went through; still hung
    assert feed.progress(T0 + 80 * SEC) == []  # 4 s after the restart: its first interval
    assert feed.progress(T0 + 100 * SEC) == []
    made = feed.progress(T0 + 106 * SEC)  # 30 s after it
    assert [(d.outcome, d.actions[0].params["attempt"]) for d in made] == [("planned", 1)]


def test_a_planned_restart_ends_an_episode_its_grace_after_the_restart_time() -> None:
    """A task that hangs in start() never writes a status: its restarts change nothing the
    engine can see, and the budget must still run out. Without a restart planned (the budget
    is used up) the episode stays one, however long it lasts."""
    feed = Feed(RuleSet([restart_rule()]))
    feed.status(T0)
    assert len(feed.progress(T0 + 60 * SEC, "unassigned")) == 0  # the rule wants stalled
    decided = {t: feed.progress(T0 + t * SEC) for t in range(60, 600, 10)}
    shown = {t: [(d.outcome, d.reason) for d in made] for t, made in decided.items() if made}
    # restarts at 70 s, 120 s, 190 s (backoff 10, 20, 40 s), each shown again 30 s after
    assert shown == {
        60: [("planned", None)],
        100: [("planned", None)],
        150: [("planned", None)],
        220: [("suppressed", "budget")],
    }


def test_ok_ends_the_episode() -> None:
    feed = Feed(RuleSet([restart_rule()]))
    feed.status(T0)
    assert len(feed.progress(T0 + 60 * SEC)) == 1
    assert feed.progress(T0 + 70 * SEC, "ok") == []
    assert feed.state.progress == {}
    assert len(feed.progress(T0 + 80 * SEC)) == 1  # stalled again: a new episode


def test_the_budget_runs_out_and_a_notify_rule_counting_episodes_takes_over() -> None:
    notify = Rule.model_validate(
        {
            "name": "stuck-sink-notify",
            "mode": "enforce",
            "match": {"kind": "progress", "progress": "stalled"},
            "when": {"count": 4, "within": "1h", "key": ["connector", "task_id"]},
            "actions": [{"type": "notify", "severity": "critical"}],
            "limits": {"cooldown": "30m"},
        }
    )
    feed = Feed(RuleSet([restart_rule(), notify]))
    feed.status(T0)
    outcomes = []
    for t in range(60, 300, 10):
        outcomes += [(d.rule, d.outcome, d.reason) for d in feed.progress(T0 + t * SEC)]
        if t in (80, 130, 200):  # the restarts went through: new status records, still hung
            feed.status(T0 + t * SEC)
    restarts = [o[1:] for o in outcomes if o[0] == "stuck-sink-restart"]
    assert restarts == [("planned", None)] * 3 + [("suppressed", "budget")]
    assert [o[1:] for o in outcomes if o[0] == "stuck-sink-notify"] == [("planned", None)]


def test_the_progress_condition_applies_to_progress_events_only() -> None:
    with pytest.raises(ValidationError, match="does not apply to task_status"):
        Rule.model_validate(
            {
                "name": "wrong",
                "match": {"kind": ["task_status", "progress"], "progress": "stalled"},
                "actions": [{"type": "notify"}],
            }
        )
    with pytest.raises(ValidationError):
        Rule.model_validate(
            {
                "name": "wrong",
                "match": {"kind": "progress", "progress": "hung"},
                "actions": [{"type": "notify"}],
            }
        )


def test_explain_says_why_a_progress_event_does_or_does_not_match() -> None:
    rules = RuleSet([restart_rule()])
    event = ProgressEvent(
        connect_cluster="local",
        connector="orders-sink",
        source=SourceRecord(topic=PROGRESS_SOURCE_TOPIC, partition=0, offset=1, timestamp_ms=T0),
        task_id=0,
        progress="lagging",
        since_ms=T0,
    )
    assert explain(event, rules, SINK) == [
        "stuck-sink-restart: no match: progress wants stalled, event has lagging"
    ]
    stalled = event.model_copy(update={"progress": "stalled"})
    assert explain(stalled, rules, SINK)[0].startswith("stuck-sink-restart: matches")
