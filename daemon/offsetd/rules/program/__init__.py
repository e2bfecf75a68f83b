"""A rule set as data for the compiled path (native/README.md): one JSON document.

`rule_program(rules)` is what the compiled owner is built from: per rule, in load order, its
name, what the matcher needs (`match.match_part`: kinds, states, conditions, `unless`) and what
the engine needs (`engine.engine_part`: counting, limits, inhibitions, actions), plus the rule
set's own horizons (`engine.engine_set_part`). Only compiled rules' data: no predicate, no code.
Pure.
"""

from __future__ import annotations

import json

from offsetd.rules.program.engine import engine_part, engine_set_part
from offsetd.rules.program.match import match_part
from offsetd.rules.ruleset import RuleSet

__all__ = ["rule_program"]


def rule_program(rules: RuleSet) -> str:
    """The rule set as the compiled path reads it (JSON text)."""
    return json.dumps(
        {
            "rules": [
                {"name": rule.name, "matcher": match_part(rule), "engine": engine_part(rule)}
                for rule in rules
            ],
            "engine": engine_set_part(rules),
        }
    )
