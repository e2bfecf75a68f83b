"""`offsetd rules test`: offline rule tests in the style of `promtool test rules`.

A test file names `rule_files` (paths or globs, relative to the test file) and `tests`. Each
test feeds input events, with times, through the real engine and compares the decisions it
produced with `expect`, exactly: a decision produced but not expected fails the test (that is
how "must not happen" is written; an empty `expect` means nothing may fire).

Input events take the events model's shape with friendly defaults: `connect_cluster` is
"local", the source record (topic, partition, offset) is generated from a per-topic counter so
idempotency never swallows two inputs, the event time is `at`, and a FAILED status may give
`trace` text (parsed like a real one). `now` says when an event arrives, to simulate replays
and lag (default: `at`). `repeat`/`every` expand one entry into a series.

Pure: no Kafka, no HTTP; it reads only the files it is given.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from ruamel.yaml.comments import CommentedMap

from offsetd.engine.decide import decide
from offsetd.engine.decision import Decision, Outcome, Reason, RecordStatus
from offsetd.engine.state import ConnectorState
from offsetd.events.models import (
    ErrorInfo,
    Event,
    EventKind,
    JsonScalar,
    RecordRef,
    error_from_trace,
    owner_key,
)
from offsetd.rules.loading import RulesError, load_rule_files
from offsetd.rules.matching import AnyEvent, RuleSet
from offsetd.rules.models import ConnectorMeta, Duration, Mode, format_duration
from offsetd.yamlerrors import (
    YamlFileError,
    dotted,
    format_errors,
    line_of,
    plain,
    read_yaml,
)

__all__ = [
    "CaseResult",
    "FileResult",
    "TestEvent",
    "TestFile",
    "TestInput",
    "build_events",
    "describe_decision",
    "event_errors",
    "format_result",
    "run_test_file",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TestConnector(_Model):
    """Connector metadata, as the daemon's REST cache would know it."""

    class_: str = Field(alias="class", min_length=1)
    type: Literal["sink", "source"]


class TestSource(_Model):
    """Override parts of the generated source record (e.g. to replay the same one twice).

    With `repeat`, an explicit `offset` is the first one; the next events take the next ones.
    """

    topic: str | None = None
    partition: Annotated[int, Field(ge=0)] = 0
    offset: Annotated[int, Field(ge=0)] | None = None


DEFAULT_TOPICS = {
    EventKind.CONNECTOR_STATUS: "connect-status",
    EventKind.TASK_STATUS: "connect-status",
    EventKind.TOPIC_STATUS: "connect-status",
    EventKind.DLQ_RECORD: "dlq",
    EventKind.SOURCE_OFFSET: "connect-offsets",
}
# Fields passed through to the event model when given (it rejects those a kind lacks).
_BODY_FIELDS = (
    "task_id",
    "state",
    "worker_id",
    "generation",
    "error",
    "record",
    "headers",
    "topic",
    "discovered_ms",
    "deleted",
    "partition",
    "offset",
)


class TestEvent(_Model):
    """One input event (or a series of them with `repeat` and `every`)."""

    __test__ = False  # not a pytest class

    at: Duration
    now: Duration | None = None
    repeat: PositiveInt = 1
    every: Duration = 0
    kind: EventKind
    connector: str = Field(min_length=1)
    connect_cluster: str = "local"
    source: TestSource | None = None
    trace: str | None = Field(None, description="A Java stack trace (FAILED status or DLQ).")
    stage: str | None = Field(None, description="DLQ: the stage, with `trace`.")
    # the event body, in the events model's shape
    task_id: int | None = None
    state: str | None = None
    worker_id: str | None = None
    generation: int | None = None
    error: dict[str, Any] | None = None
    record: RecordRef | None = None
    headers: dict[str, str | None] | None = None
    topic: str | None = None
    discovered_ms: int | None = None
    deleted: bool | None = None
    partition: dict[str, JsonScalar] | None = None
    offset: dict[str, JsonScalar] | None = None


class Expect(_Model):
    """One expected decision. Fields left out are not compared, except `outcome`."""

    at: Duration
    rule: str
    connector: str | None = None
    outcome: Outcome = "planned"
    reason: Reason | None = None
    mode: Mode | None = None
    actions: list[str] | None = None
    task_id: int | None = None
    record: RecordRef | None = None
    record_status: RecordStatus | None = None
    not_before: Duration | None = Field(
        None, description="restart-failed-tasks: the earliest restart time."
    )


class TestCase(_Model):
    __test__ = False

    name: str = Field(min_length=1)
    connectors: dict[str, TestConnector] = Field(default_factory=dict)
    events: list[TestEvent] = Field(default_factory=list)
    expect: list[Expect]


class TestFile(_Model):
    __test__ = False

    rule_files: Annotated[list[str], Field(min_length=1)]
    tests: Annotated[list[TestCase], Field(min_length=1)]


_EVENT = TypeAdapter[AnyEvent](Event)
_EVENT_TAGS = frozenset(str(kind) for kind in EventKind)


@dataclass
class CaseResult:
    name: str
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected


@dataclass
class FileResult:
    path: Path
    problems: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(case.ok for case in self.cases)


# -- building events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestInput:
    """One input event and when it arrives (`now_ms`)."""

    __test__ = False
    event: AnyEvent
    now_ms: int


def build_events(spec: TestEvent, counters: dict[tuple[str, int], int]) -> Iterator[TestInput]:
    """The events of one input entry; `counters` numbers source offsets per topic-partition.

    Raises `ValidationError` (locations relative to the entry) if the body is not an event.
    """
    body: dict[str, Any] = {
        name: getattr(spec, name) for name in _BODY_FIELDS if name in spec.model_fields_set
    }
    if "record" in body and body["record"] is not None:
        body["record"] = body["record"].model_dump()
    if spec.trace is not None or spec.stage is not None:
        if "error" in body:
            raise ValueError("give either error or trace/stage, not both")
        error = error_from_trace(spec.trace) or ErrorInfo()
        body["error"] = error.model_copy(update={"stage": spec.stage}).model_dump()
    elif spec.kind is EventKind.DLQ_RECORD and "error" not in body:
        body["error"] = {}
    src = spec.source or TestSource()
    topic = src.topic or DEFAULT_TOPICS[spec.kind]
    for index in range(spec.repeat):
        time_ms = spec.at + index * spec.every
        counter_key = (topic, src.partition)
        offset = counters.get(counter_key, 0) if src.offset is None else src.offset + index
        counters[counter_key] = max(counters.get(counter_key, 0), offset + 1)
        event = _EVENT.validate_python(
            {
                **body,
                "kind": spec.kind,
                "connect_cluster": spec.connect_cluster,
                "connector": spec.connector,
                "source": {
                    "topic": topic,
                    "partition": src.partition,
                    "offset": offset,
                    "timestamp_ms": time_ms,
                },
            }
        )
        now = time_ms if spec.now is None else spec.now + index * spec.every
        yield TestInput(event, now)


# -- running --------------------------------------------------------------------------------------


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


def event_errors(
    errors: list[ErrorDetails], path: Path, node: Any, prefix: tuple[str | int, ...] = ()
) -> list[str]:
    """`file:line: field: message` for errors of `build_events` (the event model's)."""
    out: list[ErrorDetails] = []
    for error in errors:
        loc = tuple(p for p in error["loc"] if p not in _EVENT_TAGS)
        if loc[:1] == ("source",):
            # the generated `source` is not in the file: point at the entry itself
            error = {**error, "loc": ()}  # noqa: PLW2901
        out.append(error)
    return format_errors(out, path, node, prefix, _EVENT_TAGS)


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
            result.missing.append(_describe_expect(expect))
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
        checks.append(_not_before(decision) == expect.not_before)
    return all(checks)


def _same_record(actual: RecordRef | None, wanted: RecordRef | None) -> bool:
    if actual is None or wanted is None:
        return actual is wanted
    return (actual.topic, actual.partition, actual.offset) == (
        wanted.topic,
        wanted.partition,
        wanted.offset,
    )


def _not_before(decision: Decision) -> int | None:
    for action in decision.actions:
        if action.type == "restart-failed-tasks":
            value = action.params.get("not_before_ms")
            return int(value) if value is not None else None
    return None


# -- output ---------------------------------------------------------------------------------------


def _record_text(record: RecordRef | None) -> str:
    return "none" if record is None else f"{record.topic}-{record.partition}@{record.offset}"


def describe_decision(decision: Decision) -> str:
    """One line, in the vocabulary of `expect`."""
    parts = [
        f"at {format_duration(decision.event_time_ms)}",
        f"rule={decision.rule}",
        f"connector={decision.connector}",
        f"outcome={decision.outcome}",
    ]
    if decision.reason is not None:
        parts.append(f"reason={decision.reason}")
    parts.append(f"actions=[{', '.join(decision.action_types)}]")
    if decision.task_id is not None:
        parts.append(f"task_id={decision.task_id}")
    if decision.record is not None or decision.record_status is not None:
        parts.append(f"record={_record_text(decision.record)}")
    if decision.record_status is not None:
        parts.append(f"record_status={decision.record_status}")
    not_before = _not_before(decision)
    if not_before is not None:
        parts.append(f"not_before={format_duration(not_before)}")
    return " ".join(parts)


def _describe_expect(expect: Expect) -> str:
    given = expect.model_fields_set
    parts = [f"at {format_duration(expect.at)}", f"rule={expect.rule}"]
    if "connector" in given:
        parts.append(f"connector={expect.connector}")
    parts.append(f"outcome={expect.outcome}")
    if "reason" in given:
        parts.append(f"reason={expect.reason}")
    if "mode" in given:
        parts.append(f"mode={expect.mode}")
    if expect.actions is not None:
        parts.append(f"actions=[{', '.join(expect.actions)}]")
    if "task_id" in given:
        parts.append(f"task_id={expect.task_id}")
    if "record" in given:
        parts.append(f"record={_record_text(expect.record)}")
    if "record_status" in given:
        parts.append(f"record_status={expect.record_status}")
    if expect.not_before is not None:
        parts.append(f"not_before={format_duration(expect.not_before)}")
    return " ".join(parts)


def format_result(result: FileResult) -> list[str]:
    """promtool-style lines: the file, then OK/FAILED per test with a readable diff."""
    lines = [f"Unit Testing: {result.path}"]
    if result.problems:
        lines.append("  FAILED (the test file or its rules are invalid):")
        lines.extend(f"    {problem}" for problem in result.problems)
        return lines
    for case in result.cases:
        if case.ok:
            lines.append(f"  OK      {case.name}")
            continue
        lines.append(f"  FAILED  {case.name}")
        if case.missing:
            lines.append("    expected but not produced:")
            lines.extend(f"      - {text}" for text in case.missing)
        if case.unexpected:
            lines.append("    produced but not expected:")
            lines.extend(f"      + {text}" for text in case.unexpected)
        lines.append("    all decisions produced:")
        lines.extend(f"        {describe_decision(d)}" for d in case.decisions)
        if not case.decisions:
            lines.append("        (none)")
    return lines
