"""Where a bad configuration value came from: `offsetd.yaml:14` or `environment OFFSETD_...`.

Messages quote no input values (they may be secrets); problems a model validator raises for
sub-fields (`LocatedError`) are reported at those sub-fields.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from pydantic_core import ErrorDetails
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from offsetd.yamlerrors import LocatedError, dotted

__all__ = ["Locator", "format_errors"]


class Locator:
    """Says where the value at a field path came from: a file line or an env variable."""

    def __init__(
        self, path: Path | None, tree: CommentedMap | None, env: dict[tuple[str, ...], str]
    ) -> None:
        self.path = path
        self.tree = tree
        self.env = env

    def where(self, loc: tuple[str | int, ...]) -> str:
        lowered = tuple(str(part).lower() for part in loc)
        # The variable that set this value (or one of its ancestors)?
        for depth in range(len(lowered), 0, -1):
            name = self.env.get(lowered[:depth])
            if name is not None:
                return f"environment {name}"
        depth, line = self._deepest_in_file(loc)
        if depth < len(loc):
            # The path leaves the file here: do variables create what lies below?
            below = sorted(
                name for path, name in self.env.items() if path[: depth + 1] == lowered[: depth + 1]
            )
            if below:
                return "environment " + ", ".join(below)
        if self.path is None:
            return "environment"
        return f"{self.path}:{line}" if line else str(self.path)

    def _deepest_in_file(self, loc: tuple[str | int, ...]) -> tuple[int, int | None]:
        """How many leading parts of `loc` exist in the YAML, and the 1-based line of the last."""
        node: Any = self.tree
        if node is None:
            return 0, None
        line: int | None = node.lc.line + 1
        for depth, part in enumerate(loc):
            if isinstance(node, CommentedMap) and part in node:
                with contextlib.suppress(KeyError, TypeError):  # `<<:` merged keys: no position
                    line = node.lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line = node.lc.item(part)[0] + 1
                node = node[part]
            else:
                return depth, line
        return len(loc), line


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required field is missing",
}


def format_errors(errors: list[ErrorDetails], locator: Locator) -> list[str]:
    lines: list[str] = []
    for error in errors:
        loc = tuple(part for part in error["loc"] if part != "[key]")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, LocatedError):
            problems = [((*loc, *sub), msg) for sub, msg in cause.problems]
        else:
            msg = _MESSAGES.get(error["type"], error["msg"])
            problems = [(loc, msg.removeprefix("Value error, "))]
        for full_loc, msg in problems:
            field = dotted(full_loc)
            lines.append(f"{locator.where(full_loc)}: {field + ': ' if field else ''}{msg}")
    return lines
