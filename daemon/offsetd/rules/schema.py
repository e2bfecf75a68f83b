"""The JSON Schema of a rules file, for editors (e.g. yaml-language-server's `$schema`).

A rules file holds one rule (a mapping) or a list of rules. The schema says exactly that
without a top-level `anyOf`, so editors complete the single-rule form directly:
`properties` (which only constrain objects) are the rule's, and `items` (which only
constrain arrays) refer to the rule definition.
"""

from __future__ import annotations

import copy
from typing import Any

from offsetd.durations import DURATION_PATTERN, format_duration
from offsetd.rules.models import Rule

__all__ = ["SCHEMA_DIALECT", "rules_file_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def rules_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one rules file."""
    rule = Rule.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    _durations_as_text(rule)
    defs: dict[str, Any] = rule.pop("$defs", {})
    defs["Rule"] = copy.deepcopy(rule)
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://offsetd.dev/schemas/rules-file.json",
        "title": "offsetd rules file",
        "description": "One offsetd remediation rule, or a list of rules. "
        "Validate with `offsetd rules check DIR`.",
        "type": ["object", "array"],
        "properties": rule["properties"],
        "required": rule.get("required", []),
        "additionalProperties": False,
        "items": {"$ref": "#/$defs/Rule"},
        "$defs": defs,
    }
    return schema


def _durations_as_text(node: Any) -> None:
    """Durations are kept as milliseconds; show their defaults the way they are written."""
    if isinstance(node, dict):
        default = node.get("default")
        if node.get("pattern") == DURATION_PATTERN and isinstance(default, int):
            node["default"] = format_duration(default)
        for value in node.values():
            _durations_as_text(value)
    elif isinstance(node, list):
        for value in node:
            _durations_as_text(value)
