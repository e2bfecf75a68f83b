"""The field types of the rule format: one-or-many lists, name patterns, states and stages.

A single value is accepted wherever a list is (`listify`); name patterns are globs
(`orders-*`) unless written as `{regex: ...}`. Every rule model is strict (`RuleModel`: unknown
keys are errors) and immutable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)

from offsetd.events.failures import FailureClass
from offsetd.events.models import EventKind, ProgressState
from offsetd.saferegex import check_regex

__all__ = [
    "GLOB_TAG",
    "REGEX_TAG",
    "STAGES",
    "STATES",
    "Failures",
    "Kinds",
    "Pattern",
    "Patterns",
    "Progresses",
    "RegexPattern",
    "RegexStr",
    "Regexes",
    "RuleModel",
    "Stage",
    "Stages",
    "State",
    "States",
    "TaskIds",
    "listify",
    "unique",
]


def listify(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.append(value)
    return values


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _check_regex(value: str) -> str:
    return check_regex(value)  # RE2: refused here, with the file and line, not at match time


def _check_glob(value: str) -> str:
    if not value:
        raise ValueError("an empty pattern matches nothing")
    return value


RegexStr = Annotated[str, Field(min_length=1), AfterValidator(_check_regex)]


class RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RegexPattern(RuleModel):
    """`{regex: "orders-(eu|us)-sink"}`: a regex (RE2 syntax) that must match the whole value."""

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
    BeforeValidator(listify, json_schema_input_type=Pattern | list[Pattern]),
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
    BeforeValidator(listify, json_schema_input_type=EventKind | list[EventKind]),
    Field(min_length=1),
    AfterValidator(unique),
]
States = Annotated[
    list[Annotated[State, BeforeValidator(_upper)]],
    BeforeValidator(listify, json_schema_input_type=State | list[State]),
    Field(min_length=1),
]
Stages = Annotated[
    list[Annotated[Stage, BeforeValidator(_upper)]],
    BeforeValidator(listify, json_schema_input_type=Stage | list[Stage]),
    Field(min_length=1),
]
Failures = Annotated[
    list[FailureClass],
    BeforeValidator(listify, json_schema_input_type=FailureClass | list[FailureClass]),
    Field(min_length=1),
    AfterValidator(unique),
]
Progresses = Annotated[
    list[Annotated[ProgressState, BeforeValidator(_lower)]],
    BeforeValidator(listify, json_schema_input_type=ProgressState | list[ProgressState]),
    Field(min_length=1),
    AfterValidator(unique),
]
TaskIds = Annotated[
    list[Annotated[int, Field(ge=0)]],
    BeforeValidator(listify, json_schema_input_type=int | list[int]),
    Field(min_length=1),
]
Regexes = Annotated[
    list[RegexStr],
    BeforeValidator(listify, json_schema_input_type=str | list[str]),
    Field(min_length=1),
]
