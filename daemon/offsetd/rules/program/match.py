"""What the compiled matcher needs of a rule (native/src/matcher/).

The rule's kinds, states and conditions as plain data, read from the validated rule
(`CompiledRule.rule.match` and its `unless`): names as `{"glob": ...}` or `{"regex": ...}`,
classes, stages and failures as lists, message regexes with the literals Python's prefilter
requires of them (`patterns._required_literals`: the compiled side applies the same prefilter,
so its answers cannot drift from Python's even where that parse is Python's own reading).
"""

from __future__ import annotations

from typing import Any

from offsetd.rules.fields import RegexPattern
from offsetd.rules.match import Unless
from offsetd.rules.patterns import (  # the steps `any_regex` takes, taken the same way
    _required_literals,
    _scoped,
    substrings_only,
)
from offsetd.rules.ruleset import CompiledRule
from offsetd.saferegex import RegexRefused, compile_regex

__all__ = ["match_part"]

_NAME_CONDITIONS = frozenset(
    {
        "connect_cluster",
        "connector",
        "connector_class",
        "exception_class",
        "root_cause_class",
        "origin_topic",
    }
)
_LISTS = frozenset({"state", "progress", "stage", "failure"})


def match_part(rule: CompiledRule) -> dict[str, Any]:
    """The rule's kinds, states and conditions as data.

    `conditions` leaves out `state`: the index resolves it (`states`), as `RuleSet` does.
    """
    match = rule.rule.match
    return {
        "kinds": [str(kind) for kind in match.kind],
        "states": None if match.state is None else list(match.state),
        "conditions": _conditions(match, skip=frozenset({"state"})),
        "unless": None if match.unless is None else _conditions(match.unless),
    }


def _conditions(conds: Unless, skip: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    return [
        _condition(name, value) for name, value in conds.conditions().items() if name not in skip
    ]


def _condition(name: str, value: Any) -> dict[str, Any]:
    if name in _NAME_CONDITIONS:
        return {"name": name, "patterns": [_pattern(p) for p in value]}
    if name in _LISTS:
        return {"name": name, "values": [str(v) for v in value]}
    if name == "task_id":
        return {"name": name, "ids": [int(i) for i in value]}
    if name == "connector_type":
        return {"name": name, "value": str(value)}
    if name == "message":
        patterns = [str(p) for p in value]
        required = None if substrings_only(patterns) else _prefilter(patterns)
        return {
            "name": name,
            "patterns": patterns,
            "required": None if required is None else {"plain": required[0], "folded": required[1]},
        }
    raise ValueError(f"a condition the compiled matcher does not know: {name}")


def _prefilter(patterns: list[str]) -> tuple[list[str], list[str]] | None:
    """The literals `any_regex` requires before it runs the regexes: none where RE2 refuses
    their joined alternation (it then runs each pattern alone, unfiltered)."""
    try:
        compile_regex("|".join(_scoped(p) for p in patterns))
    except RegexRefused:
        return None
    return _required_literals(patterns)


def _pattern(pattern: str | RegexPattern) -> dict[str, str]:
    if isinstance(pattern, RegexPattern):
        return {"regex": pattern.regex}
    return {"glob": pattern}
