"""The durable state the engine keeps for one connector (one faust Table value).

Everything is in event time, so windows, budgets, cooldowns, backoff and inhibitions survive a
restart together with the state. Inner records are TypedDicts and tuples: the engine updates
them as plain dicts and lists (cheap), pydantic checks them when state is read back from
JSON. The state stays compact: windows, budgets and inhibitions are pruned as they expire.

Three small, bounded records make decisions wait instead of getting lost (`offsetd.engine.later`),
all empty in the common case: `held` (a decision an inhibition suppressed, while the inhibition
holds), `deferred` (events some rule could match only once the connector's metadata is known)
and `released` (planned decisions whose action did not run and whose limits were given back).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

__all__ = [
    "BackoffState",
    "ConnectorState",
    "Deferred",
    "Held",
    "Inhibition",
    "RuleState",
    "StatusEntry",
    "Tally",
    "TallyMark",
    "WindowEntry",
]


class StatusEntry(TypedDict):
    """The latest status record of the connector or one task."""

    state: str
    generation: int | None
    worker_id: str | None
    time_ms: int


# (event time, source topic, source partition, source offset, failing record `topic-p@o`)
WindowEntry = tuple[int, str, int, int, str | None]


class RuleState(TypedDict):
    """One rule's counting and limits for this connector."""

    windows: dict[str, list[WindowEntry]]  # count key -> matching events, by event time
    executed: list[int]  # event times of executed (planned) decisions, within the budget
    last_executed_ms: int | None  # for the cooldown


class BackoffState(TypedDict):
    """Restart decisions for this connector since the backoff last reset."""

    attempts: int
    last_ms: int


class Inhibition(TypedDict):
    """Decisions of a rule are suppressed: `by` fired at `since_ms`, until `until_ms`."""

    by: str
    since_ms: int
    until_ms: int
    stopped: bool  # the connector was seen STOPPED since; RUNNING next ends the inhibition


class Held(TypedDict):
    """The latest decision of a rule that an inhibition suppressed, kept while the inhibition
    holds: if the inhibiting decision turns out not to have run, it is decided again."""

    by: str  # the inhibiting rule ...
    since_ms: int  # ... and its decision's event time (the inhibition's `since_ms`)
    decision: dict[str, Any]  # the suppressed decision, as JSON (it is re-planned from this)


class Deferred(TypedDict):
    """An event that some rule could match only with the connector's metadata, unknown yet."""

    time_ms: int  # its event time
    deferred_ms: int  # when it was deferred (processing time)
    event: dict[str, Any]  # the event, as JSON (a DLQ event without its headers)


class TallyMark(TypedDict):
    """One suppressed decision, as the first or last of a tally remembers it."""

    decision_id: str
    event_time_ms: int
    decided_at_ms: int
    topic: str  # the triggering event's source coordinates
    partition: int
    offset: int
    record: str | None  # the failing record, `topic-partition@offset`, when the event names one


class Tally(TypedDict):
    """Suppressed decisions of one rule on one connector for one reason, incident and window."""

    id: str
    rule: str
    mode: str
    reason: str
    incident: str | None  # the rule's latest planned decision on the connector, if any
    window_start_ms: int
    count: int
    actions: list[str]  # the action types that were not taken
    detail: str | None  # the last suppression's reason, in words
    first: TallyMark
    last: TallyMark


class ConnectorState(BaseModel):
    """What the engine remembers about one connector (`owner_key(connect_cluster, connector)`).

    `decide` updates a state in place and returns it; copy it first (`model_copy(deep=True)`)
    to keep the old value.
    """

    model_config = ConfigDict(extra="forbid")

    connect_cluster: str = ""
    connector: str = ""
    # idempotency: the highest offset processed per source `topic:partition`
    offsets: dict[str, int] = Field(default_factory=dict)
    watermark_ms: int | None = None  # the highest event time seen
    next_sweep_ms: int = 0  # event time of the next pruning sweep
    connector_status: StatusEntry | None = None
    tasks: dict[int, StatusEntry] = Field(default_factory=dict)
    rules: dict[str, RuleState] = Field(default_factory=dict)
    restart_backoff: BackoffState | None = None
    inhibitions: dict[str, Inhibition] = Field(default_factory=dict)  # by inhibited rule
    held: list[Held] = Field(default_factory=list)
    deferred: list[Deferred] = Field(default_factory=list)
    released: dict[str, int] = Field(default_factory=dict)  # decision id -> its event time
    # offsetd.engine.tally: suppressed decisions counted, by "rule\x1freason", and each rule's
    # latest planned decision (its incident); bounded by the rules and reasons
    suppressed: dict[str, Tally] = Field(default_factory=dict)
    incidents: dict[str, str] = Field(default_factory=dict)
    # progress episodes shown to the rules, by task id ("" the connector): "<state>@<status
    # time ms>@<time of a restart planned in it, or empty>"; `ok` has none (decide.new_episode)
    progress: dict[str, str] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, data: str | bytes) -> ConnectorState:
        return cls.model_validate_json(data)
