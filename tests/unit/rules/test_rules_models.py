"""offsetd.rules.models: the rule format, its defaults and its validation."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from offsetd.rules.models import (
    Backoff,
    Match,
    Notify,
    RegexPattern,
    Rule,
    format_duration,
    parse_duration,
)


def rule(**overrides: Any) -> Rule:
    data: dict[str, Any] = {
        "name": "r",
        "match": {"kind": "task_status", "state": "FAILED"},
        "actions": [{"type": "notify"}],
    }
    data.update(overrides)
    return Rule.model_validate(data)


def messages(exc: ValidationError) -> list[str]:
    return [
        ".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in exc.errors(include_url=False)
    ]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0s", 0),
        ("500ms", 500),
        ("30s", 30_000),
        ("10m", 600_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        (" 1m ", 60_000),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["10", "10 minutes", "1.5h", "m", "", "-1s", "1h 30m", 10, True])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**12))
def test_format_duration_round_trips(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms


def test_defaults_are_safe() -> None:
    r = rule()
    assert r.mode == "observe"  # a new rule only plans
    assert r.enabled
    assert (r.when.count, r.when.within, r.when.key) == (1, 600_000, ["connector"])
    assert (r.limits.budget.max, r.limits.budget.per, r.limits.cooldown) == (5, 3_600_000, 120_000)
    assert r.inhibits is None


def test_one_or_many_and_patterns() -> None:
    m = Match.model_validate(
        {
            "kind": "dlq_record",
            "connector": ["orders-*", {"regex": "pay-(eu|us)"}],
            "connector_class": "io.confluent.*",
            "task_id": 0,
            "stage": "value_converter",
            "message": "(?i)boom",
        }
    )
    assert m.kind == ["dlq_record"]
    assert m.connector == ["orders-*", RegexPattern(regex="pay-(eu|us)")]
    assert m.connector_class == ["io.confluent.*"]
    assert m.task_id == [0]
    assert m.stage == ["VALUE_CONVERTER"]  # case-insensitive, stored upper
    assert m.message == ["(?i)boom"]


def test_state_is_upper_cased_and_checked() -> None:
    assert rule(match={"kind": "task_status", "state": "failed"}).match.state == ["FAILED"]
    with pytest.raises(ValidationError, match=r"match\.state\.0"):
        rule(match={"kind": "task_status", "state": "BROKEN"})


def test_invalid_regexes_are_rejected_at_load() -> None:
    with pytest.raises(ValidationError) as info:
        rule(match={"kind": "task_status", "connector": {"regex": "a("}, "message": ["ok", "b["]})
    text = "\n".join(messages(info.value))
    assert "match.connector.0.<regex>.regex: Value error, invalid regex" in text
    assert "match.message.1: Value error, invalid regex" in text


def test_conditions_must_apply_to_every_kind() -> None:
    with pytest.raises(ValidationError, match="does not apply to dlq_record events"):
        rule(match={"kind": ["task_status", "dlq_record"], "state": "FAILED"})
    with pytest.raises(ValidationError, match="does not apply to task_status events"):
        rule(match={"kind": "task_status", "stage": "TASK_PUT"})
    with pytest.raises(ValidationError, match="does not apply to connector_status"):
        rule(match={"kind": "connector_status", "unless": {"task_id": 1}})
    with pytest.raises(ValidationError, match="at least one condition"):
        rule(match={"kind": "task_status", "unless": {}})


def test_unknown_keys_and_kinds() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        rule(match={"kind": "task_status", "colour": "red"})
    with pytest.raises(ValidationError, match=r"match.kind.0"):
        rule(match={"kind": "task_failed"})
    with pytest.raises(ValidationError, match="kind"):
        rule(match={"state": "FAILED"})  # kind is required


def test_when() -> None:
    r = rule(
        match={"kind": "dlq_record"},
        when={"count": 3, "within": "10m", "key": ["connector", "record"]},
    )
    assert (r.when.count, r.when.within) == (3, 600_000)
    with pytest.raises(ValidationError, match="listed twice"):
        rule(when={"key": ["connector", "connector"]})
    with pytest.raises(ValidationError, match="record is only known for dlq_record"):
        rule(when={"key": "record"})
    with pytest.raises(ValidationError, match="longer than 0s"):
        rule(when={"within": "0s"})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        rule(when={"count": 0})
    with pytest.raises(ValidationError, match="less than or equal to 1000"):
        rule(when={"count": 1001})


def test_actions_catalogue() -> None:
    r = rule(
        actions=[
            {"type": "restart-failed-tasks"},
            {"type": "skip-record"},
            {"type": "pause"},
            {"type": "stop"},
            {"type": "resume"},
            {"type": "rewind", "to_timestamp": "2024-05-01T14:02:00Z"},
            {"type": "rewind", "plan_file": "plans/orders.json"},
            {"type": "notify", "severity": "critical", "webhook": "https://hooks.example/x?t=1"},
        ]
    )
    assert [a.type for a in r.actions][:2] == ["restart-failed-tasks", "skip-record"]
    restart = r.actions[0]
    assert restart.type == "restart-failed-tasks"
    assert restart.backoff == Backoff.model_validate(
        {"initial": "30s", "max": "10m", "factor": 2, "reset_after": "30m"}
    )
    assert restart.backoff.model_dump() == {
        "initial": "30s",
        "max": "10m",
        "factor": 2.0,
        "reset_after": "30m",
    }
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        rule(actions=[{"type": "reboot"}])
    with pytest.raises(ValidationError, match="exactly one of to_timestamp or plan_file"):
        rule(actions=[{"type": "rewind"}])
    with pytest.raises(ValidationError, match="exactly one of to_timestamp or plan_file"):
        rule(actions=[{"type": "rewind", "to_timestamp": "2024-05-01T14:02:00Z", "plan_file": "p"}])
    with pytest.raises(ValidationError, match="timezone"):
        rule(actions=[{"type": "rewind", "to_timestamp": "2024-05-01T14:02:00"}])
    with pytest.raises(ValidationError, match="not be shorter than initial"):
        rule(actions=[{"type": "restart-failed-tasks", "backoff": {"initial": "1m", "max": "30s"}}])
    with pytest.raises(ValidationError, match="at least 1 item"):
        rule(actions=[])


@pytest.mark.parametrize(
    "url", ["ftp://hooks.example/x", "https://", "hooks.example/x", "https://u:p@hooks.example/"]
)
def test_webhook_must_be_a_plain_http_url(url: str) -> None:
    with pytest.raises(ValidationError) as info:
        Notify.model_validate({"type": "notify", "webhook": url})
    message = info.value.errors(include_input=False)[0]["msg"]
    assert "hooks.example" not in message  # never echoed: webhook URLs often carry tokens


def test_notify_summary_is_plain_text() -> None:
    # Rules are data: a template-looking summary is kept verbatim, never rendered.
    n = Notify.model_validate({"type": "notify", "summary": "{{ __import__('os') }}"})
    assert n.summary == "{{ __import__('os') }}"


def test_inhibits() -> None:
    r = rule(inhibits={"rules": "other", "for": "5m"})
    assert r.inhibits is not None
    assert (r.inhibits.rules, r.inhibits.for_) == (["other"], 300_000)
    with pytest.raises(ValidationError, match="cannot inhibit itself"):
        rule(inhibits={"rules": ["r"]})


def test_rule_names() -> None:
    with pytest.raises(ValidationError, match="name"):
        rule(name="Has Spaces")
    assert rule(name="poison-record.skip_2").name == "poison-record.skip_2"


def test_rules_round_trip_through_json() -> None:
    r = rule(
        match={"kind": "dlq_record", "connector": ["a-*", {"regex": "b.*"}]},
        when={"count": 3, "within": "1h30m", "key": ["connector", "record"]},
        actions=[{"type": "restart-failed-tasks"}, {"type": "rewind", "plan_file": "p.json"}],
        inhibits={"rules": "x", "for": "5m"},
    )
    dumped = r.model_dump(mode="json", by_alias=True)
    assert dumped["when"]["within"] == "1h30m"
    assert dumped["inhibits"] == {"rules": ["x"], "for": "5m"}
    assert Rule.model_validate(dumped) == r


def test_rules_are_frozen() -> None:
    r = rule()
    with pytest.raises(ValidationError):
        r.name = "x"  # type: ignore[misc]
