"""The Kubernetes Events of remediation outcomes, pure parts: which reason and type each outcome
gets, what the note says (and never says), what aggregates, and the events.k8s.io/v1 body."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from offsetd.config.connect_clusters import ConnectCluster
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.events.models import RecordRef, SourceRecord
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.strimzi.resources import ConnectorResource
from offsetd.outcomes import FINAL_OUTCOMES
from offsetd.remediation.kube_events.body import (
    REPORTING_CONTROLLER,
    Regarding,
    event_body,
    event_name,
    micro_time,
    series_patch,
)
from offsetd.remediation.kube_events.notes import (
    FAILED,
    HELD,
    NOTE_LIMIT,
    REASONS,
    REFUSED,
    notes_for,
    scrub,
)
from offsetd.remediation.kube_events.publisher import KubeEvents, regarding_of
from offsetd.rules.actions import ACTIONS

NOW = 1_800_000_000_000
WEBHOOK = "https://hooks.example.com/services/T000/B000/SECRETPATH"


def decision(
    *,
    actions: tuple[str, ...] = ("skip-record",),
    id: str = "d1",
    offset: int = 41,
    outcome: str = "planned",
    connector: str = "orders-sink",
    rule: str = "skip-poison",
) -> Decision:
    source = SourceRecord(topic="connect-status", partition=0, offset=7, timestamp_ms=NOW)
    params = {"notify": {"webhook": WEBHOOK}}
    return Decision(
        id=id,
        rule=rule,
        mode="enforce",
        connect_cluster="local",
        connector=connector,
        task_id=0,
        key=f"connector={connector}",
        actions=tuple(PlannedAction(type=a, params=params.get(a, {})) for a in actions),
        record=RecordRef(topic="orders", partition=0, offset=offset),
        record_status="exact",
        outcome=outcome,
        reason=None if outcome == "planned" else "cooldown",
        detail=None,
        event_time_ms=NOW,
        decided_at_ms=NOW,
        inputs=DecisionInputs(
            events=(source,), trigger=EventSummary(kind="task_status", state="FAILED")
        ),
    )


REGARDING = Regarding("kafka.strimzi.io/v1", "KafkaConnector", "orders-sink", "kafka", "u-1")


# -- notes --------------------------------------------------------------------------------------


def test_an_executed_skip_names_its_record_and_the_decision_for_offsetd_history() -> None:
    [note] = notes_for(decision(), "executed", "skipped orders-0@41", {})
    assert (note.reason, note.type, note.action) == ("RecordSkipped", "Normal", "skip-record")
    assert "record orders/0@41" in note.note
    assert "offsetd history --incident d1" in note.note


def test_the_record_the_saga_located_wins_over_the_decisions() -> None:
    located = {"topic": "orders", "partition": 2, "offset": 99}
    [note] = notes_for(decision(), "failed", "boom", {}, located)
    assert note.record == "orders/2@99"
    assert "orders/2@99" in note.note


def test_every_action_of_the_catalogue_is_reported_by_a_stable_normal_reason() -> None:
    for action_type, model in ACTIONS.items():
        [note] = notes_for(decision(actions=(action_type,)), "executed", "done", {})
        assert note.reason == model.reported.reason
        assert re.fullmatch(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+", note.reason)
        assert REASONS[note.reason] == "Normal"
        assert note.action == action_type


def test_each_executed_action_is_its_own_event() -> None:
    found = notes_for(decision(actions=("stop", "notify")), "executed", "stopped; notified", {})
    assert [(n.reason, n.action) for n in found] == [
        ("ConnectorStopped", "stop"),
        ("PersonNotified", "notify"),
    ]


@pytest.mark.parametrize("outcome", sorted(FINAL_OUTCOMES))
def test_every_outcome_has_a_stable_reason_and_warning_means_not_done(outcome: str) -> None:
    found = notes_for(decision(actions=("restart-failed-tasks",)), outcome, "said", {})
    if outcome == "suppressed_out_of_scope":
        assert found == []  # another deployment's connector: its Events
        return
    [note] = found
    assert note.reason in REASONS
    assert REASONS[note.reason] == note.type
    held = outcome.startswith("suppressed_") or outcome in ("awaiting_approval", "breaker_open")
    if held:
        assert note.reason == HELD
    elif outcome.startswith("refused_") or outcome == "rejected":
        assert note.reason == REFUSED
    elif outcome in ("failed", "aborted", "not_located"):
        assert note.reason == FAILED
    assert (note.type == "Warning") == (note.reason in (HELD, REFUSED, FAILED))
    assert re.fullmatch(r"[A-Z][A-Za-z]+", note.reason)


def test_a_held_decision_whose_rule_notifies_also_says_people_were_told() -> None:
    held = decision(actions=("skip-record", "notify"))
    found = notes_for(held, "suppressed_paused", "automation is paused", {"guard": "pause"})
    assert [n.reason for n in found] == [HELD, "PersonNotified"]
    # a dry run tells nobody, and an engine-suppressed decision neither
    assert [n.reason for n in notes_for(held, "dry_run", "", {})] == ["RemediationObserved"]
    quiet = decision(actions=("skip-record", "notify"), outcome="suppressed")
    assert [n.reason for n in notes_for(quiet, "suppressed_cooldown", "", {})] == [HELD]


def test_records_of_one_cause_aggregate_and_other_causes_do_not() -> None:
    def key(**kw: Any) -> tuple[str, ...]:
        outcome = kw.pop("outcome", "suppressed_blast_radius")
        extra = {"guard": kw.pop("guard", "blast_radius")}
        return notes_for(decision(**kw), outcome, "too many failing", extra)[0].key

    base = key(id="a", offset=1)
    assert key(id="b", offset=2) == base  # another DLQ record, same hold: one Event
    assert key(id="c", offset=1, outcome="failed") != base
    assert key(id="d", offset=1, connector="other-sink") != base
    assert key(id="e", offset=1, rule="other-rule") != base
    assert key(id="f", offset=1, outcome="suppressed_paused", guard="pause") != base


def test_no_secret_reaches_a_note() -> None:
    said = (
        "POST https://bob:hunter2@connect:8083/connectors failed; password=hunter2 "
        'token: abc123 {"api_key": "k-999"}'
    )
    for note in notes_for(decision(actions=("notify",)), "failed", said, {}):
        assert "hunter2" not in note.note
        assert "abc123" not in note.note
        assert "k-999" not in note.note
        assert "SECRETPATH" not in note.note
    assert scrub("https://bob:pw@h/x") == "https://***@h/x"


def test_a_long_message_is_cut_to_the_apis_limit_keeping_the_decision_id() -> None:
    [note] = notes_for(decision(id="d-long"), "failed", "é" * 2000, {})
    assert len(note.note.encode()) <= NOTE_LIMIT
    assert note.note.endswith("(decision d-long)")


# -- the body -----------------------------------------------------------------------------------


def test_the_body_has_what_events_k8s_io_v1_requires() -> None:
    [note] = notes_for(decision(), "executed", "skipped", {})
    first = datetime(2026, 11, 28, 7, 30, 0, 0, tzinfo=UTC)  # zero microseconds: still six
    name = event_name(REGARDING, note, first)
    body = event_body(note, REGARDING, name=name, instance="w" * 300, first=first)
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["eventTime"] == "2026-11-28T07:30:00.000000Z"
    assert re.fullmatch(r"[a-z0-9.-]+/[A-Za-z0-9][-A-Za-z0-9_.]{0,61}", REPORTING_CONTROLLER)
    assert len(body["reportingInstance"]) == 128
    assert body["action"] == "skip-record"
    assert body["type"] == "Normal"
    assert body["regarding"]["uid"] == "u-1"
    assert body["metadata"]["namespace"] == "kafka"
    assert "series" not in body  # the API requires a series to count at least two
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name)
    assert len(name) <= 253
    assert event_name(REGARDING, note, first) == name
    assert event_name(REGARDING, note, first.replace(second=1)) != name
    assert WEBHOOK not in json.dumps(body)


def test_a_repeat_patches_the_series_and_names_the_latest_decision() -> None:
    [note] = notes_for(decision(id="d7", offset=7), "failed", "x", {})
    at = datetime(2026, 11, 28, 7, 31, 2, 5, tzinfo=UTC)
    assert series_patch(3, at, note) == {
        "series": {"count": 3, "lastObservedTime": "2026-11-28T07:31:02.000005Z"},
        "metadata": {
            "annotations": {
                "offsetd.io/last-decision": "d7",
                "offsetd.io/last-record": "orders/0@7",
            }
        },
    }
    assert micro_time(at) == "2026-11-28T07:31:02.000005Z"


def test_an_mm2_connectors_event_regards_its_kafkamirrormaker2_at_its_spec() -> None:
    doc = {"apiVersion": "kafka.strimzi.io/v1", "metadata": {"name": "mirror", "uid": "u-9"}}
    found = ConnectorResource(
        "KafkaMirrorMaker2",
        "mirror",
        "east->west.MirrorSourceConnector",
        "/spec/mirrors/0/sourceConnector",
        {},
        doc,
    )
    regarding = regarding_of(found, "kafka")
    assert (regarding.kind, regarding.name, regarding.uid) == ("KafkaMirrorMaker2", "mirror", "u-9")
    assert regarding.field_path == "spec.mirrors[0].sourceConnector"


# -- never in the way ---------------------------------------------------------------------------


def test_an_unreachable_api_server_is_counted_and_logged_once_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real (refused) connection: publishing returns at once and the failures are counted."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "sekrit-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    cluster = ConnectCluster.model_validate(
        {
            "url": "http://127.0.0.1:9",
            "kafka_cluster": "main",
            "orchestrator": "strimzi",
            "strimzi": {"namespace": "kafka", "kubeconfig": str(kubeconfig)},
        }
    )
    registry = CollectorRegistry()
    events = KubeEvents({"local": cluster}, "w1", RemediationMetrics.create(registry))

    async def run() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n in range(3):
            events.publish(decision(id=f"d{n}"), "failed", "boom", {})
        took = loop.time() - started
        await events.flush(10)
        events.publish(decision(id="d9"), "failed", "boom", {})
        await events.close(10)
        return took

    with caplog.at_level(logging.WARNING, logger="offsetd.kube_events"):
        took = asyncio.run(run())
    assert took < 0.05  # queued, not written, on the remediation's path
    failures = registry.get_sample_value(
        "offsetd_kube_event_failures_total", {"connect_cluster": "local"}
    )
    assert failures is not None
    assert failures >= 2
    reports = [r for r in caplog.records if "could not write a Kubernetes Event" in r.message]
    assert len(reports) == 1, [r.message for r in reports]
    assert "sekrit-token" not in caplog.text
