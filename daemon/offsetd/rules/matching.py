"""Matching events against rules: pure, precompiled, indexed by event kind (and state).

`RuleSet.matching(event, meta)` is the hot path. The rules that can see an event are looked up
by kind (and, for status events, state) and filtered by their name and metadata conditions
once per connector (remembered). Each remaining rule then runs one precompiled predicate made
of only the conditions it sets, cheapest first. Results for names and exception classes are
memoised (the same few values repeat endlessly); plain-text `message` patterns are substring
tests, not regexes. `explain` walks every rule slowly and says why it matched or not.
"""

from __future__ import annotations

import fnmatch
import re
import re._constants as _sre_constants  # type: ignore[import-not-found]  # no stubs
import re._parser as _sre_parser  # type: ignore[import-not-found]  # no stubs
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    EventKind,
    SourceOffsetEvent,
    TaskStatusEvent,
    TopicStatusEvent,
)
from offsetd.rules.models import (
    STATES,
    Action,
    Backoff,
    ConnectorMeta,
    Inhibit,
    Mode,
    RegexPattern,
    RestartFailedTasks,
    Rewind,
    Rule,
    Unless,
    format_duration,
    rule_timestamp,
)

__all__ = [
    "AnyEvent",
    "CompiledAction",
    "CompiledRule",
    "RuleSet",
    "compile_rule",
    "explain",
]

AnyEvent = (
    ConnectorStatusEvent | TaskStatusEvent | TopicStatusEvent | DlqRecordEvent | SourceOffsetEvent
)

_GLOB_CHARS = frozenset("*?[")
_CACHE_LIMIT = 4096  # names and classes: short strings
_MESSAGE_MEMO_LIMIT = 256  # its keys hold trace heads (up to 4 KiB each)
_MISSING = "<none>"
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _scoped(regex: str) -> str:
    """`(?i)abc` -> `(?i:abc)`: leading global flags made local, so regexes can be joined."""
    found = _GLOBAL_FLAGS.match(regex)
    if found is None:
        return f"(?:{regex})"
    return f"(?{found.group(1)}:{regex[found.end() :]})"


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")
_IGNORE_CASE = "(?i)"


class _LastValue:
    """A one-slot memo of a function of one value, by identity. Every rule of one event works
    on the same strings and error, so this computes once per event. The slot holds the value
    (so its identity stays unique) and is replaced atomically (one tuple)."""

    __slots__ = ("_function", "_slot")

    def __init__(self, function: Callable[[Any], Any]) -> None:
        self._function = function
        self._slot: tuple[Any, Any] = (object(), None)

    def __call__(self, value: Any) -> Any:
        slot = self._slot
        if slot[0] is value:
            return slot[1]
        result = self._function(value)
        self._slot = (value, result)
        return result


_lowered: Callable[[str], str] = _LastValue(str.lower)


def _texts(error: ErrorInfo) -> tuple[str, ...]:
    """What `message` searches: the trace head, plus the messages it does not contain."""
    head = error.trace_head
    texts = [head] if head else []
    for text in (error.message, error.root_cause_message):
        if text and text not in head:
            texts.append(text)
    return tuple(texts)


_search_texts: Callable[[ErrorInfo], tuple[str, ...]] = _LastValue(_texts)


def _every_text(error: ErrorInfo) -> tuple[str, ...]:
    return tuple(t for t in (error.message, error.root_cause_message, error.trace_head) if t)


_all_texts: Callable[[ErrorInfo], tuple[str, ...]] = _LastValue(_every_text)


def _substrings_only(patterns: Sequence[str]) -> bool:
    return all(_REGEX_SYNTAX.isdisjoint(p.removeprefix(_IGNORE_CASE)) for p in patterns)


def any_regex(
    patterns: Sequence[str], how: Literal["search", "fullmatch"]
) -> Callable[[str], bool]:
    """Whether any of the regexes matches, compiled into one alternation when possible.

    Searches for plain text (no regex syntax; the common case for messages), optionally after
    `(?i)`, are substring tests, many times faster than `re` on a 4 KiB trace head.
    """
    if how == "search":
        plain: list[str] = []
        folded: list[str] = []
        regexes: list[str] = []
        for pattern in patterns:
            body = pattern.removeprefix(_IGNORE_CASE)
            if not _REGEX_SYNTAX.isdisjoint(body):
                regexes.append(pattern)
            elif pattern.startswith(_IGNORE_CASE):
                folded.append(body.lower())  # (?i)text: compared lower-cased
            else:
                plain.append(body)
        if not regexes:
            return _substrings(tuple(plain), tuple(folded))
    try:
        joined = re.compile("|".join(_scoped(p) for p in patterns))
    except re.error:  # flags that cannot be scoped: compile each on its own
        compiled = [getattr(re.compile(p), how) for p in patterns]
        return lambda value: any(match(value) is not None for match in compiled)
    match = getattr(joined, how)
    required = _required_literals(patterns) if how == "search" else None
    if required is None:
        return lambda value: match(value) is not None
    plain, folded = required

    def search(value: str) -> bool:
        # A regex can only match a text that contains one of its required literals: substring
        # tests (memchr-fast) spare the regex engine most 4 KiB trace heads.
        if any(literal in value for literal in plain):
            return match(value) is not None
        if folded:
            if not value.isascii():  # Unicode case folding: no shortcut
                return match(value) is not None
            lowered = _lowered(value)
            if any(literal in lowered for literal in folded):
                return match(value) is not None
        return False

    return search


_MIN_LITERAL = 3


def _required_literals(patterns: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """Literals of which every match of any of `patterns` contains at least one.

    (case-sensitive ones, lower-cased ASCII ones for `(?i)` patterns), or None when some
    pattern has none of at least three characters (then the regex always runs).
    """
    plain: list[str] = []
    folded: list[str] = []
    for pattern in patterns:
        try:
            parsed = _sre_parser.parse(pattern)
        except (re.error, RecursionError):
            return None
        flags = parsed.state.flags
        if flags & (re.VERBOSE | re.LOCALE):
            return None
        literals = _literals_of(list(parsed))
        if literals is None:
            return None
        if flags & re.IGNORECASE:
            if not all(lit.isascii() for lit in literals):
                return None
            folded.extend(lit.lower() for lit in literals)
        else:
            plain.extend(literals)
    return plain, folded


def _literals_of(items: list[Any]) -> list[str] | None:
    """One required literal of a parsed sequence, or one per branch of a lone alternation."""
    if len(items) == 1:
        op, arg = items[0]
        if op is _sre_constants.BRANCH:
            found: list[str] = []
            for branch in arg[1]:
                literals = _literals_of(list(branch))
                if literals is None:
                    return None
                found.extend(literals)
            return found
        if op is _sre_constants.SUBPATTERN and not arg[1] and not arg[2]:  # no inline flags
            return _literals_of(list(arg[3]))
    best, run = "", []
    for op, arg in items:
        if op is _sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return [best] if len(best) >= _MIN_LITERAL else None


def _substrings(plain: tuple[str, ...], folded: tuple[str, ...]) -> Callable[[str], bool]:
    if len(plain) == 1 and not folded:
        literal = plain[0]
        return lambda value: literal in value
    if len(folded) == 1 and not plain:
        literal = folded[0]
        return lambda value: literal in _lowered(value)

    def found(value: str) -> bool:
        if any(literal in value for literal in plain):
            return True
        if folded:
            lowered = _lowered(value)
            return any(literal in lowered for literal in folded)
        return False

    return found


class NameMatcher:
    """Globs and regexes compiled into one fullmatch; literal names use a set lookup."""

    __slots__ = ("_fullmatch", "_literals", "cache", "text")

    def __init__(self, patterns: Sequence[str | RegexPattern]) -> None:
        literals: set[str] = set()
        parts: list[str] = []
        shown: list[str] = []
        for pattern in patterns:
            if isinstance(pattern, RegexPattern):
                parts.append(pattern.regex)
                shown.append(f"regex {pattern.regex!r}")
            else:
                shown.append(repr(pattern))
                if _GLOB_CHARS.isdisjoint(pattern):
                    literals.add(pattern)
                else:
                    parts.append(fnmatch.translate(pattern))
        self._literals = frozenset(literals)
        self._fullmatch = any_regex(parts, "fullmatch") if parts else None
        # value -> result; predicates look here first, inline (the same names repeat)
        self.cache: dict[str, bool] = {}
        self.text = " or ".join(shown)

    def __call__(self, value: str | None) -> bool:
        if value is None:
            return False
        hit = self.cache.get(value)
        if hit is None:
            hit = value in self._literals or (
                self._fullmatch is not None and self._fullmatch(value)
            )
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()  # the same dict: predicates keep their bound `get`
            self.cache[value] = hit
        return hit


Predicate = Callable[[Any, ConnectorMeta | None], bool]


@dataclass(frozen=True, slots=True)
class Condition:
    """One compiled condition: a fast predicate and what explain says about it."""

    name: str
    test: Predicate
    wanted: str
    actual: Callable[[Any, ConnectorMeta | None], str]
    needs_meta: bool = False


def _error(event: Any) -> ErrorInfo | None:
    error: ErrorInfo | None = getattr(event, "error", None)
    return error


def _compile_conditions(conds: Unless) -> tuple[Condition, ...]:
    out: list[Condition] = []
    for name, value in conds.conditions().items():
        out.append(_compile_condition(name, value))
    # Cheap and selective first; the message regex (up to 4 KiB of trace) last.
    cost = {"message": 3, "exception_class": 2, "root_cause_class": 2}
    out.sort(key=lambda c: cost.get(c.name, 1))
    return tuple(out)


def _compile_condition(name: str, value: Any) -> Condition:  # a flat dispatch
    if name == "connect_cluster":
        m = NameMatcher(value)
        return Condition(
            name, lambda e, _m: m(e.connect_cluster), m.text, lambda e, _m: repr(e.connect_cluster)
        )
    if name == "connector":
        m = NameMatcher(value)
        return Condition(
            name, lambda e, _m: m(e.connector), m.text, lambda e, _m: repr(e.connector)
        )
    if name == "connector_class":
        m = NameMatcher(value)
        return Condition(
            name,
            lambda e, meta: meta is not None and m(meta.connector_class),
            m.text,
            lambda e, meta: repr(meta.connector_class) if meta else "unknown (no metadata)",
            needs_meta=True,
        )
    if name == "connector_type":
        wanted: str = value
        return Condition(
            name,
            lambda e, meta: meta is not None and meta.connector_type == wanted,
            repr(wanted),
            lambda e, meta: repr(meta.connector_type) if meta else "unknown (no metadata)",
            needs_meta=True,
        )
    if name == "task_id":
        ids = frozenset(value)
        return Condition(
            name,
            lambda e, _m: getattr(e, "task_id", None) in ids,
            " or ".join(map(str, sorted(ids))),
            lambda e, _m: str(getattr(e, "task_id", None)),
        )
    if name == "state":
        states = frozenset(value)
        return Condition(
            name,
            lambda e, _m: getattr(e, "state", None) in states,
            " or ".join(sorted(states)),
            lambda e, _m: str(getattr(e, "state", None) or "none (tombstone)"),
        )
    if name == "stage":
        stages = frozenset(value)

        def stage_of(e: Any) -> str | None:
            error = _error(e)
            return error.stage if error is not None else None

        return Condition(
            name,
            lambda e, _m: stage_of(e) in stages,
            " or ".join(sorted(stages)),
            lambda e, _m: str(stage_of(e) or _MISSING),
        )
    # The predicates below run only for event kinds that have the attributes they read (the
    # rule's kinds are checked at load and by the index), and look the cache up inline.
    if name == "exception_class":
        m = NameMatcher(value)
        cached = m.cache.get

        def outer_or_root(e: Any, _m: ConnectorMeta | None) -> bool:
            error = e.error
            if error is None:
                return False
            outer, root = error.exception_class, error.root_cause_class
            hit = cached(outer) if outer is not None else False
            if hit is None:
                hit = m(outer)
            if hit:
                return True
            hit = cached(root) if root is not None else False
            return m(root) if hit is None else hit

        def classes(e: Any, _m: ConnectorMeta | None) -> str:
            error = _error(e)
            if error is None:
                return "no error"
            outer = error.exception_class or _MISSING
            return f"{outer} (root cause {error.root_cause_class or _MISSING})"

        return Condition(name, outer_or_root, m.text, classes)
    if name == "root_cause_class":
        m = NameMatcher(value)
        cached = m.cache.get

        def root(e: Any, _m: ConnectorMeta | None) -> bool:
            error = e.error
            if error is None or error.root_cause_class is None:
                return False
            hit = cached(error.root_cause_class)
            return m(error.root_cause_class) if hit is None else hit

        return Condition(
            name,
            root,
            m.text,
            lambda e, _m: str((_error(e) or ErrorInfo()).root_cause_class or _MISSING),
        )
    if name == "message":
        found = any_regex(value, "search")
        memo: dict[tuple[str, ...], bool] = {}
        # plain-text patterns: a message the trace head contains need not be searched again;
        # real regexes (anchors!) search the three texts one by one
        texts_of = _search_texts if _substrings_only(value) else _all_texts

        def message(e: Any, _m: ConnectorMeta | None) -> bool:
            error = e.error
            if error is None:
                return False
            texts = texts_of(error)
            # the same failure repeats (a poison record, an outage): remember the answer
            hit = memo.get(texts)
            if hit is None:
                hit = False
                for text in texts:  # usually one: the trace head
                    if found(text):
                        hit = True
                        break
                if len(memo) >= _MESSAGE_MEMO_LIMIT:
                    memo.clear()
                memo[texts] = hit
            return hit

        return Condition(
            name,
            message,
            " or ".join(f"regex {r!r}" for r in value),
            lambda e, _m: (
                "no error"
                if _error(e) is None
                else "no match in message, root cause message or trace head"
            ),
        )
    if name == "origin_topic":
        m = NameMatcher(value)
        cached = m.cache.get

        def origin(e: Any, _m: ConnectorMeta | None) -> bool:
            record = e.record
            if record is None:
                return False
            hit = cached(record.topic)
            return m(record.topic) if hit is None else hit

        def topic(e: Any, _m: ConnectorMeta | None) -> str:
            record = getattr(e, "record", None)
            return repr(record.topic) if record is not None else _MISSING

        return Condition(name, origin, m.text, topic)
    raise AssertionError(f"unknown condition {name}")  # pragma: no cover


# -- compiled rules and the set -------------------------------------------------------------------


# Conditions that depend only on the connector's names and metadata: RuleSet checks them
# once per (kind, state, cluster, connector, metadata) and remembers the result.
_STATIC = frozenset({"connect_cluster", "connector", "connector_class", "connector_type"})


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
    # A condition or an `unless` reads the connector's class or type: without metadata the
    # rule can tell neither a match nor an exclusion, so the event waits (engine.later).
    needs_meta: bool = False
    name_static: tuple[Predicate, ...] = ()  # `static` less the metadata conditions

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
    conditions = _compile_conditions(rule.match)
    unless = _compile_conditions(rule.match.unless) if rule.match.unless is not None else ()
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
        has_skip=any(a.type == "skip-record" for a in rule.actions),
        actions=actions,
        needs_meta=any(c.needs_meta for c in (*conditions, *unless)),
        name_static=tuple(c.test for c in conditions if c.name in _STATIC and not c.needs_meta),
    )


@dataclass(frozen=True, slots=True)
class CompiledAction:
    """An action's type, its parameters as JSON values, and the restart backoff if any."""

    type: str
    params: dict[str, Any]
    backoff: Backoff | None = None


def _compile_action(action: Action) -> CompiledAction:
    params = action.model_dump(mode="json", exclude={"type"}, by_alias=True)
    if isinstance(action, RestartFailedTasks):
        return CompiledAction(action.type, params, action.backoff)
    if isinstance(action, Rewind) and action.to_timestamp is not None:
        params["to_timestamp_ms"] = rule_timestamp(action.to_timestamp)
    return CompiledAction(action.type, params)


_STATUS_KINDS = (EventKind.CONNECTOR_STATUS, EventKind.TASK_STATUS)
_CANDIDATE_CACHE_LIMIT = 65536
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
        self._candidates: dict[_CandidateKey, tuple[CompiledRule, ...]] = {}
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
        kind = event.kind
        status = kind is EventKind.TASK_STATUS or kind is EventKind.CONNECTOR_STATUS
        state = event.state if status else None
        key: _CandidateKey = (
            kind,
            state,
            event.connect_cluster,
            event.connector,
            None if meta is None else meta.connector_class,
            None if meta is None else meta.connector_type,
        )
        found = self._candidates.get(key)
        if found is None:
            if status:
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
            self._candidates[key] = found
        return found

    def waiting_for_meta(self, event: Any) -> tuple[CompiledRule, ...]:
        """The rules that need metadata and could match `event` once it is known.

        Every condition that does not read the metadata holds (an `unless` on the class or
        type cannot exclude yet). Asked only while the connector's metadata is unknown.
        """
        if not self.meta_rules:
            return ()
        kind = event.kind
        status = kind is EventKind.TASK_STATUS or kind is EventKind.CONNECTOR_STATUS
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
        return [
            r for r in self.candidates(event, meta) if r.dynamic is None or r.dynamic(event, meta)
        ]


# -- explain ------------------------------------------------------------------------------------


def explain(event: Any, rules: RuleSet, meta: ConnectorMeta | None) -> list[str]:
    """One line per rule: whether it matches `event`, and if not, the first reasons why.

    Only matching is explained; counting, staleness and limits are the engine's (see the
    `reason` of a suppressed decision).
    """
    lines: list[str] = []
    kind = str(event.kind)
    for rule in rules.rules:
        if event.kind not in rule.kinds:
            wanted = ", ".join(sorted(str(k) for k in rule.kinds))
            lines.append(f"{rule.name}: no match: kind is {kind}, rule wants {wanted}")
            continue
        failed = [_failure(c, event, meta) for c in rule.conditions if not c.test(event, meta)]
        if failed:
            lines.append(f"{rule.name}: no match: " + "; ".join(failed))
            continue
        if rule.needs_meta and meta is None:  # an `unless` on the class or type
            lines.append(
                f"{rule.name}: no match yet: its unless needs connector metadata (class/type) "
                "and none is known (the daemon decides the event once it is)"
            )
            continue
        if rule.unless_conditions and all(c.test(event, meta) for c in rule.unless_conditions):
            held = ", ".join(c.name for c in rule.unless_conditions)
            verb = "holds" if len(rule.unless_conditions) == 1 else "all hold"
            lines.append(f"{rule.name}: no match: excluded by unless ({held} {verb})")
            continue
        when = rule.rule.when
        note = "" if rule.enabled else " (rule disabled: decisions are suppressed)"
        lines.append(
            f"{rule.name}: matches (counts toward {when.count} within "
            f"{_fmt(when.within)} per {'+'.join(when.key)}){note}"
        )
    return lines


def _failure(condition: Condition, event: Any, meta: ConnectorMeta | None) -> str:
    if condition.needs_meta and meta is None:
        return f"{condition.name} needs connector metadata (class/type) and none is known"
    return f"{condition.name} wants {condition.wanted}, event has {condition.actual(event, meta)}"


def _fmt(ms: int) -> str:
    return format_duration(ms)
