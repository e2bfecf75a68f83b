"""Running a test file: its rules loaded, each case fed through the real engine, and compared.

The comparison is exact: a decision produced but not expected fails the case.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap

from offsetd.engine.decide import decide
from offsetd.engine.decision import Decision
from offsetd.engine.state import ConnectorState
from offsetd.events.models import (
    RecordRef,
    owner_key,
)
from offsetd.rules.loading import RulesError, load_rule_files
from offsetd.rules.matching import RuleSet
from offsetd.rules.models import ConnectorMeta
from offsetd.ruletest.inputs import TestInput, build_events, event_errors
from offsetd.ruletest.report import describe_decision, describe_expect, restart_not_before
from offsetd.ruletest.spec import CaseResult, Expect, FileResult, TestCase, TestFile
from offsetd.yamlerrors import (
    YamlFileError,
    dotted,
    format_errors,
    line_of,
    plain,
    read_yaml,
)

__all__ = ["run_test_file"]


def run_test_file(path: Path) -> FileResult:
    """Load a test file and its rules, run every test; problems are `file:line: ...` lines."""
    result = FileResult(path)
    try:
        tree = read_yaml(path)
        data = plain(tree, path)
    except YamlFileError as exc:
        result.problems = exc.problems
        return result
    if not isinstance(tree, CommentedMap):
        result.problems = [f"{path}:1: a test file is a mapping with rule_files and tests"]
        return result
    try:
        spec = TestFile.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        result.problems = format_errors(errors, path, tree)
        return result

    rules, problems = _load_rules(path, tree, spec.rule_files)
    if rules is None:
        result.problems = problems
        return result
    for index, case in enumerate(spec.tests):
        for ei, expect in enumerate(case.expect):
            if expect.rule not in rules.by_name:
                loc = ("tests", index, "expect", ei, "rule")
                problems.append(
                    f"{path}:{line_of(tree, loc)}: tests[{index}].expect[{ei}].rule: "
                    f"no rule named {expect.rule!r} in the rule files"
                )
    if problems:
        result.problems = problems
        return result
    for index, case in enumerate(spec.tests):
        case_result, case_problems = _run_case(path, tree, index, case, rules)
        result.problems.extend(case_problems)
        if case_result is not None:
            result.cases.append(case_result)
    return result


def _load_rules(path: Path, tree: Any, patterns: list[str]) -> tuple[RuleSet | None, list[str]]:
    files: list[Path] = []
    problems: list[str] = []
    for index, pattern in enumerate(patterns):
        full = path.parent / pattern
        found = sorted(Path(os.path.normpath(p)) for p in glob.glob(str(full)))
        if not found:
            line = line_of(tree, ("rule_files", index))
            problems.append(f"{path}:{line}: rule_files[{index}]: no file matches {pattern!r}")
        files.extend(p for p in found if p not in files)
    if problems:
        return None, problems
    try:
        return load_rule_files(files), []
    except RulesError as exc:
        return None, exc.problems


def _run_case(
    path: Path, tree: Any, index: int, case: TestCase, rules: RuleSet
) -> tuple[CaseResult | None, list[str]]:
    meta = {
        name: ConnectorMeta(connector_class=c.class_, connector_type=c.type)
        for name, c in case.connectors.items()
    }
    counters: dict[tuple[str, int], int] = {}
    inputs: list[TestInput] = []
    problems: list[str] = []
    for ei, event_spec in enumerate(case.events):
        prefix: tuple[str | int, ...] = ("tests", index, "events", ei)
        node = _node(tree, prefix)
        try:
            inputs.extend(build_events(event_spec, counters))
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            problems.extend(event_errors(errors, path, node, prefix))
        except ValueError as exc:
            problems.append(f"{path}:{line_of(tree, prefix)}: {dotted(prefix)}: {exc}")
    if problems:
        return None, problems

    states: dict[str, ConnectorState] = {}
    decisions: list[Decision] = []
    for item in inputs:
        event = item.event
        key = owner_key(event.connect_cluster, event.connector)
        state = states.get(key) or ConnectorState()
        states[key], produced = decide(state, event, rules, meta.get(event.connector), item.now_ms)
        decisions.extend(produced)
    return _compare(case, decisions), []


def _node(tree: Any, loc: tuple[str | int, ...]) -> Any:
    node = tree
    for part in loc:
        node = node[part]
    return node


def _compare(case: TestCase, decisions: list[Decision]) -> CaseResult:
    result = CaseResult(case.name, decisions=decisions)
    unmatched = list(decisions)
    for expect in case.expect:
        for decision in unmatched:
            if _satisfies(decision, expect):
                unmatched.remove(decision)
                break
        else:
            result.missing.append(describe_expect(expect))
    result.unexpected = [describe_decision(d) for d in unmatched]
    return result


def _satisfies(decision: Decision, expect: Expect) -> bool:
    given = expect.model_fields_set
    checks = [
        decision.event_time_ms == expect.at,
        decision.rule == expect.rule,
        decision.outcome == expect.outcome,
    ]
    if "connector" in given:
        checks.append(decision.connector == expect.connector)
    if "reason" in given:
        checks.append(decision.reason == expect.reason)
    if "mode" in given:
        checks.append(decision.mode == expect.mode)
    if "actions" in given:
        checks.append(decision.action_types == expect.actions)
    if "task_id" in given:
        checks.append(decision.task_id == expect.task_id)
    if "record" in given:
        checks.append(_same_record(decision.record, expect.record))
    if "record_status" in given:
        checks.append(decision.record_status == expect.record_status)
    if "not_before" in given:
        checks.append(restart_not_before(decision) == expect.not_before)
    return all(checks)


def _same_record(actual: RecordRef | None, wanted: RecordRef | None) -> bool:
    if actual is None or wanted is None:
        return actual is wanted
    return (actual.topic, actual.partition, actual.offset) == (
        wanted.topic,
        wanted.partition,
        wanted.offset,
    )
