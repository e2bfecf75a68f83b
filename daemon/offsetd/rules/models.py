"""The rule format: what SREs write in YAML, validated strictly (`extra="forbid"`).

A rule says what to match (`match`, with an optional `unless`), when to fire (`when`: N
matching events within a window of event time, counted per key), what to do (`actions`, an
ordered list from a fixed catalogue) and its guardrails (`limits`, `mode`, `enabled`,
`inhibits`). Rules are data: no field is ever evaluated as code or as a template.

Durations are strings such as `30s`, `10m`, `1h30m`, `500ms` and are kept as milliseconds.
Name patterns are globs (`orders-*`) unless written as `{regex: ...}`; a list means "any of".

The format lives in modules of one concern, all re-exported here: `fields` (patterns, states,
one-or-many lists), `match` (conditions), `actions` (the action catalogue); this module holds
`when`, `limits`, `inhibits` and the rule itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    model_validator,
)

from offsetd.durations import Duration, format_duration, parse_duration
from offsetd.events.models import EventKind
from offsetd.rules.actions import (
    ACTION_TYPES,
    Action,
    Backoff,
    Notify,
    Pause,
    RestartFailedTasks,
    RestartTasks,
    Resume,
    Rewind,
    ScaleTasks,
    SkipRecord,
    Stop,
    rule_timestamp,
)
from offsetd.rules.fields import (
    GLOB_TAG,
    REGEX_TAG,
    STAGES,
    STATES,
    RegexPattern,
    RuleModel,
    listify,
    unique,
)
from offsetd.rules.match import CONDITION_KINDS, Match, Unless
from offsetd.yamlerrors import LocatedError

__all__ = [
    "ACTION_TYPES",
    "CONDITION_KINDS",
    "COUNT_KEYS",
    "GLOB_TAG",
    "REGEX_TAG",
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
    "RestartTasks",
    "Resume",
    "Rewind",
    "Rule",
    "ScaleTasks",
    "SkipRecord",
    "Stop",
    "Unless",
    "When",
    "format_duration",
    "parse_duration",
    "rule_timestamp",
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


COUNT_KEYS = ("connector", "task_id", "record", "exception_class", "root_cause_class")
CountKey = Literal["connector", "task_id", "record", "exception_class", "root_cause_class"]


class When(RuleModel):
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
        BeforeValidator(listify, json_schema_input_type=CountKey | list[CountKey]),
        Field(min_length=1),
        AfterValidator(unique),
    ] = Field(default_factory=lambda: list[CountKey](["connector"]))

    @model_validator(mode="after")
    def _check_window(self) -> Self:
        if self.within <= 0:
            raise LocatedError([(("within",), "must be longer than 0s")])
        return self


class Budget(RuleModel):
    """At most `max` executed decisions per rule and connector within `per` (event time)."""

    max: PositiveInt = 5
    per: Duration = 3_600_000


class Limits(RuleModel):
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


class Inhibit(RuleModel):
    """While this rule's executed decision is fresh, the named rules' decisions for the same
    connector are suppressed (reason `inhibited`), like Alertmanager's inhibit_rules.

    The inhibition ends after `for` (event time), or earlier once the connector has been seen
    STOPPED and then RUNNING again (the remediation went through).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    rules: Annotated[
        list[RuleName],
        BeforeValidator(listify, json_schema_input_type=str | list[str]),
        Field(min_length=1),
        AfterValidator(unique),
    ]
    for_: Duration = Field(900_000, alias="for", description="Default 15m.")


Mode = Literal["observe", "approve", "enforce"]


class Rule(RuleModel):
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
