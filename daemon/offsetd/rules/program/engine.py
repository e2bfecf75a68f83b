"""What the compiled engine needs of a rule and a rule set (native/src/engine/).

The compiled rule's own fields, as the Python engine reads them (`offsetd.engine.decide`):
counting (`count`, `within_ms`, `key`), limits, inhibitions, `mode`, `enabled`, and each
action with its planned parameters (`CompiledAction.params`, JSON values in their order), its
restart backoff (the actions whose effects say `backoff`) and whether it skips a record. The
rule set adds its horizons (`RuleSet.restart_reset_ms`, `meta_within_ms`, `limits_horizon_ms`)
and the rules that need the connector's metadata (`RuleSet.meta_rules`), by name.
"""

from __future__ import annotations

from typing import Any

from offsetd.rules.models import Backoff
from offsetd.rules.ruleset import CompiledAction, CompiledRule, RuleSet

__all__ = ["engine_part", "engine_set_part"]


def engine_part(rule: CompiledRule) -> dict[str, Any]:
    """The rule's counting, limits, inhibitions and actions as data."""
    inhibits = rule.inhibits
    return {
        "mode": rule.mode,
        "enabled": rule.enabled,
        "count": rule.count,
        "within_ms": rule.within_ms,
        "key": list(rule.key),
        "keys_record": rule.keys_record,
        "cooldown_ms": rule.cooldown_ms,
        "budget_max": rule.budget_max,
        "budget_per_ms": rule.budget_per_ms,
        "inhibits": None
        if inhibits is None
        else {"rules": list(inhibits.rules), "for_ms": inhibits.for_},
        "has_skip": rule.has_skip,
        "needs_meta": rule.needs_meta,
        "actions": [_action_part(action) for action in rule.actions],
        "action_types": list(rule.action_types),
    }


def _action_part(action: CompiledAction) -> dict[str, Any]:
    """An action as `decide._plan_action` reads it."""
    return {
        "type": action.type,
        "params": action.params,
        "backoff": None if action.backoff is None else _backoff_part(action.backoff),
        "skips_record": action.effects.skips_record,
    }


def _backoff_part(backoff: Backoff) -> dict[str, Any]:
    """A backoff in milliseconds and its factor (a float: `counting.backoff_delay`)."""
    return {
        "initial": backoff.initial,
        "max": backoff.max,
        "factor": float(backoff.factor),
        "reset_after": backoff.reset_after,
    }


def engine_set_part(rules: RuleSet) -> dict[str, Any]:
    """The rule set's horizons (restart backoff reset, metadata window, limits)."""
    return {
        "restart_reset_ms": rules.restart_reset_ms,
        "meta_within_ms": rules.meta_within_ms,
        "limits_horizon_ms": rules.limits_horizon_ms,
        "meta_rules": [rule.name for rule in rules.meta_rules],
    }
