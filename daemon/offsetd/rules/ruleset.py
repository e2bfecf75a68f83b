"""Compiled rules and the `RuleSet` that indexes them for the hot path.

`RuleSet.matching(event, meta)` is the hot path. The rules that can see an event are looked up
by kind (and, for status events, state) and filtered by their name and metadata conditions
once per connector (remembered). Each remaining rule then runs one precompiled predicate made
of only the conditions it sets, cheapest first (`offsetd.rules.conditions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from offsetd.events.models import EventKind
from offsetd.rules.actions import Effects
from offsetd.rules.conditions import Condition, Predicate, compile_conditions
from offsetd.rules.models import (
    STATES,
    Action,
    Backoff,
    ConnectorMeta,
    Inhibit,
    Mode,
    Rule,
)

__all__ = ["CompiledAction", "CompiledRule", "RuleSet", "compile_rule"]


# Conditions that depend only on the connector's names and metadata: RuleSet checks them
# once per (kind, state, cluster, connector, metadata) and remembers the result.
_STATIC = frozenset({"connect_cluster", "connector", "connector_class", "connector_type"})
# Conditions that read only the event's `error` (`offsetd.rules.conditions`: the error's
# classes, stage, failure class and texts).
_ERROR_CONDITIONS = frozenset(
    {"stage", "failure", "exception_class", "root_cause_class", "message"}
)

Keyer = Callable[[Any, str | None], str]
"""(event, failing record `topic-p@o` or None) -> the event's count key for a rule."""

# The kinds as module constants: the hot path compares them by identity (`EventKind.X` costs
# ~0.25 us a read: a lookup through the enum's metaclass).
_TASK = EventKind.TASK_STATUS
_CONNECTOR = EventKind.CONNECTOR_STATUS
_DLQ = EventKind.DLQ_RECORD
_TOPIC = EventKind.TOPIC_STATUS
_SOURCE_OFFSET = EventKind.SOURCE_OFFSET


def task_id_of(event: Any) -> int | None:
    """The event's task id; None for the kinds that have none (read by kind, not by getattr:
    a pydantic model misses an attribute slowly, ~4 us, its __getattr__ raises)."""
    kind = event.kind
    return None if kind is _CONNECTOR or kind is _SOURCE_OFFSET else event.task_id


def _text(value: object) -> str:
    return "" if value is None else str(value)


_KEY_FIELDS: dict[str, Callable[[Any], str]] = {
    "connector": lambda e: e.connector,
    "task_id": lambda e: _text(task_id_of(e)),
    "exception_class": lambda e: _text(getattr(getattr(e, "error", None), "exception_class", None)),
    "root_cause_class": lambda e: _text(
        getattr(getattr(e, "error", None), "root_cause_class", None)
    ),
}


def count_keyer(names: Sequence[str]) -> Keyer:
    """The count key function for a rule's `when.key`, e.g. `connector=x,task_id=0`.

    Compiled once per rule (`CompiledRule.keyer`): the engine runs it for every counted event.
    """
    names = tuple(names)
    if names == ("connector",):
        return lambda e, _r: f"connector={e.connector}"
    if names == ("connector", "task_id"):
        return lambda e, _r: f"connector={e.connector},task_id={_text(task_id_of(e))}"
    if names == ("connector", "record"):
        return lambda e, r: f"connector={e.connector},record={r or ''}"

    def key(event: Any, record: str | None) -> str:
        return ",".join(
            f"record={record or ''}" if name == "record" else f"{name}={_KEY_FIELDS[name](event)}"
            for name in names
        )

    return key


@dataclass(frozen=True, slots=True, eq=False)
class CompiledRule:
    """A rule ready for the hot path: flat fields, precompiled predicates."""

    rule: Rule
    name: str
    mode: Mode
    enabled: bool
    kinds: frozenset[EventKind]
    states: frozenset[str] | None
    static: tuple[Predicate, ...]  # on names and metadata only
    dynamic: Predicate | None  # the other conditions and `unless`, as one predicate
    conditions: tuple[Condition, ...]
    unless_conditions: tuple[Condition, ...]
    count: int
    within_ms: int
    key: tuple[str, ...]
    keys_record: bool
    cooldown_ms: int
    budget_max: int
    budget_per_ms: int
    inhibits: Inhibit | None
    has_skip: bool
    actions: tuple[CompiledAction, ...]
    action_types: tuple[str, ...]  # the actions' types, in order
    keyer: Keyer  # an event's count key: `count_keyer(key)`, compiled once
    # A condition or an `unless` reads the connector's class or type: without metadata the
    # rule can tell neither a match nor an exclusion, so the event waits (engine.later).
    needs_meta: bool = False
    name_static: tuple[Predicate, ...] = ()  # `static` less the metadata conditions
    # `dynamic` reads the event's error and nothing else (its conditions and `unless` are all
    # on the error: `_ERROR_CONDITIONS`): its answer for one (frozen) error holds for every
    # event that carries it, whatever its connector, task or metadata
    error_only: bool = False

    def matches(self, event: Any, meta: ConnectorMeta | None) -> bool:
        """Every condition, kind and state included (the slow, self-contained check)."""
        if event.kind not in self.kinds:
            return False
        if self.states is not None and getattr(event, "state", None) not in self.states:
            return False
        if not all(check(event, meta) for check in self.static):
            return False
        return self.dynamic is None or self.dynamic(event, meta)


def _all_of(tests: Sequence[Predicate]) -> Predicate | None:
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        first, second = tests
        return lambda e, m: first(e, m) and second(e, m)

    def all_tests(e: Any, m: ConnectorMeta | None) -> bool:
        # a plain loop: this is the hot path, and all() over a generator is slower
        for test in tests:  # noqa: SIM110
            if not test(e, m):
                return False
        return True

    return all_tests


def _dynamic(tests: Sequence[Predicate], unless: Sequence[Predicate]) -> Predicate | None:
    required = _all_of(tests)
    excluded = _all_of(unless)  # all unless conditions hold -> no match
    if excluded is None:
        return required
    if required is None:
        return lambda e, m: not excluded(e, m)
    return lambda e, m: required(e, m) and not excluded(e, m)


def compile_rule(rule: Rule) -> CompiledRule:
    conditions = compile_conditions(rule.match)
    unless = compile_conditions(rule.match.unless) if rule.match.unless is not None else ()
    dynamic_names = [c.name for c in conditions if c.name not in _STATIC and c.name != "state"]
    dynamic_names += [c.name for c in unless]
    actions = tuple(_compile_action(action) for action in rule.actions)
    return CompiledRule(
        rule=rule,
        name=rule.name,
        mode=rule.mode,
        enabled=rule.enabled,
        kinds=frozenset(rule.match.kind),
        states=frozenset(rule.match.state) if rule.match.state is not None else None,
        static=tuple(c.test for c in conditions if c.name in _STATIC),
        # state is resolved by the RuleSet's index: no need to test it again
        dynamic=_dynamic(
            [c.test for c in conditions if c.name not in _STATIC and c.name != "state"],
            [c.test for c in unless],
        ),
        conditions=conditions,
        unless_conditions=unless,
        count=rule.when.count,
        within_ms=rule.when.within,
        key=tuple(rule.when.key),
        keys_record="record" in rule.when.key,
        cooldown_ms=rule.limits.cooldown,
        budget_max=rule.limits.budget.max,
        budget_per_ms=rule.limits.budget.per,
        inhibits=rule.inhibits,
        has_skip=any(a.effects.skips_record for a in rule.actions),
        actions=actions,
        action_types=tuple(action.type for action in actions),
        keyer=count_keyer(rule.when.key),
        needs_meta=any(c.needs_meta for c in (*conditions, *unless)),
        error_only=bool(dynamic_names) and all(n in _ERROR_CONDITIONS for n in dynamic_names),
        name_static=tuple(c.test for c in conditions if c.name in _STATIC and not c.needs_meta),
    )


@dataclass(frozen=True, slots=True)
class CompiledAction:
    """An action's type, its parameters as JSON values, the restart backoff if any, and what
    it does (its model's `effects`)."""

    type: str
    params: dict[str, Any]
    backoff: Backoff | None = None
    effects: Effects = field(default_factory=Effects)


def _compile_action(action: Action) -> CompiledAction:
    backoff = getattr(action, "backoff", None) if action.effects.backoff else None
    return CompiledAction(action.type, action.planned_params(), backoff, action.effects)


_STATUS_KINDS = (EventKind.CONNECTOR_STATUS, EventKind.TASK_STATUS)
_CANDIDATE_CACHE_LIMIT = 65536
_LIVE_CACHE_LIMIT = 16384
_VERDICT_CACHE_LIMIT = 4096  # errors (each with a verdict per rule; its key holds no text)
_CandidateKey = tuple[str, str | None, str, str, str | None, str | None]


class RuleSet:
    """Compiled rules in load order, indexed for the hot path.

    `candidates` finds the rules for an event by kind (and state, for status events), keeps
    those whose name and metadata conditions hold for its connector, and remembers that per
    (kind, state, cluster, connector, metadata): the same few connectors come back all day.
    """

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: tuple[CompiledRule, ...] = tuple(compile_rule(r) for r in rules)
        self.by_name: dict[str, CompiledRule] = {r.name: r for r in self.rules}
        # how long restart backoff state may matter: the longest reset window of any rule
        self.restart_reset_ms = max(
            (a.backoff.reset_after for r in self.rules for a in r.actions if a.backoff),
            default=0,
        )
        self._by_kind: dict[str, tuple[CompiledRule, ...]] = {
            kind: tuple(r for r in self.rules if kind in r.kinds) for kind in EventKind
        }
        # status events: (kind, state) -> rules; unknown states and tombstones use `None`
        self._by_state: dict[tuple[str, str | None], tuple[CompiledRule, ...]] = {}
        for kind in _STATUS_KINDS:
            for state in (*STATES, None):
                self._by_state[(kind, state)] = tuple(
                    r
                    for r in self._by_kind[kind]
                    if r.states is None or (state is not None and state in r.states)
                )
        # key -> (candidates, whether none of them has a dynamic condition)
        self._candidates: dict[_CandidateKey, tuple[tuple[CompiledRule, ...], bool]] = {}
        self.meta_rules = tuple(r for r in self.rules if r.needs_meta)
        # how long a deferred event may matter: the longest window of a rule that needs metadata
        self.meta_within_ms = max((r.within_ms for r in self.meta_rules), default=0)
        # how long a planned decision's limits may matter (budget, cooldown, inhibits, backoff)
        self.limits_horizon_ms = max(
            (
                max(r.budget_per_ms, r.cooldown_ms, r.inhibits.for_ if r.inhibits else 0)
                for r in self.rules
            ),
            default=0,
        )
        self.limits_horizon_ms = max(self.limits_horizon_ms, self.restart_reset_ms)
        self._waiting: dict[tuple[str, str | None, str, str], tuple[CompiledRule, ...]] = {}
        # (id of candidates, task_id, id of error, record topic) -> (candidates, error, live):
        # the value holds the objects whose ids are in the key, so no id is reused meanwhile
        self._live: dict[tuple[int, Any, int, Any], tuple[Any, Any, tuple[CompiledRule, ...]]]
        self._live = {}
        # id of an error -> (the error, rule -> whether its error-only `dynamic` holds)
        self._verdicts: dict[int, tuple[Any, dict[CompiledRule, bool]]] = {}
        # id -> candidates with no dynamic condition at all: `live` is the candidates themselves
        self._plain: dict[int, tuple[CompiledRule, ...]] = {}

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self) -> Iterator[CompiledRule]:
        return iter(self.rules)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    def candidates(self, event: Any, meta: ConnectorMeta | None) -> tuple[CompiledRule, ...]:
        """The rules whose kind, state, names and metadata conditions hold for this event.

        What remains to check is each rule's `dynamic` predicate.
        """
        return self._entry(event, meta)[0]

    def matched(self, event: Any, meta: ConnectorMeta | None) -> tuple[CompiledRule, ...]:
        """`live(candidates(event, meta), event, meta)`, with one lookup: the engine's hot path.

        Most events (RUNNING statuses) have only candidates without a dynamic condition, or
        none at all: they are answered by the candidates' own entry.
        """
        found = self._entry(event, meta)
        if found[1]:
            return found[0]
        return self._live_of(found[0], event, meta)

    def _entry(
        self, event: Any, meta: ConnectorMeta | None
    ) -> tuple[tuple[CompiledRule, ...], bool]:
        """The event's candidates and whether none has a dynamic condition, remembered per
        kind, state, names and metadata."""
        kind = event.kind
        state = event.state if kind is _TASK or kind is _CONNECTOR else None
        key: _CandidateKey = (
            kind,
            state,
            event.connect_cluster,
            event.connector,
            None if meta is None else meta.connector_class,
            None if meta is None else meta.connector_type,
        )
        found = self._candidates.get(key)
        return self._look_up(key, event, meta) if found is None else found

    def _look_up(
        self, key: _CandidateKey, event: Any, meta: ConnectorMeta | None
    ) -> tuple[tuple[CompiledRule, ...], bool]:
        """Find and remember the candidates for `key` (the event's kind, state, names and
        metadata), with whether none of them has a dynamic condition."""
        kind, state = key[0], key[1]
        if kind is _TASK or kind is _CONNECTOR:
            base = self._by_state.get((kind, state))
            if base is None:  # a state this version does not know, or a tombstone
                base = self._by_state[(kind, None)]
        else:
            base = self._by_kind[kind]
        found = tuple(
            r
            for r in base
            if (meta is not None or not r.needs_meta)
            and all(test(event, meta) for test in r.static)
        )
        if len(self._candidates) >= _CANDIDATE_CACHE_LIMIT:
            self._candidates.clear()
            self._plain.clear()
        plain = all(r.dynamic is None for r in found)
        self._candidates[key] = (found, plain)
        if plain:
            self._plain[id(found)] = found  # held here: its id is not reused meanwhile
        return found, plain

    def live(
        self, candidates: tuple[CompiledRule, ...], event: Any, meta: ConnectorMeta | None
    ) -> tuple[CompiledRule, ...]:
        """Of `candidates` (from `candidates(event, meta)`), those whose `dynamic` predicate
        holds, in order: what `matching` returns.

        Remembered for status and DLQ events. Their dynamic conditions read the task id, the
        error (its classes, stage, failure class and texts) and the failing record's topic, plus
        the state, names and metadata that `candidates` was looked up by; the decoders give
        every record with the same error one frozen `ErrorInfo` instance, so the answer is
        keyed by the candidates' and the error's identity, the task id and the topic. A FAILED
        status has ~24 candidates with their message regexes and failure classes, and the same
        few errors repeat: the predicates run once per distinct error and connector.
        """
        if not candidates or id(candidates) in self._plain:
            return candidates  # no dynamic condition to check (a RUNNING status, mostly)
        return self._live_of(candidates, event, meta)

    def _live_of(
        self, candidates: tuple[CompiledRule, ...], event: Any, meta: ConnectorMeta | None
    ) -> tuple[CompiledRule, ...]:
        """`live` for candidates of which some have a dynamic condition."""
        kind = event.kind
        # the attributes each kind has (a pydantic model's missing attribute is slow to miss)
        if kind is _TASK:
            error, key = event.error, (id(candidates), event.task_id, id(event.error), None)
        elif kind is _CONNECTOR:
            error, key = event.error, (id(candidates), None, id(event.error), None)
        elif kind is _DLQ:
            record = event.record
            topic = None if record is None else record.topic
            error, key = event.error, (id(candidates), event.task_id, id(event.error), topic)
        elif kind is _TOPIC:
            error, key = None, (id(candidates), event.task_id, id(None), None)
        else:
            return tuple(r for r in candidates if r.dynamic is None or r.dynamic(event, meta))
        found = self._live.get(key)
        if found is not None:
            return found[2]
        if error is None:
            live = tuple(r for r in candidates if r.dynamic is None or r.dynamic(event, meta))
        else:
            live = self._live_with(candidates, event, meta, error)
        if len(self._live) >= _LIVE_CACHE_LIMIT:
            self._live.clear()
        self._live[key] = (candidates, error, live)
        return live

    def _live_with(
        self,
        candidates: tuple[CompiledRule, ...],
        event: Any,
        meta: ConnectorMeta | None,
        error: Any,
    ) -> tuple[CompiledRule, ...]:
        """`live` not remembered yet for these candidates, task and topic, for an event with
        an `error`. A rule whose conditions read only the error answers once per error: the
        same error comes with many connectors and tasks (a broker outage, one bad deploy), and
        its regexes and globs need not run for each (`CompiledRule.error_only`)."""
        got = self._verdicts.get(id(error))
        if got is None:
            if len(self._verdicts) >= _VERDICT_CACHE_LIMIT:
                self._verdicts.clear()
            got = self._verdicts[id(error)] = (error, {})  # holds the error: its id stays its own
        verdicts = got[1]
        live: list[CompiledRule] = []
        for rule in candidates:
            test = rule.dynamic
            if test is None:
                live.append(rule)
            elif rule.error_only:
                verdict = verdicts.get(rule)
                if verdict is None:
                    verdict = verdicts[rule] = test(event, meta)
                if verdict:
                    live.append(rule)
            elif test(event, meta):
                live.append(rule)
        return tuple(live)

    def waiting_for_meta(self, event: Any) -> tuple[CompiledRule, ...]:
        """The rules that need metadata and could match `event` once it is known.

        Every condition that does not read the metadata holds (an `unless` on the class or
        type cannot exclude yet). Asked only while the connector's metadata is unknown.
        """
        if not self.meta_rules:
            return ()
        kind = event.kind
        status = kind is _TASK or kind is _CONNECTOR
        state = event.state if status else None
        key = (kind, state, event.connect_cluster, event.connector)
        base = self._waiting.get(key)
        if base is None:
            base = tuple(
                r
                for r in self.meta_rules
                if kind in r.kinds
                and (r.states is None or (state is not None and state in r.states))
                and all(test(event, None) for test in r.name_static)
            )
            if len(self._waiting) >= _CANDIDATE_CACHE_LIMIT:
                self._waiting.clear()
            self._waiting[key] = base
        return tuple(r for r in base if r.dynamic is None or r.dynamic(event, None))

    def matching(self, event: Any, meta: ConnectorMeta | None) -> list[CompiledRule]:
        """The rules matching `event`, in load order (the hot path)."""
        return list(self.live(self.candidates(event, meta), event, meta))
