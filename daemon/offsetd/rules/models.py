"""The rule format: what SREs write in YAML, validated strictly (`extra="forbid"`).

A rule says what to match (`match`, with an optional `unless`), when to fire (`when`: N
matching events within a window of event time, counted per key), what to do (`actions`, an
ordered list from a fixed catalogue) and its guardrails (`limits`, `mode`, `enabled`,
`inhibits`). Rules are data: no field is ever evaluated as code or as a template.

Durations are strings such as `30s`, `10m`, `1h30m`, `500ms` and are kept as milliseconds.
Name patterns are globs (`orders-*`) unless written as `{regex: ...}`; a list means "any of".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PositiveInt,
    Tag,
    model_validator,
)

from offsetd.durations import Duration, format_duration, parse_duration
from offsetd.events.models import EventKind
from offsetd.recordchecks import RecordCheck
from offsetd.yamlerrors import LocatedError

__all__ = [
    "ACTION_TYPES",
    "CONDITION_KINDS",
    "COUNT_KEYS",
    "STAGES",
    "STATES",
    "Action",
    "Backoff",
    "Budget",
    "ConnectorMeta",
    "CountKey",
    "Duration",
    "Inhibit",
    "Limits",
    "Match",
    "Mode",
    "Notify",
    "Pause",
    "RegexPattern",
    "RestartFailedTasks",
    "Resume",
    "Rewind",
    "Rule",
    "SkipRecord",
    "Stop",
    "Unless",
    "When",
    "format_duration",
    "parse_duration",
]


@dataclass(frozen=True, slots=True)
class ConnectorMeta:
    """What the REST cache knows about a connector: its class and `sink` or `source`.

    `labels`: its `offsetd.label.<key>` config entries (`offsetd.scope`); None: not read.
    Not part of equality: two reads of one connector are the same metadata.
    """

    connector_class: str
    connector_type: str
    labels: Mapping[str, str] | None = field(default=None, compare=False)


# -- one-or-many, patterns ----------------------------------------------------------------------


def _listify(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def _unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.append(value)
    return values


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regex: {exc}") from None
    return value


def _check_glob(value: str) -> str:
    if not value:
        raise ValueError("an empty pattern matches nothing")
    return value


RegexStr = Annotated[str, Field(min_length=1), AfterValidator(_check_regex)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RegexPattern(_Model):
    """`{regex: "orders-(eu|us)-sink"}`: a Python regex that must match the whole value."""

    regex: RegexStr


# Union tags pydantic puts into error locations; the loader hides them from field paths.
GLOB_TAG = "<glob>"
REGEX_TAG = "<regex>"


def _pattern_tag(value: Any) -> str:
    return REGEX_TAG if isinstance(value, dict | RegexPattern) else GLOB_TAG


Pattern = Annotated[
    Annotated[str, AfterValidator(_check_glob), Tag(GLOB_TAG)]
    | Annotated[RegexPattern, Tag(REGEX_TAG)],
    Discriminator(_pattern_tag),
]
Patterns = Annotated[
    list[Pattern],
    BeforeValidator(_listify, json_schema_input_type=Pattern | list[Pattern]),
    Field(min_length=1),
]

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED", "DESTROYED")
State = Literal["UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED", "DESTROYED"]
# org.apache.kafka.connect.runtime.errors.Stage
STAGES = (
    "KEY_CONVERTER",
    "VALUE_CONVERTER",
    "HEADER_CONVERTER",
    "TRANSFORMATION",
    "TASK_PUT",
    "TASK_POLL",
    "KAFKA_PRODUCE",
    "KAFKA_CONSUME",
)
Stage = Literal[
    "KEY_CONVERTER",
    "VALUE_CONVERTER",
    "HEADER_CONVERTER",
    "TRANSFORMATION",
    "TASK_PUT",
    "TASK_POLL",
    "KAFKA_PRODUCE",
    "KAFKA_CONSUME",
]
Kinds = Annotated[
    list[EventKind],
    BeforeValidator(_listify, json_schema_input_type=EventKind | list[EventKind]),
    Field(min_length=1),
    AfterValidator(_unique),
]
States = Annotated[
    list[Annotated[State, BeforeValidator(_upper)]],
    BeforeValidator(_listify, json_schema_input_type=State | list[State]),
    Field(min_length=1),
]
Stages = Annotated[
    list[Annotated[Stage, BeforeValidator(_upper)]],
    BeforeValidator(_listify, json_schema_input_type=Stage | list[Stage]),
    Field(min_length=1),
]
TaskIds = Annotated[
    list[Annotated[int, Field(ge=0)]],
    BeforeValidator(_listify, json_schema_input_type=int | list[int]),
    Field(min_length=1),
]
Regexes = Annotated[
    list[RegexStr],
    BeforeValidator(_listify, json_schema_input_type=str | list[str]),
    Field(min_length=1),
]


# -- match --------------------------------------------------------------------------------------

# Which event kinds each condition can apply to (others could never match it).
_ALL = frozenset(EventKind)
_STATUS = frozenset({EventKind.CONNECTOR_STATUS, EventKind.TASK_STATUS})
_ERRORS = _STATUS | {EventKind.DLQ_RECORD}
CONDITION_KINDS: dict[str, frozenset[EventKind]] = {
    "connect_cluster": _ALL,
    "connector": _ALL,
    "connector_class": _ALL,
    "connector_type": _ALL,
    "task_id": frozenset({EventKind.TASK_STATUS, EventKind.DLQ_RECORD, EventKind.TOPIC_STATUS}),
    "state": _STATUS,
    "stage": frozenset({EventKind.DLQ_RECORD}),
    "exception_class": _ERRORS,
    "root_cause_class": _ERRORS,
    "message": _ERRORS,
    "origin_topic": frozenset({EventKind.DLQ_RECORD}),
}


class Unless(_Model):
    """Conditions that, when all hold, stop a rule from matching (an exclusion)."""

    connect_cluster: Patterns | None = None
    connector: Patterns | None = Field(
        None, description="Connector names: globs, or {regex: ...}; a list means any of them."
    )
    connector_class: Patterns | None = Field(
        None, description="Connector classes (globs); needs the connector metadata."
    )
    connector_type: Literal["sink", "source"] | None = Field(
        None, description="sink or source; needs the connector metadata."
    )
    task_id: TaskIds | None = None
    state: States | None = Field(None, description="Status states, e.g. FAILED.")
    stage: Stages | None = Field(None, description="DLQ stages, e.g. VALUE_CONVERTER, TASK_PUT.")
    exception_class: Patterns | None = Field(
        None, description="Globs matching the outer exception class OR the root cause class."
    )
    root_cause_class: Patterns | None = Field(
        None, description="Globs matching only the root cause (last `Caused by:`) class."
    )
    message: Regexes | None = Field(
        None,
        description="Regexes searched in the exception message, the root cause message and "
        "the bounded head of the trace.",
    )
    origin_topic: Patterns | None = Field(
        None, description="DLQ: the failing record's original topic (globs)."
    )

    def conditions(self) -> dict[str, Any]:
        """The conditions that are set, by field name, in declaration (evaluation) order."""
        return {
            name: getattr(self, name) for name in CONDITION_KINDS if getattr(self, name) is not None
        }


class Match(Unless):
    """What a rule reacts to. Every condition given must hold; `unless` excludes."""

    kind: Kinds = Field(description="Event kinds: one or a list.")
    unless: Unless | None = None

    @model_validator(mode="after")
    def _check_applicable(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        kinds = set(self.kind)
        for where, conds in (((), self), (("unless",), self.unless)):
            if conds is None:
                continue
            for name in conds.conditions():
                dead = sorted(kinds - CONDITION_KINDS[name])
                if dead:
                    problems.append(
                        (
                            (*where, name),
                            f"does not apply to {', '.join(dead)} events, so those could "
                            "never match; drop them from kind or write a second rule",
                        )
                    )
        if self.unless is not None and not self.unless.conditions():
            problems.append((("unless",), "give at least one condition"))
        if problems:
            raise LocatedError(problems)
        return self


# -- when ---------------------------------------------------------------------------------------

COUNT_KEYS = ("connector", "task_id", "record", "exception_class", "root_cause_class")
CountKey = Literal["connector", "task_id", "record", "exception_class", "root_cause_class"]


class When(_Model):
    """Fire on the `count`-th matching event within `within` of event time, per `key`.

    `within` is also the oldest an event may be, when it arrives, and still fire the rule:
    a replayed record older than that never fires (it still updates the status state).
    A rule keyed by `record` does not count events that name no record (a DLQ without
    context headers): they cannot say which record failed.
    """

    count: Annotated[int, Field(ge=1, le=1000)] = 1
    within: Duration = Field(600_000, description="Sliding window of event time (default 10m).")
    key: Annotated[
        list[CountKey],
        BeforeValidator(_listify, json_schema_input_type=CountKey | list[CountKey]),
        Field(min_length=1),
        AfterValidator(_unique),
    ] = Field(default_factory=lambda: list[CountKey](["connector"]))

    @model_validator(mode="after")
    def _check_window(self) -> Self:
        if self.within <= 0:
            raise LocatedError([(("within",), "must be longer than 0s")])
        return self


# -- actions ------------------------------------------------------------------------------------


class Backoff(_Model):
    """Restart delay: `initial`, times `factor` per restart decision, at most `max`.

    The growth restarts from `initial` when no restart was decided for the connector within
    `reset_after` (event time).
    """

    initial: Duration = 30_000
    max: Duration = 600_000
    factor: Annotated[float, Field(ge=1.0, le=10.0)] = 2.0
    reset_after: Duration = 1_800_000

    @model_validator(mode="after")
    def _check_order(self) -> Self:
        if self.max < self.initial:
            raise LocatedError([(("max",), "must not be shorter than initial")])
        if self.reset_after <= 0:
            raise LocatedError([(("reset_after",), "must be longer than 0s")])
        return self


class RestartFailedTasks(_Model):
    """Restart the connector's failed tasks (Connect never restarts a failed task by itself)."""

    type: Literal["restart-failed-tasks"]
    backoff: Backoff = Field(default_factory=Backoff)


class SkipRecord(_Model):
    """Quarantine the failing record and move the sink past it (stop, patch, resume, verify).

    The decision says whether the record is known exactly (DLQ events named it) or still has
    to be located; the executor never guesses it from the committed offset.
    """

    type: Literal["skip-record"]
    single_record_batches: bool = Field(
        True,
        description="When no DLQ names the record: make the failure repeat with "
        "consumer.override.max.poll.records=1 (then the committed offset is the failing record).",
    )
    check: RecordCheck | None = Field(
        None,
        description="Last resort: what the poison record looks like; the record at the "
        "committed offset is skipped only if it fails this check.",
    )


class Pause(_Model):
    type: Literal["pause"]


class Stop(_Model):
    type: Literal["stop"]


class Resume(_Model):
    type: Literal["resume"]


class Rewind(_Model):
    """Rewind to a timestamp (resolved per partition) or apply an offsets plan file."""

    type: Literal["rewind"]
    to_timestamp: AwareDatetime | None = Field(
        None, description="ISO 8601 with a time zone, e.g. 2024-05-01T14:02:00Z."
    )
    plan_file: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="An offsets plan file, e.g. one written by `offsetd rewind plan`."
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.to_timestamp is None) == (self.plan_file is None):
            raise LocatedError([((), "give exactly one of to_timestamp or plan_file")])
        return self


def _check_webhook(value: str) -> str:
    # The message never echoes the URL: webhook URLs often carry a token.
    try:
        parts = urlsplit(value.strip())
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname or not port_ok:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain credentials")
    return value.strip()


class Notify(_Model):
    """Tell humans. `summary` is plain text (never a template); `webhook` is a URL."""

    type: Literal["notify"]
    severity: Literal["info", "warning", "critical"] = "warning"
    webhook: Annotated[str, AfterValidator(_check_webhook)] | None = None
    summary: Annotated[str, Field(max_length=500)] | None = None


Action = Annotated[
    RestartFailedTasks | SkipRecord | Pause | Stop | Resume | Rewind | Notify,
    Field(discriminator="type"),
]
ACTION_TYPES = (
    "restart-failed-tasks",
    "skip-record",
    "pause",
    "stop",
    "resume",
    "rewind",
    "notify",
)


# -- limits, inhibits, the rule ------------------------------------------------------------------


class Budget(_Model):
    """At most `max` executed decisions per rule and connector within `per` (event time)."""

    max: PositiveInt = 5
    per: Duration = 3_600_000


class Limits(_Model):
    budget: Budget = Field(default_factory=Budget)
    cooldown: Duration = Field(
        120_000,
        description="Minimum event time between two executed decisions of this rule for one "
        "connector (default 2m; 0s disables).",
    )


RuleName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="Unique across the rules folder: lower case, digits, '.', '_', '-'.",
    ),
]


class Inhibit(_Model):
    """While this rule's executed decision is fresh, the named rules' decisions for the same
    connector are suppressed (reason `inhibited`), like Alertmanager's inhibit_rules.

    The inhibition ends after `for` (event time), or earlier once the connector has been seen
    STOPPED and then RUNNING again (the remediation went through).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    rules: Annotated[
        list[RuleName],
        BeforeValidator(_listify, json_schema_input_type=str | list[str]),
        Field(min_length=1),
        AfterValidator(_unique),
    ]
    for_: Duration = Field(900_000, alias="for", description="Default 15m.")


Mode = Literal["observe", "approve", "enforce"]


class Rule(_Model):
    """One remediation rule."""

    name: RuleName
    description: str = ""
    mode: Mode = Field(
        "observe",
        description="observe: plan only (dry run); approve: a human approves each plan; "
        "enforce: execute.",
    )
    enabled: bool = Field(True, description="false: decisions are audited as suppressed.")
    match: Match
    when: When = Field(default_factory=When)
    actions: Annotated[list[Action], Field(min_length=1)]
    limits: Limits = Field(default_factory=Limits)
    inhibits: Inhibit | None = None

    @model_validator(mode="after")
    def _check_rule(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.inhibits is not None and self.name in self.inhibits.rules:
            index = self.inhibits.rules.index(self.name)
            problems.append((("inhibits", "rules", index), "a rule cannot inhibit itself"))
        if "record" in self.when.key and EventKind.DLQ_RECORD not in self.match.kind:
            problems.append(
                (
                    ("when", "key"),
                    "record is only known for dlq_record events; add dlq_record to match.kind",
                )
            )
        if problems:
            raise LocatedError(problems)
        return self


def rule_timestamp(value: datetime) -> int:
    """An aware datetime as epoch milliseconds (for `rewind.to_timestamp`)."""
    return int(value.timestamp() * 1000)
