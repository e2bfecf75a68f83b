"""Read YAML files and say where a validation problem is: `file:line: field.path: message`.

Shared by `offsetd.config`, the rule loader and the rule-test runner: parse with ruamel's
round-trip loader, which remembers the line of every key and list item, convert to plain
Python values for pydantic, and map each pydantic error location back to a line. Used by the
rule loader and the rule-test runner, whose files may hold many documents' worth of fields.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic_core import ErrorDetails
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

__all__ = [
    "Loc",
    "LocatedError",
    "YamlFileError",
    "dotted",
    "expansion_problem",
    "format_errors",
    "line_of",
    "plain",
    "read_yaml",
]

Loc = tuple[str | int, ...]


class YamlFileError(Exception):
    """A file cannot be read or parsed; `problems` are ready-to-print `file:line: ...` lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class LocatedError(ValueError):
    """Problems at field paths *below* the validator that raises them.

    A model validator can only fail as a whole; this carries exact sub-paths so the message
    (and the YAML line) points at the offending field rather than its parent.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{dotted(loc)}: {msg}" for loc, msg in problems))


def read_yaml(path: Path) -> Any:
    """The round-trip tree of a YAML file (None if empty); `YamlFileError` names file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlFileError([f"{path}: no such file"]) from None
    except UnicodeDecodeError as exc:
        raise YamlFileError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None
    except OSError as exc:
        raise YamlFileError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        tree = YAML(typ="rt").load(text)
    except RecursionError:
        raise YamlFileError([f"{path}: refused: nested too deeply"]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        if isinstance(exc, DuplicateKeyError):
            problem = "duplicate key"
        else:
            problem = exc.problem or exc.context or "syntax error"
        raise YamlFileError([f"{where}: invalid YAML: {problem}"]) from None
    except YAMLError:
        # its text may quote the offending source line, which can hold a secret
        raise YamlFileError([f"{path}: invalid YAML"]) from None
    refused = expansion_problem(tree, len(text))
    if refused is not None:
        raise YamlFileError([f"{path}: {refused}"])
    return tree


# Values a file may expand to through its aliases beyond its own size: a file without aliases
# has fewer values than characters, and nine nested anchors of nine aliases each (a "billion
# laughs" file of 300 bytes) would expand to 387 million.
EXPANSION_ALLOWANCE = 100_000


def expansion_problem(data: Any, text_length: int) -> str | None:
    """Why `data` (a loaded YAML tree, aliases shared) is refused, or None.

    Counts the values a walk through every alias meets, stopping at the limit: the cost is
    bounded by the limit, whatever the file. Everything that later walks the data (conversion,
    validation, JSON) would expand the aliases the same way, without a bound.
    """
    limit = EXPANSION_ALLOWANCE + text_length
    seen = 0
    pending = [data]
    while pending:
        node = pending.pop()
        seen += 1
        if seen > limit:
            return (
                f"refused: its aliases expand to more than {limit:,} values "
                "(anchors repeated inside anchors: a YAML bomb?)"
            )
        if isinstance(node, dict):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list | tuple | set):
            pending.extend(node)
    return None


class _Unsupported(Exception):
    def __init__(self, loc: Loc, problem: str) -> None:
        super().__init__(problem)
        self.loc = loc
        self.problem = problem


def plain(node: Any, path: Path, loc: Loc = ()) -> Any:
    """ruamel's round-trip values as plain dict/list/str/int/float/bool/None.

    Raises `YamlFileError` for values pydantic should never see (dates, sets) and for every
    explicit tag but `!!str`: these files are data, and a `!!python/...` tag that does nothing
    here would still say it does something.
    """
    try:
        return _plain(node, loc)
    except RecursionError:
        raise YamlFileError([f"{path}: refused: nested too deeply"]) from None
    except _Unsupported as exc:
        line = line_of(node, exc.loc[len(loc) :])
        where = f"{path}:{line}" if line else str(path)
        raise YamlFileError([f"{where}: {dotted(exc.loc)}: {exc.problem}"]) from None


_STR_TAG = "tag:yaml.org,2002:str"
_DATA_ONLY = "these files are data: maps, lists, strings, numbers, booleans and null"


def _tag_of(node: Any) -> str | None:
    return getattr(getattr(node, "tag", None), "value", None)


def _shown_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org") else tag


def _plain(node: Any, loc: Loc) -> Any:
    tag = _tag_of(node)
    if tag is not None and tag != _STR_TAG:
        raise _Unsupported(loc, f"YAML tag {_shown_tag(tag)} is not allowed ({_DATA_ONLY})")
    if tag == _STR_TAG:
        return str(getattr(node, "value", node))
    if isinstance(node, dict):  # CommentedMap is a dict
        return {
            (str(k) if isinstance(k, str) else _plain(k, loc)): _plain(v, (*loc, k))
            for k, v in node.items()
        }
    if isinstance(node, list):  # CommentedSeq is a list
        return [_plain(v, (*loc, i)) for i, v in enumerate(node)]
    if isinstance(node, bool):  # before int: ScalarBoolean is an int
        return bool(node)
    for kind in (str, int, float):
        if isinstance(node, kind):
            return kind(node)
    if node is None:
        return None
    raise _Unsupported(
        loc, f"unsupported YAML value of type {type(node).__name__} (quote it to make it a string)"
    )


def line_of(tree: Any, loc: Loc, skip: frozenset[str] = frozenset()) -> int | None:
    """The 1-based line of the deepest part of `loc` found in `tree` (None if none is)."""
    node: Any = tree
    line: int | None = None
    with contextlib.suppress(AttributeError):
        line = node.lc.line + 1
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            with contextlib.suppress(KeyError, TypeError):  # `<<:` merged keys: no position
                line = node.lc.key(part)[0] + 1
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line = node.lc.item(part)[0] + 1
            node = node[part]
        elif isinstance(part, str) and part in skip:
            continue  # a union tag pydantic puts in the path; not in the file
        else:
            break
    return line


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required field is missing",
}


def format_errors(
    errors: Iterable[ErrorDetails],
    path: Path,
    tree: Any,
    prefix: Loc = (),
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """pydantic errors as `file:line: field.path: message` lines.

    `tree` is the YAML node that was validated, found at `prefix` in the file (prefix is
    shown in the field path, e.g. `[2]` for the third rule of a list). Parts of error
    locations listed in `skip` (union tags) are left out of the field path.
    """
    lines: list[str] = []
    for error in errors:
        loc = tuple(part for part in error["loc"] if part != "[key]")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, LocatedError):
            problems = [((*loc, *sub), msg) for sub, msg in cause.problems]
        elif error["type"] == "union_tag_invalid":
            ctx = error.get("ctx") or {}
            field = str(ctx.get("discriminator", "")).strip("'")
            problems = [
                (
                    (*loc, field) if field else loc,
                    f"unknown value {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}",
                )
            ]
        else:
            msg = _MESSAGES.get(error["type"], error["msg"])
            problems = [(loc, msg.removeprefix("Value error, "))]
        for full_loc, msg in problems:
            line = line_of(tree, full_loc, skip)
            where = f"{path}:{line}" if line else str(path)
            shown = tuple(part for part in (*prefix, *full_loc) if part not in skip)
            field = dotted(shown)
            lines.append(f"{where}: {field + ': ' if field else ''}{msg}")
    return lines


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def dotted(loc: Iterable[Any]) -> str:
    """`tests[0].events[2].state`; keys with dots or spaces are quoted in brackets."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.fullmatch(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out
