"""A decision: what the engine planned (or suppressed) for one firing, and why.

The engine's one output. It crosses every boundary after the engine — the audit topic, the
executor, the events topic's outcome nudges, `offsetd history` — so it is a frozen, validated
value with a stable id: the hash of the rule, the connector, the count key and the trigger's
source coordinates, the same on every replay of the same records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Literal, NoReturn

from pydantic import BaseModel, ConfigDict

from offsetd.events.models import RecordRef, SourceRecord
from offsetd.rules.actions import Effects, effects_of
from offsetd.rules.matching import RuleSet
from offsetd.rules.models import Mode
from offsetd.rules.ruleset import CompiledRule

__all__ = [
    "Decision",
    "DecisionInputs",
    "EventSummary",
    "Firing",
    "Outcome",
    "PlannedAction",
    "Reason",
    "RecordStatus",
    "RuleSpec",
    "Suppression",
    "audit_json",
    "decision_id",
    "rule_spec",
]

Outcome = Literal["planned", "suppressed"]
Reason = Literal["disabled", "inhibited", "cooldown", "budget"]
RecordStatus = Literal["exact", "to_locate"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlannedAction(_Frozen):
    """One action of the rule, with its parameters and the ones the engine computed.

    restart-failed-tasks: `backoff`, `attempt`, `delay_ms`, `not_before_ms`;
    skip-record: `record` (or None), `record_status`, `next_offset` (record offset + 1);
    rewind: `to_timestamp` plus `to_timestamp_ms`, or `plan_file`; notify: as written.
    """

    type: str
    params: dict[str, Any]

    @property
    def effects(self) -> Effects:
        """What this action does (`offsetd.rules.actions.Effects`)."""
        return effects_of(self.type)


class EventSummary(_Frozen):
    """The triggering event, compactly."""

    kind: str
    state: str | None = None
    task_id: int | None = None
    exception_class: str | None = None
    root_cause_class: str | None = None
    stage: str | None = None
    record: RecordRef | None = None
    # progress events: the state, how long it held, and the figures in words
    progress: str | None = None
    held_ms: int | None = None
    detail: str | None = None
    stuck_with: tuple[str, ...] = ()  # the connectors stuck in the same cycle (blast radius)


class DecisionInputs(_Frozen):
    """The events counted for this firing (their source coordinates) and the trigger."""

    events: tuple[SourceRecord, ...]
    trigger: EventSummary


class Decision(_Frozen):
    """A plan (or a suppressed one) for the audit and the executor. No I/O happened."""

    id: str  # hash of rule, cluster, connector, count key and the trigger's source coordinates
    rule: str
    mode: Mode
    connect_cluster: str
    connector: str
    task_id: int | None
    key: str  # the count key, e.g. "connector=orders-sink,record=orders-3@1200"
    actions: tuple[PlannedAction, ...]
    record: RecordRef | None
    record_status: RecordStatus | None  # set when the actions include skip-record
    outcome: Outcome
    reason: Reason | None
    detail: str | None  # why suppressed, in words
    inhibited_by: str | None = None  # reason `inhibited`: the rule whose decision inhibits this
    event_time_ms: int
    decided_at_ms: int
    inputs: DecisionInputs

    @property
    def action_types(self) -> list[str]:
        return [a.type for a in self.actions]

    @property
    def effects(self) -> Effects:
        """What any of its actions does: which guards apply, whether it skips a record."""
        return effects_of(self.action_types)

    @property
    def from_failure(self) -> bool:
        """Caused by a failure (a FAILED status or a DLQ record): it can trip the breaker."""
        trigger = self.inputs.trigger
        return trigger.kind == "dlq_record" or trigger.state == "FAILED"

    @property
    def record_text(self) -> str | None:
        record = self.record
        return None if record is None else f"{record.topic}-{record.partition}@{record.offset}"

    @property
    def trigger_source(self) -> SourceRecord:
        """The counted event at the decision's event time (the newest): its trigger."""
        events = self.inputs.events
        return next(
            (e for e in reversed(events) if e.timestamp_ms == self.event_time_ms), events[-1]
        )

    def audit_record(self, rules: RuleSet | None = None) -> dict[str, Any]:
        """The decision as a JSON-able dict for the audit topic.

        With `rules`, the record also carries the rule as it was when it decided (`rule_spec`),
        so the audit explains itself after the rule file changes: one frozen `RuleSpec` shared
        by the records of the rule (copy it to change it), which `audit_json` does not encode
        again.
        """
        record = self.model_dump(mode="json")
        compiled = rules.by_name.get(self.rule) if rules is not None else None
        if compiled is not None:
            record["rule_spec"] = rule_spec(compiled)
        return record

    def summary(self) -> str:
        """One line for logs: rule, connector, outcome, actions and their key parameters."""
        parts = [
            f"rule={self.rule}",
            f"connector={self.connect_cluster}/{self.connector}",
            f"mode={self.mode}",
            f"outcome={self.outcome}" + (f" ({self.reason})" if self.reason else ""),
            f"actions=[{', '.join(self.action_types)}]",
        ]
        if self.task_id is not None:
            parts.append(f"task={self.task_id}")
        if self.record is not None:
            parts.append(f"record={self.record.topic}-{self.record.partition}@{self.record.offset}")
        if self.record_status is not None:
            parts.append(f"record_status={self.record_status}")
        for action in self.actions:
            not_before = action.params.get("not_before_ms")
            if not_before is not None:
                parts.append(f"not_before_ms={not_before}")
        parts.append(f"event_time_ms={self.event_time_ms}")
        return " ".join(parts)


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("a rule_spec is shared by every audit record of its rule: copy it to change it")


class _FrozenList(list[Any]):
    """A JSON array no one may change: equal to, and encoded as, the list it was made from."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (list(self),)  # copies and pickles are plain, mutable lists


class _FrozenDict(dict[str, Any]):
    """A JSON object no one may change: equal to, and encoded as, the dict it was made from."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = clear = update = setdefault = _refuse

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (dict(self),)  # copies and pickles are plain, mutable dicts


class RuleSpec(_FrozenDict):
    """A rule as its audit records carry it (`rule_spec`), with its JSON text (`json.dumps`).

    Every planned decision's audit record carries its rule; dumping the rule and encoding it
    again for each record cost about a third of the record. A compiled rule cannot change, so
    its spec is made once (`rule_spec`) and shared by its records: frozen all the way down,
    so that no holder of one record can change the others', and spliced into the audit's
    bytes as the text it was encoded to once (`audit_json`).
    """

    __slots__ = ("_text",)

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__({k: _frozen(v) for k, v in spec.items()})
        self._text = json.dumps(spec)

    @property
    def text(self) -> str:
        """`json.dumps` of the spec."""
        return self._text


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return _FrozenDict({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return _FrozenList(_frozen(v) for v in value)
    return value


@lru_cache(maxsize=1024)  # by identity: a reloaded rule is a new CompiledRule
def rule_spec(compiled: CompiledRule) -> RuleSpec:
    """The rule as the audit keeps it, defaults included (they may change between versions,
    the audit must not)."""
    return RuleSpec(compiled.rule.model_dump(mode="json", by_alias=True))


def audit_json(record: Mapping[str, Any]) -> bytes:
    """A record's bytes in the audit topic: `json.dumps(record).encode()`, exactly.

    A decision's record ends with its rule's shared `RuleSpec` (`Decision.audit_record`):
    that part is not encoded again but spliced in as its text, which gives the same bytes
    (`json.dumps`'s separators are `", "` and `": "`)."""
    if (
        type(record) is dict
        and len(record) > 1
        and type(record.get("rule_spec")) is RuleSpec
        and next(reversed(record)) == "rule_spec"
    ):
        head = record.copy()
        spec = head.pop("rule_spec")
        return f'{json.dumps(head)[:-1]}, "rule_spec": {spec.text}}}'.encode()
    return json.dumps(record).encode()


def decision_id(
    rule: str, connect_cluster: str, connector: str, key: str, source: SourceRecord
) -> str:
    text = "\x1f".join(
        (
            rule,
            connect_cluster,
            connector,
            key,
            source.topic,
            str(source.partition),
            str(source.offset),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(slots=True, kw_only=True, eq=False)
class Suppression:
    """A firing that cooldown, budget or `enabled: false` suppressed, as the daemon keeps it:
    only what its tally (`engine.tally`) and the breaker read.

    86 % of the firings on the bench's mix are these, and all but one in a DLQ storm; a
    validated `Decision` with its inputs, summary and id cost them ~20 us each, for a count.
    The id (the same as the `Decision`'s) is computed only when asked. Rule tests and the
    per-record pipeline keep getting `Decision`s (`decide`); the daemon asks for these
    (`decide_firings`). Held (`inhibited`) firings stay `Decision`s: they are planned again.
    """

    rule: str
    mode: Mode
    connect_cluster: str
    connector: str
    task_id: int | None
    key: str
    action_types: list[str]
    reason: Reason | None
    detail: str | None
    event_time_ms: int
    decided_at_ms: int
    trigger_source: SourceRecord
    record_text: str | None
    from_failure: bool
    _id: str | None = field(default=None, init=False, repr=False)
    outcome: ClassVar[Outcome] = "suppressed"
    inhibited_by: ClassVar[str | None] = None

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = decision_id(
                self.rule, self.connect_cluster, self.connector, self.key, self.trigger_source
            )
        return self._id


Firing = Decision | Suppression
"""What the engine's daemon path makes of a firing (`decide_firings`)."""
