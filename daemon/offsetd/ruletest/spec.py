"""What a rule test file says: the rules, the input events and the decisions expected.

The models validate the YAML (errors name file, line and field); the results are what a run
reports per file and per test case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from offsetd.engine.decision import Decision, Outcome, Reason, RecordStatus
from offsetd.events.models import (
    PROGRESS_SOURCE_TOPIC,
    EventKind,
    JsonScalar,
    ProgressState,
    RecordRef,
)
from offsetd.outcomes import ENGINE_REASONS
from offsetd.rules.models import Duration, Mode

__all__ = [
    "DEFAULT_TOPICS",
    "CaseResult",
    "Expect",
    "FileResult",
    "TestCase",
    "TestConnector",
    "TestEvent",
    "TestFile",
    "TestSource",
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
    EventKind.PROGRESS: PROGRESS_SOURCE_TOPIC,
}


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
    # progress events: the state, and how long the task's status must have held (its grace)
    progress: ProgressState | None = None
    grace: Duration | None = Field(
        None, description="progress: progress.stall_after (stalled) or stuck_after."
    )
    records_waiting: int | None = None
    flow_status: str | None = None
    detail: str | None = None


class Expect(_Model):
    """One expected decision. Fields left out are not compared, except `outcome`.

    `outcome` also takes the word the audit, metrics and history use for a suppression
    (`suppressed_cooldown`): the same as `outcome: suppressed` with `reason: cooldown`.
    """

    @model_validator(mode="before")
    @classmethod
    def _one_vocabulary(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("outcome"), str):
            return data
        outcome = data["outcome"]
        reason = outcome.removeprefix("suppressed_")
        if reason == outcome or reason not in ENGINE_REASONS:
            return data
        if data.get("reason") not in (None, reason):
            raise ValueError(f"outcome {outcome} contradicts reason {data['reason']}")
        return {**data, "outcome": "suppressed", "reason": reason}

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
        None, description="restart-failed-tasks, restart-tasks: the earliest restart time."
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
