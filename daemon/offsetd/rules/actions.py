"""The action catalogue of a rule: restart (failed or named tasks), skip a record, pause,
stop, resume, rewind, notify.

`Action` is the union the rule format accepts, discriminated by `type`. Actions are data: a
notify `summary` is plain text (never a template), a webhook URL never appears in messages.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, AwareDatetime, Field, model_validator

from offsetd.durations import Duration
from offsetd.recordchecks import RecordCheck
from offsetd.rules.fields import RuleModel
from offsetd.yamlerrors import LocatedError

__all__ = [
    "ACTION_TYPES",
    "Action",
    "Backoff",
    "Notify",
    "Pause",
    "RestartFailedTasks",
    "RestartTasks",
    "Resume",
    "Rewind",
    "SkipRecord",
    "Stop",
    "rule_timestamp",
]


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


class RestartFailedTasks(RuleModel):
    """Restart the connector's failed tasks (Connect never restarts a failed task by itself)."""

    type: Literal["restart-failed-tasks"]
    backoff: Backoff = Field(default_factory=Backoff)


class RestartTasks(RuleModel):
    """Restart the task the event names whatever its state (a hung task says RUNNING), or every
    task of the connector when it names none (an MM2 flow): for progress events, where nothing
    is FAILED and `restart-failed-tasks` would restart nothing."""

    type: Literal["restart-tasks"]
    backoff: Backoff = Field(default_factory=Backoff)


class SkipRecord(RuleModel):
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


class Pause(RuleModel):
    type: Literal["pause"]


class Stop(RuleModel):
    type: Literal["stop"]


class Resume(RuleModel):
    type: Literal["resume"]


class Rewind(RuleModel):
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


class Notify(RuleModel):
    """Tell humans. `summary` is plain text (never a template); `webhook` is a URL, or the name
    of one in the config's `remediation.webhooks`, where a URL carrying a token can come from a
    secret (an environment variable) instead of the rules."""

    type: Literal["notify"]
    severity: Literal["info", "warning", "critical"] = "warning"
    webhook: Annotated[str, AfterValidator(_check_webhook)] | None = None
    summary: Annotated[str, Field(max_length=500)] | None = None


Action = Annotated[
    RestartFailedTasks | RestartTasks | SkipRecord | Pause | Stop | Resume | Rewind | Notify,
    Field(discriminator="type"),
]
ACTION_TYPES = (
    "restart-failed-tasks",
    "restart-tasks",
    "skip-record",
    "pause",
    "stop",
    "resume",
    "rewind",
    "notify",
)


def rule_timestamp(value: datetime) -> int:
    """An aware datetime as epoch milliseconds (for `rewind.to_timestamp`)."""
    return int(value.timestamp() * 1000)
