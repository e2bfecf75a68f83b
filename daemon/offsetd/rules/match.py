"""`match` and `unless`: the conditions a rule reacts to, and those that exclude.

Each condition applies to some event kinds only (`CONDITION_KINDS`); a rule whose `kind` lists
an event kind one of its conditions cannot apply to is refused at load, since those events
could never match.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator

from offsetd.events.models import EventKind
from offsetd.rules.fields import (
    Failures,
    Kinds,
    Patterns,
    Progresses,
    Regexes,
    RuleModel,
    Stages,
    States,
    TaskIds,
)
from offsetd.yamlerrors import LocatedError

__all__ = ["CONDITION_KINDS", "Match", "Unless"]


# Which event kinds each condition can apply to (others could never match it).
_ALL = frozenset(EventKind)
_STATUS = frozenset({EventKind.CONNECTOR_STATUS, EventKind.TASK_STATUS})
_ERRORS = _STATUS | {EventKind.DLQ_RECORD}
CONDITION_KINDS: dict[str, frozenset[EventKind]] = {
    "connect_cluster": _ALL,
    "connector": _ALL,
    "connector_class": _ALL,
    "connector_type": _ALL,
    "task_id": frozenset(
        {EventKind.TASK_STATUS, EventKind.DLQ_RECORD, EventKind.TOPIC_STATUS, EventKind.PROGRESS}
    ),
    "state": _STATUS,
    "progress": frozenset({EventKind.PROGRESS}),
    "stage": frozenset({EventKind.DLQ_RECORD}),
    "failure": _ERRORS,
    "exception_class": _ERRORS,
    "root_cause_class": _ERRORS,
    "message": _ERRORS,
    "origin_topic": frozenset({EventKind.DLQ_RECORD}),
}


class Unless(RuleModel):
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
    progress: Progresses | None = Field(
        None,
        description="Progress states read from Kafka (progress events): stalled (RUNNING, "
        "records waiting, nothing committed for progress.stall_after), unassigned (no running "
        "task for progress.stuck_after while the worker group is stable), lagging, ok, "
        "inactive; one or a list.",
    )
    stage: Stages | None = Field(None, description="DLQ stages, e.g. VALUE_CONVERTER, TASK_PUT.")
    failure: Failures | None = Field(
        None,
        description="What kind of failure, from offsetd's classification of the exception "
        "classes in the trace (offsetd.events.failures): transient (a restart can help), "
        "poison_record, configuration (a person must act) or unknown; one or a list.",
    )
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
