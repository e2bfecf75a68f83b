"""Matching events against rules: pure, precompiled, indexed by event kind (and state).

`RuleSet.matching(event, meta)` is the hot path (`offsetd.rules.ruleset`): the rules that can
see an event are looked up by kind (and, for status events, state) and filtered by their name
and metadata conditions once per connector (remembered). Each remaining rule then runs one
precompiled predicate made of only the conditions it sets, cheapest first
(`offsetd.rules.conditions`). Results for names and exception classes are memoised (the same
few values repeat endlessly); plain-text `message` patterns are substring tests, not regexes
(`offsetd.rules.patterns`). `explain`, here, walks every rule slowly and says why it matched
or not.
"""

from __future__ import annotations

from typing import Any

from offsetd.durations import format_duration
from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ProgressEvent,
    SourceOffsetEvent,
    TaskStatusEvent,
    TopicStatusEvent,
)
from offsetd.rules.conditions import Condition
from offsetd.rules.models import ConnectorMeta
from offsetd.rules.ruleset import CompiledAction, CompiledRule, RuleSet, compile_rule

__all__ = [
    "AnyEvent",
    "CompiledAction",
    "CompiledRule",
    "RuleSet",
    "compile_rule",
    "explain",
]

AnyEvent = (
    ConnectorStatusEvent
    | TaskStatusEvent
    | TopicStatusEvent
    | DlqRecordEvent
    | SourceOffsetEvent
    | ProgressEvent
)


def explain(event: Any, rules: RuleSet, meta: ConnectorMeta | None) -> list[str]:
    """One line per rule: whether it matches `event`, and if not, the first reasons why.

    Only matching is explained; counting, staleness and limits are the engine's (see the
    `reason` of a suppressed decision).
    """
    lines: list[str] = []
    kind = str(event.kind)
    for rule in rules.rules:
        if event.kind not in rule.kinds:
            wanted = ", ".join(sorted(str(k) for k in rule.kinds))
            lines.append(f"{rule.name}: no match: kind is {kind}, rule wants {wanted}")
            continue
        failed = [_failure(c, event, meta) for c in rule.conditions if not c.test(event, meta)]
        if failed:
            lines.append(f"{rule.name}: no match: " + "; ".join(failed))
            continue
        if rule.needs_meta and meta is None:  # an `unless` on the class or type
            lines.append(
                f"{rule.name}: no match yet: its unless needs connector metadata (class/type) "
                "and none is known (the daemon decides the event once it is)"
            )
            continue
        if rule.unless_conditions and all(c.test(event, meta) for c in rule.unless_conditions):
            held = ", ".join(c.name for c in rule.unless_conditions)
            verb = "holds" if len(rule.unless_conditions) == 1 else "all hold"
            lines.append(f"{rule.name}: no match: excluded by unless ({held} {verb})")
            continue
        when = rule.rule.when
        note = "" if rule.enabled else " (rule disabled: decisions are suppressed)"
        lines.append(
            f"{rule.name}: matches (counts toward {when.count} within "
            f"{format_duration(when.within)} per {'+'.join(when.key)}){note}"
        )
    return lines


def _failure(condition: Condition, event: Any, meta: ConnectorMeta | None) -> str:
    if condition.needs_meta and meta is None:
        return f"{condition.name} needs connector metadata (class/type) and none is known"
    return f"{condition.name} wants {condition.wanted}, event has {condition.actual(event, meta)}"
