"""The action catalogue of a rule: restart (failed or named tasks), skip a record, pause,
stop, resume, rewind, scale tasks, notify — each one's model and what it does.

`Action` is the union the rule format accepts, discriminated by `type`. Actions are data: a
notify `summary` is plain text (never a template), a webhook URL never appears in messages.

Every action declares its `effects` on its model, once: whether it writes to Connect, moves
offsets, skips a record, plans a backoff, tells people; and how it is `reported` once it ran
(the Kubernetes Event's reason, `offsetd.remediation.kube_events`). The engine, the guards, the
executor and the rule tests ask `effects_of(type)` and `reported_of(type)`, never a list of
names — so an action added here without its effects cannot slip past a guard
(tests/unit/rules/test_action_registry.py ties this catalogue to the executor's handlers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Self, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, AwareDatetime, Field, model_validator

from offsetd.durations import Duration
from offsetd.recordchecks import RecordCheck
from offsetd.rules.fields import RuleModel
from offsetd.yamlerrors import LocatedError

__all__ = [
    "ACTIONS",
    "ACTION_TYPES",
    "Action",
    "ActionModel",
    "Backoff",
    "Effects",
    "Notify",
    "Pause",
    "Reported",
    "RestartFailedTasks",
    "RestartTasks",
    "Resume",
    "Rewind",
    "ScaleTasks",
    "SkipRecord",
    "Stop",
    "effects_of",
    "reported_of",
    "rule_timestamp",
]


@dataclass(frozen=True, slots=True)
class Effects:
    """What an action does, which every layer after the rules asks instead of its name.

    - `writes`: it calls a writing Connect endpoint (or changes a Strimzi resource): every
      protective guard applies — pause, opt-out, breaker, blast radius, the backend's refusal
      (Strimzi's), and a pause holds it for later.
    - `moves_offsets`: it changes a connector's offsets: only for classes on
      `remediation.skip_allowlist`, and the connector's class is read if not yet known.
    - `skips_record`: it skips the failing record: the engine attaches the DLQ's coordinates
      (or marks the record to be located), the skip budget counts it, and while one is planned
      a restart of the same connector stands down.
    - `backoff`: the engine plans it with a restart backoff (`attempt`, `delay_ms`,
      `not_before_ms`); a planned one ends a stuck episode after its grace.
    - `tells_people`: it only tells people; it still does when a guard holds the decision
      (never in observe mode, never for a suppressed decision).
    """

    writes: bool = False
    moves_offsets: bool = False
    skips_record: bool = False
    backoff: bool = False
    tells_people: bool = False

    def __or__(self, other: Effects) -> Effects:
        return Effects(
            writes=self.writes or other.writes,
            moves_offsets=self.moves_offsets or other.moves_offsets,
            skips_record=self.skips_record or other.skips_record,
            backoff=self.backoff or other.backoff,
            tells_people=self.tells_people or other.tells_people,
        )


@dataclass(frozen=True, slots=True)
class Reported:
    """How an executed action is reported: the Kubernetes Event's `reason` (CamelCase, stable:
    alerts select on it) and `done`, the words for what was done."""

    reason: str
    done: str


class ActionModel(RuleModel):
    """One action as a rule writes it; a subclass declares its `type` and its `effects`.

    `planned_params` is what the engine passes on to the executor (JSON values); the executor's
    spec of the action (`offsetd.remediation.actions`) subclasses this model and adds only what
    the engine computed.
    """

    effects: ClassVar[Effects]
    reported: ClassVar[Reported]
    type: str

    def planned_params(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"type"}, by_alias=True)


class Backoff(RuleModel):
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


class RestartFailedTasks(ActionModel):
    """Restart the connector's failed tasks (Connect never restarts a failed task by itself)."""

    effects = Effects(writes=True, backoff=True)
    reported = Reported("TasksRestarted", "restarted failed tasks")
    type: Literal["restart-failed-tasks"]
    backoff: Backoff = Field(default_factory=Backoff)


class RestartTasks(ActionModel):
    """Restart the task the event names whatever its state (a hung task says RUNNING), or every
    task of the connector when it names none (an MM2 flow): for progress events, where nothing
    is FAILED and `restart-failed-tasks` would restart nothing."""

    effects = Effects(writes=True, backoff=True)
    reported = Reported("TasksRestarted", "restarted tasks")
    type: Literal["restart-tasks"]
    backoff: Backoff = Field(default_factory=Backoff)


class SkipRecord(ActionModel):
    """Quarantine the failing record and move the sink past it (stop, patch, resume, verify).

    The decision says whether the record is known exactly (DLQ events named it) or still has
    to be located; the executor never guesses it from the committed offset.
    """

    effects = Effects(writes=True, moves_offsets=True, skips_record=True)
    reported = Reported("RecordSkipped", "skipped a poison record")
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


class Pause(ActionModel):
    effects = Effects(writes=True)
    reported = Reported("ConnectorPaused", "paused the connector")
    type: Literal["pause"]


class Stop(ActionModel):
    effects = Effects(writes=True)
    reported = Reported("ConnectorStopped", "stopped the connector")
    type: Literal["stop"]


class Resume(ActionModel):
    effects = Effects(writes=True)
    reported = Reported("ConnectorResumed", "resumed the connector")
    type: Literal["resume"]


class Rewind(ActionModel):
    """Rewind to a timestamp (resolved per partition) or apply an offsets plan file."""

    effects = Effects(writes=True, moves_offsets=True)
    reported = Reported("OffsetsAltered", "altered the connector's offsets")
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

    def planned_params(self) -> dict[str, Any]:
        params = super().planned_params()
        if self.to_timestamp is not None:
            params["to_timestamp_ms"] = rule_timestamp(self.to_timestamp)
        return params


class ScaleTasks(ActionModel):
    """Set the connector's `tasks.max`: to a number (`to`), or by a step (`by`) within
    `min`..`max`. A step up needs its `max`: a rule that fires every stall must not scale
    without bound. Through the offsets backend's config change, so on a Strimzi-managed
    connector it is the resource's `tasksMax` (a REST change would be put back).
    """

    effects = Effects(writes=True)
    reported = Reported("TasksScaled", "changed tasks.max")
    type: Literal["scale-tasks"]
    to: Annotated[int, Field(ge=1, le=10_000)] | None = None
    by: Annotated[int, Field(ge=-10_000, le=10_000)] | None = None
    min: Annotated[int, Field(ge=1, le=10_000)] = 1
    max: Annotated[int, Field(ge=1, le=10_000)] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.to is None) == (self.by is None):
            raise LocatedError([((), "give exactly one of to or by")])
        if self.by == 0:
            raise LocatedError([(("by",), "must not be 0")])
        if self.by is not None and self.by > 0 and self.max is None:
            raise LocatedError([(("max",), "is required with a positive by (a bound)")])
        if self.max is not None and self.max < self.min:
            raise LocatedError([(("max",), "must not be less than min")])
        return self

    def target(self, current: int) -> int:
        """The `tasks.max` to set, from the current one."""
        if self.to is not None:
            return self.to
        wanted = current + (self.by or 0)
        return max(self.min, min(wanted, self.max if self.max is not None else wanted))


WEBHOOK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_webhook(value: str) -> str:
    # The message never echoes the URL: webhook URLs often carry a token.
    if WEBHOOK_NAME.match(value.strip()):  # a name in remediation.webhooks (a secret there)
        return value.strip()
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


class Notify(ActionModel):
    """Tell humans. `summary` is plain text (never a template); `webhook` is a URL, or the name
    of one in the config's `remediation.webhooks`, where a URL carrying a token can come from a
    secret (an environment variable) instead of the rules."""

    effects = Effects(tells_people=True)
    reported = Reported("PersonNotified", "told people")
    type: Literal["notify"]
    severity: Literal["info", "warning", "critical"] = "warning"
    webhook: Annotated[str, AfterValidator(_check_webhook)] | None = None
    summary: Annotated[str, Field(max_length=500)] | None = None


# The catalogue: a new action is its model above and one member here.
Action = Annotated[
    RestartFailedTasks
    | RestartTasks
    | SkipRecord
    | Pause
    | Stop
    | Resume
    | Rewind
    | ScaleTasks
    | Notify,
    Field(discriminator="type"),
]
ACTIONS: Mapping[str, type[ActionModel]] = {
    get_args(model.model_fields["type"].annotation)[0]: model
    for model in get_args(get_args(Action)[0])
}
ACTION_TYPES: tuple[str, ...] = tuple(ACTIONS)
_NONE = Effects()


def effects_of(types: str | Iterable[str]) -> Effects:
    """What an action does — or, for several, what any of them does. An unknown type does
    nothing here (the executor fails it as unknown)."""
    if isinstance(types, str):
        model = ACTIONS.get(types)
        return model.effects if model is not None else _NONE
    found = _NONE
    for name in types:
        found = found | effects_of(name)
    return found


def reported_of(action_type: str) -> Reported | None:
    """How an executed action of this type is reported (None: a type the catalogue lacks)."""
    model = ACTIONS.get(action_type)
    return model.reported if model is not None else None


def rule_timestamp(value: datetime) -> int:
    """An aware datetime as epoch milliseconds (for `rewind.to_timestamp`)."""
    return int(value.timestamp() * 1000)
