"""What the compiled matcher needs of a rule (native/src/matcher/)."""

from __future__ import annotations

from typing import Any

from offsetd.rules.ruleset import CompiledRule

__all__ = ["match_part"]


def match_part(rule: CompiledRule) -> dict[str, Any]:
    """The rule's kinds, states and conditions as data."""
    return {}
