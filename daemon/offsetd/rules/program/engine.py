"""What the compiled engine needs of a rule and a rule set (native/src/engine/)."""

from __future__ import annotations

from typing import Any

from offsetd.rules.ruleset import CompiledRule, RuleSet

__all__ = ["engine_part", "engine_set_part"]


def engine_part(rule: CompiledRule) -> dict[str, Any]:
    """The rule's counting, limits, inhibitions and actions as data."""
    return {}


def engine_set_part(rules: RuleSet) -> dict[str, Any]:
    """The rule set's horizons (restart backoff reset, metadata window, limits)."""
    return {}
