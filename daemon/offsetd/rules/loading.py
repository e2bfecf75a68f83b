"""Loading a folder of rule files: YAML -> validated `Rule`s -> a compiled `RuleSet`.

Each `*.yaml` / `*.yml` file directly in the folder (subfolders such as `tests/` are not
read) holds one rule (a mapping) or a list of rules. Every problem in every file is collected
and reported at once, one per line, as `file:line: field.path: message`; nothing is loaded
unless everything is valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from offsetd.errors import OffsetdError
from offsetd.rules.matching import RuleSet
from offsetd.rules.models import ACTION_TYPES, GLOB_TAG, REGEX_TAG, Rule
from offsetd.yamlerrors import YamlFileError, dotted, format_errors, line_of, plain, read_yaml

__all__ = [
    "LoadedRule",
    "RulesError",
    "check_rule_files",
    "load_rule_files",
    "load_rules",
    "rule_files",
]

# Union tags pydantic puts into error locations; they are not keys in the file.
UNION_TAGS = frozenset({GLOB_TAG, REGEX_TAG, *ACTION_TYPES})


class RulesError(OffsetdError):
    """Rule files are invalid; `problems` holds one `file:line: field: message` per entry."""

    exit_code = 1

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class LoadedRule:
    """A validated rule and where it was written."""

    rule: Rule
    path: Path
    line: int | None
    prefix: tuple[str | int, ...]  # () for a one-rule file, (i,) for the i-th of a list
    node: Any = field(default=None, repr=False, compare=False)  # its YAML tree (line info)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)


def rule_files(folder: Path) -> list[Path]:
    """The rule files of a folder, sorted by name (not recursive)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in {".yaml", ".yml"})


def load_rules(folder: Path) -> RuleSet:
    """All rules of a folder as a `RuleSet`; raises `RulesError` listing every problem."""
    if not folder.is_dir():
        raise RulesError([f"{folder}: not a folder"])
    return load_rule_files(rule_files(folder))


def load_rule_files(paths: Sequence[Path]) -> RuleSet:
    """The rules of these files (in this order) as a `RuleSet`; raises `RulesError`."""
    loaded, problems = check_rule_files(paths)
    if problems:
        raise RulesError(problems)
    return RuleSet(item.rule for item in loaded)


def check_rule_files(paths: Sequence[Path]) -> tuple[list[LoadedRule], list[str]]:
    """Validate files without raising: the valid rules, and every problem found."""
    loaded: list[LoadedRule] = []
    problems: list[str] = []
    for path in paths:
        file_rules, file_problems = _load_file(path)
        loaded.extend(file_rules)
        problems.extend(file_problems)
    problems.extend(_cross_check(loaded))
    return loaded, problems


def _load_file(path: Path) -> tuple[list[LoadedRule], list[str]]:
    try:
        tree = read_yaml(path)
    except YamlFileError as exc:
        return [], exc.problems
    if tree is None:
        return [], []  # an empty file (or only comments): no rules
    if isinstance(tree, CommentedMap):
        items: list[tuple[tuple[str | int, ...], Any]] = [((), tree)]
    elif isinstance(tree, CommentedSeq):
        items = [((i,), node) for i, node in enumerate(tree)]
    else:
        return [], [f"{path}:1: the file must hold one rule (a mapping) or a list of rules"]
    loaded: list[LoadedRule] = []
    problems: list[str] = []
    for prefix, node in items:
        line = line_of(tree, prefix)
        if not isinstance(node, CommentedMap):
            problems.append(f"{path}:{line}: {dotted(prefix)}: a rule must be a mapping")
            continue
        try:
            rule = Rule.model_validate(plain(node, path, prefix))
        except YamlFileError as exc:
            problems.extend(exc.problems)
            continue
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            problems.extend(format_errors(errors, path, node, prefix, UNION_TAGS))
            continue
        loaded.append(LoadedRule(rule, path, line_of(node, ("name",)), prefix, node))
    return loaded, problems


def _cross_check(loaded: list[LoadedRule]) -> list[str]:
    problems: list[str] = []
    first: dict[str, LoadedRule] = {}
    for item in loaded:
        name = item.rule.name
        if name in first:
            problems.append(
                f"{item.where}: {dotted((*item.prefix, 'name'))}: duplicate rule name "
                f"{name!r} (first defined at {first[name].where})"
            )
        else:
            first[name] = item
    for item in loaded:
        inhibits = item.rule.inhibits
        if inhibits is None:
            continue
        for index, target in enumerate(inhibits.rules):
            if target not in first:
                sub = ("inhibits", "rules", index)
                line = line_of(item.node, sub) or item.line
                problems.append(
                    f"{item.path}:{line}: {dotted((*item.prefix, *sub))}: no rule named {target!r}"
                )
    return problems
