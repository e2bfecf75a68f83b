"""The action catalogue is one thing: the rule format's models, the executor's handlers and
what every guard asks agree, for every action type — a new action left out of one of them, or
without its declared effects, fails here (issue 33: a writing action once could slip past the
pause, opt-out, breaker, blast-radius and Strimzi guards because it was missing from a list)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest

from offsetd.config import RemediationSettings
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.events.models import RecordRef, SourceRecord
from offsetd.offsets.backend import Refusal
from offsetd.remediation.actions import HANDLERS, parse_action
from offsetd.remediation.actions.base import PlannedSpec
from offsetd.remediation.control_state import ControlState, pause_record, skips_record
from offsetd.remediation.guards import PROCEED, GuardContext, evaluate
from offsetd.rules.actions import ACTION_TYPES, ACTIONS, ActionModel, Effects, effects_of
from offsetd.rules.loading import UNION_TAGS
from offsetd.rules.schema import rules_file_schema

NOW = 10_000_000
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SPEC_TYPES = {get_args(spec.model_fields["type"].annotation)[0]: spec for spec in HANDLERS}

# What a rule writes for each action (the smallest valid form), so every type is exercised.
MINIMAL: dict[str, dict[str, Any]] = {
    "rewind": {"plan_file": "plan.json"},
    "scale-tasks": {"to": 2},
}


def test_every_action_has_a_rule_model_a_spec_and_a_handler() -> None:
    assert set(ACTIONS) == set(SPEC_TYPES), "the rule format and HANDLERS disagree"
    assert set(ACTION_TYPES) <= UNION_TAGS  # the loader hides every type's union tag
    schema_types = {
        definition["properties"]["type"]["const"]
        for definition in rules_file_schema()["$defs"].values()
        if "const" in definition.get("properties", {}).get("type", {})
    }
    assert set(ACTIONS) <= schema_types  # editors complete every action


@pytest.mark.parametrize("action_type", ACTION_TYPES)
def test_one_model_per_action(action_type: str) -> None:
    """The executor's spec is the rule model plus what the engine computed, never a copy."""
    model, spec = ACTIONS[action_type], SPEC_TYPES[action_type]
    assert issubclass(spec, model)
    assert issubclass(spec, PlannedSpec)
    assert "effects" in vars(model), f"{model.__name__} must declare its own effects"
    assert isinstance(model.effects, Effects)
    assert spec.effects is model.effects
    # what the engine plans from a rule's action parses back into that action's spec
    rule_action = model.model_validate({"type": action_type, **MINIMAL.get(action_type, {})})
    planned = PlannedAction(type=action_type, params=rule_action.planned_params())
    parsed = parse_action(planned)
    assert type(parsed) is spec


def test_an_unknown_type_does_nothing_and_effects_combine() -> None:
    assert effects_of("no-such-action") == Effects()
    both = effects_of(["notify", "skip-record"])
    assert (both.tells_people, both.writes, both.moves_offsets, both.skips_record) == (True,) * 4
    assert not both.backoff
    assert effects_of(["restart-failed-tasks"]).backoff


def _decision(action_type: str, mode: str = "enforce") -> Decision:
    source = SourceRecord(topic="connect-status", partition=0, offset=7, timestamp_ms=NOW)
    return Decision(
        id=f"d-{action_type}",
        rule="r",
        mode=mode,
        connect_cluster="local",
        connector="orders",
        task_id=0,
        key="connector=orders",
        actions=(PlannedAction(type=action_type, params={}),),
        record=RecordRef(topic="orders", partition=0, offset=41),
        record_status="exact",
        outcome="planned",
        reason=None,
        detail=None,
        event_time_ms=NOW,
        decided_at_ms=NOW,
        inputs=DecisionInputs(
            events=(source,), trigger=EventSummary(kind="task_status", state="FAILED")
        ),
    )


def _ctx(state: ControlState, **kw: Any) -> GuardContext:
    defaults: dict[str, Any] = {
        "settings": RemediationSettings(),
        "control": state,
        "connector_class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "connector_type": "sink",
        "offsets_refusal": None,
        "failing_connectors": 0,
        "now_ms": NOW,
    }
    return GuardContext(**{**defaults, **kw})


def _paused() -> ControlState:
    state = ControlState()
    state.apply_record(pause_record(True, "sre", NOW - 1, "maintenance"))
    return state


@pytest.mark.parametrize("action_type", ACTION_TYPES)
def test_every_guard_asks_the_declared_effects(action_type: str) -> None:
    """Each protective guard holds exactly the actions whose effects call for it."""
    effects = effects_of(action_type)
    decision = _decision(action_type)
    free = evaluate(decision, _ctx(ControlState()))
    assert free.outcome == PROCEED, free.detail

    paused = evaluate(decision, _ctx(_paused()))
    assert (paused.outcome == "suppressed_paused") is effects.writes, paused.detail

    refused = Refusal("refused_strimzi", "strimzi", "Strimzi would revert it")
    by_backend = evaluate(decision, _ctx(ControlState(), offsets_refusal=refused))
    assert (by_backend.outcome == "refused_strimzi") is effects.writes

    outage = evaluate(decision, _ctx(ControlState(), failing_connectors=99))
    assert (outage.outcome == "suppressed_blast_radius") is effects.writes

    source = evaluate(
        decision, _ctx(ControlState(), connector_class=SOURCE_CLASS, connector_type="source")
    )
    assert (source.outcome == "refused_not_allowed") is effects.moves_offsets, source.detail

    spent = ControlState()
    budget = RemediationSettings().skip_budget
    for n in range(budget.max):
        spent.apply_record(skips_record(spent, "local", "orders", NOW - 1000 - n, budget.per))
    over = evaluate(decision, _ctx(spent))
    assert (over.outcome == "suppressed_budget") is effects.skips_record, over.detail

    observed = evaluate(_decision(action_type, mode="observe"), _ctx(_paused()))
    assert observed.outcome == "dry_run"
    assert observed.permit is None


def test_no_list_of_action_names_outside_the_catalogue() -> None:
    """What an action does is asked of its effects; a module that names an action type in a
    condition is a second catalogue that will drift (the demo's story names its skip). The
    one-word types (pause, stop, resume, ...) are also saga steps and verbs: for those, only a
    comparison with a `type` counts."""
    root = Path(__file__).resolve().parents[3] / "daemon" / "offsetd"
    allowed = {root / "rules" / "actions.py", root / "devstack" / "demo.py"}
    names = "|".join(re.escape(n) for n in ACTION_TYPES)
    compared = re.compile(rf"type\w*\)?\s*(==|!=|in\b)[^\n]*[\"']({names})[\"']")
    found = []
    for path in root.rglob("*.py"):
        if path in allowed:
            continue
        text = re.sub(r"Literal\[[^\]]*\]", "", path.read_text())
        for name in (n for n in ACTION_TYPES if "-" in n):
            if f'"{name}"' in text or f"'{name}'" in text:
                found.append(f"{path.relative_to(root)}: {name}")
        found += [f"{path.relative_to(root)}: {m.group(0)}" for m in compared.finditer(text)]
    assert not found, found


def test_a_model_without_declared_effects_is_caught() -> None:
    class Forgotten(ActionModel):  # inherits no effects of its own
        type: str = "forgotten"

    assert "effects" not in vars(Forgotten)
