"""A decision's audit record: its rule's spec made once and shared, frozen, and the record's
bytes (`audit_json`) exactly `json.dumps(record).encode()`, as the audit wrote them before."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.engine import Decision
from offsetd.engine.decision import PlannedAction, RuleSpec, audit_json, rule_spec
from offsetd.rules import RuleSet
from tests.unit.engine.test_engine_decide import MIN, RESTART, Feed, poison_rules, rules


def restart_decision(ruleset: RuleSet) -> Decision:
    f = Feed(ruleset)
    [d] = f.feed(f.task(0))
    return d


def as_before(decision: Decision, ruleset: RuleSet) -> bytes:
    """The bytes the audit wrote before the shared spec: everything dumped afresh."""
    record = decision.model_dump(mode="json")
    record["rule_spec"] = ruleset.by_name[decision.rule].rule.model_dump(mode="json", by_alias=True)
    return json.dumps(record).encode()


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()


@given(
    description=st.text(),
    factor=st.floats(1.0, 10.0),
    detail=st.none() | st.text(),
    connector=st.text(min_size=1),
    params=st.dictionaries(st.text(), JSON_SCALARS | st.lists(JSON_SCALARS, max_size=3)),
)
@settings(max_examples=300, deadline=None)
def test_an_audit_records_bytes_are_exactly_json_dumps(
    description: str, factor: float, detail: str | None, connector: str, params: dict[str, Any]
) -> None:
    """Random rules and decisions, non-ASCII text (escaped by json.dumps), floats (repr, and
    json.dumps's Infinity/NaN) in the rule and in the decision."""
    restart = {**RESTART, "description": description}
    restart["actions"] = [{"type": "restart-failed-tasks", "backoff": {"factor": factor}}]
    ruleset = rules(restart)
    made = restart_decision(ruleset)
    action = made.actions[0]
    decision = made.model_copy(
        update={
            "detail": detail,
            "connector": connector,
            "actions": (PlannedAction(type=action.type, params={**action.params, **params}),),
        }
    )
    record = decision.audit_record(ruleset)
    assert type(record["rule_spec"]) is RuleSpec
    assert audit_json(record) == json.dumps(record).encode() == as_before(decision, ruleset)
    assert audit_json(decision.audit_record()) == json.dumps(decision.audit_record()).encode()


def test_the_spec_is_made_once_per_compiled_rule() -> None:
    ruleset = poison_rules()
    d = restart_decision(ruleset)
    first, again = d.audit_record(ruleset), d.audit_record(ruleset)
    assert first is not again
    assert first["rule_spec"] is again["rule_spec"] is rule_spec(ruleset.by_name["restart"])
    reloaded = poison_rules()  # the same rules loaded again: their own spec
    assert d.audit_record(reloaded)["rule_spec"] is not first["rule_spec"]
    assert d.audit_record(reloaded)["rule_spec"] == first["rule_spec"]


def refusals(spec: dict[str, Any]) -> list[Callable[[], object]]:
    actions, action, inhibited = spec["actions"], spec["actions"][0], spec["inhibits"]["rules"]
    return [
        lambda: spec.__setitem__("name", "other"),
        lambda: spec.__delitem__("name"),
        lambda: spec.pop("name"),
        spec.popitem,
        spec.clear,
        lambda: spec.update(name="other"),
        lambda: spec.setdefault("new", 1),
        lambda: spec.__ior__({"name": "other"}),
        lambda: action.__setitem__("type", "other"),
        lambda: spec["when"].update(count=9),
        lambda: actions.append({}),
        lambda: actions.extend([{}]),
        lambda: actions.insert(0, {}),
        actions.pop,
        lambda: actions.remove(action),
        actions.clear,
        lambda: actions.__setitem__(0, {}),
        lambda: actions.__delitem__(0),
        lambda: actions.__iadd__([{}]),
        lambda: actions.__imul__(2),
        inhibited.sort,
        inhibited.reverse,
    ]


def test_no_holder_of_a_record_can_change_the_shared_spec() -> None:
    ruleset = poison_rules()
    f = Feed(ruleset)
    [d] = [d for t in range(3) for d in f.feed(f.dlq(t * MIN))]
    record = d.audit_record(ruleset)
    spec = record["rule_spec"]
    before = json.dumps(spec)
    for change in refusals(spec):
        with pytest.raises(TypeError, match="shared by every audit record"):
            change()
    assert json.dumps(spec) == before == spec.text
    assert audit_json(d.audit_record(ruleset)) == as_before(d, ruleset)
    # the record itself is the caller's, and copies of the spec are plain and mutable
    for mine in (copy.deepcopy(record), pickle.loads(pickle.dumps(record))):  # noqa: S301
        assert mine == record
        assert type(mine["rule_spec"]) is dict
        assert type(mine["rule_spec"]["actions"]) is list
        mine["rule_spec"]["actions"].append({"type": "notify"})
    assert type(copy.copy(spec)) is dict
    assert type(spec.copy()) is dict
    assert json.dumps(spec) == before


def test_a_changed_record_is_encoded_as_it_now_is() -> None:
    ruleset = poison_rules()
    d = restart_decision(ruleset)
    replaced = d.audit_record(ruleset)
    replaced["rule_spec"] = {"name": "mine"}
    after = {**d.audit_record(ruleset), "added": "é"}  # the spec is no longer the last key
    changed = d.audit_record(ruleset)
    changed["detail"] = "ü, 1e-07"
    alone = {"rule_spec": d.audit_record(ruleset)["rule_spec"]}
    for record in (replaced, after, changed, alone):
        assert audit_json(record) == json.dumps(record).encode()
