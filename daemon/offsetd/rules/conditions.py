"""A rule's conditions, compiled: one fast predicate each, and what `explain` says about it.

One builder per condition (`_BUILDERS`, keyed by the field name of `Unless`). The predicates
for error and record fields run only for event kinds that have the attributes they read (the
rule's kinds are checked at load and by the index), and look the matcher's cache up inline:
the same names and classes repeat endlessly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offsetd.events.failures import classify
from offsetd.events.models import ErrorInfo
from offsetd.rules.match import Unless
from offsetd.rules.models import ConnectorMeta
from offsetd.rules.patterns import LastValue, NameMatcher, any_regex, substrings_only

__all__ = ["Condition", "Predicate", "compile_conditions"]

_MESSAGE_MEMO_LIMIT = 256  # its keys hold trace heads (up to 4 KiB each)
_MISSING = "<none>"

Predicate = Callable[[Any, ConnectorMeta | None], bool]


@dataclass(frozen=True, slots=True)
class Condition:
    """One compiled condition: a fast predicate and what explain says about it."""

    name: str
    test: Predicate
    wanted: str
    actual: Callable[[Any, ConnectorMeta | None], str]
    needs_meta: bool = False


def compile_conditions(conds: Unless) -> tuple[Condition, ...]:
    """The conditions `conds` sets, compiled, cheap and selective ones first."""
    out = [_BUILDERS[name](name, value) for name, value in conds.conditions().items()]
    # Cheap and selective first; the message regex (up to 4 KiB of trace) last.
    cost = {"message": 3, "failure": 2, "exception_class": 2, "root_cause_class": 2}
    out.sort(key=lambda c: cost.get(c.name, 1))
    return tuple(out)


def _error(event: Any) -> ErrorInfo | None:
    error: ErrorInfo | None = getattr(event, "error", None)
    return error


# -- names and metadata ---------------------------------------------------------------------------


def _connect_cluster(name: str, value: Any) -> Condition:
    m = NameMatcher(value)
    return Condition(
        name, lambda e, _m: m(e.connect_cluster), m.text, lambda e, _m: repr(e.connect_cluster)
    )


def _connector(name: str, value: Any) -> Condition:
    m = NameMatcher(value)
    return Condition(name, lambda e, _m: m(e.connector), m.text, lambda e, _m: repr(e.connector))


def _connector_class(name: str, value: Any) -> Condition:
    m = NameMatcher(value)
    return Condition(
        name,
        lambda e, meta: meta is not None and m(meta.connector_class),
        m.text,
        lambda e, meta: repr(meta.connector_class) if meta else "unknown (no metadata)",
        needs_meta=True,
    )


def _connector_type(name: str, value: Any) -> Condition:
    wanted: str = value
    return Condition(
        name,
        lambda e, meta: meta is not None and meta.connector_type == wanted,
        repr(wanted),
        lambda e, meta: repr(meta.connector_type) if meta else "unknown (no metadata)",
        needs_meta=True,
    )


# -- event fields ---------------------------------------------------------------------------------


def _task_id(name: str, value: Any) -> Condition:
    ids = frozenset(value)
    return Condition(
        name,
        lambda e, _m: getattr(e, "task_id", None) in ids,
        " or ".join(map(str, sorted(ids))),
        lambda e, _m: str(getattr(e, "task_id", None)),
    )


def _state(name: str, value: Any) -> Condition:
    states = frozenset(value)
    return Condition(
        name,
        lambda e, _m: getattr(e, "state", None) in states,
        " or ".join(sorted(states)),
        lambda e, _m: str(getattr(e, "state", None) or "none (tombstone)"),
    )


def _progress(name: str, value: Any) -> Condition:
    states = frozenset(value)
    return Condition(
        name,
        lambda e, _m: getattr(e, "progress", None) in states,
        " or ".join(sorted(states)),
        lambda e, _m: str(getattr(e, "progress", None)),
    )


def _stage(name: str, value: Any) -> Condition:
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


def _origin_topic(name: str, value: Any) -> Condition:
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


# -- errors ---------------------------------------------------------------------------------------


def _exception_class(name: str, value: Any) -> Condition:
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


def _root_cause_class(name: str, value: Any) -> Condition:
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


def _failure(name: str, value: Any) -> Condition:
    wanted = frozenset(value)

    def failure_of(e: Any, _m: ConnectorMeta | None) -> bool:
        return classify(e.error).failure in wanted

    def actual(e: Any, _m: ConnectorMeta | None) -> str:
        found = classify(_error(e))
        return f"{found.failure} ({found.because})"

    return Condition(name, failure_of, " or ".join(sorted(wanted)), actual)


def _texts(error: ErrorInfo) -> tuple[str, ...]:
    """What `message` searches: the trace head, plus the messages it does not contain."""
    head = error.trace_head
    texts = [head] if head else []
    for text in (error.message, error.root_cause_message):
        if text and text not in head:
            texts.append(text)
    return tuple(texts)


_search_texts: Callable[[ErrorInfo], tuple[str, ...]] = LastValue(_texts)


def _every_text(error: ErrorInfo) -> tuple[str, ...]:
    return tuple(t for t in (error.message, error.root_cause_message, error.trace_head) if t)


_all_texts: Callable[[ErrorInfo], tuple[str, ...]] = LastValue(_every_text)


def _message(name: str, value: Any) -> Condition:
    found = any_regex(value, "search")
    memo: dict[tuple[str, ...], bool] = {}
    # plain-text patterns: a message the trace head contains need not be searched again;
    # real regexes (anchors!) search the three texts one by one
    texts_of = _search_texts if substrings_only(value) else _all_texts

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


_BUILDERS: dict[str, Callable[[str, Any], Condition]] = {
    "connect_cluster": _connect_cluster,
    "connector": _connector,
    "connector_class": _connector_class,
    "connector_type": _connector_type,
    "task_id": _task_id,
    "state": _state,
    "progress": _progress,
    "stage": _stage,
    "failure": _failure,
    "exception_class": _exception_class,
    "root_cause_class": _root_cause_class,
    "message": _message,
    "origin_topic": _origin_topic,
}
