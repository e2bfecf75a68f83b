"""`decide`'s fast path against the plain one it replaced, on random event streams.

The engine looks an event's rules up with one lookup (`RuleSet.matched`), updates a task's
status inline, keeps each rule's count key function on the rule (`CompiledRule.keyer`) and adds
an in-order event to a window without `add_to_window`; its sweep (`prune`) skips what is
already within reach. The reference below is the engine as it was before (candidates then live,
`add_to_window` for every event, keys built from the names, every window pruned): both run the
same streams, with the same rules, and must make the same decisions and states. The streams mix
every kind, tombstones, replays, late and out-of-order events, DLQ records with and without a
record, connectors whose metadata comes, goes and changes, and more count keys than a rule may
keep.
"""

import importlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.engine import ConnectorState
from offsetd.engine.counting import (
    add_to_window,
    evict_stalest,
    new_rule_state,
    prune_times,
    prune_window,
)
from offsetd.engine.decision import Decision, EventSummary, Firing
from offsetd.engine.state import WindowEntry
from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    EventKind,
    ProgressEvent,
    RecordRef,
    SourceRecord,
    TaskStatusEvent,
    TopicStatusEvent,
)
from offsetd.rules import ConnectorMeta, Rule, RuleSet
from offsetd.rules.loading import load_rules
from offsetd.rules.ruleset import CompiledRule, task_id_of
from tests.unit.rules.test_rules_live import METAS, RULES, errors

# the module (`offsetd.engine.decide` is also the name of its function in the package)
engine = importlib.import_module("offsetd.engine.decide")
EXAMPLES = Path(__file__).resolve().parents[3] / "rules" / "examples"
CONNECTORS = ("orders-sink", "orders-source", "billing-sink")
STATES = ("RUNNING", "FAILED", "UNASSIGNED", "PAUSED", "STOPPED", None)
KEYS: tuple[list[str], ...] = (
    ["connector"],
    ["connector", "task_id"],
    ["task_id", "connector"],
    ["connector", "exception_class"],
    ["connector", "root_cause_class"],
)


def ruleset() -> RuleSet:
    """The live tests' conditions with varied windows, counts and keys, then the examples
    (skips keyed by record, inhibitions, restarts with backoff, progress)."""
    made = []
    for i, match in enumerate(RULES):
        key = KEYS[i % len(KEYS)]
        if match["kind"] == "dlq_record":
            key = ["connector", "record"] if i % 2 else key
        made.append(
            Rule.model_validate(
                {
                    "name": f"r{i}",
                    "match": match,
                    "when": {"count": 1 + i % 4, "within": f"{5 + 7 * i}s", "key": key},
                    "actions": [{"type": "notify"}],
                    "limits": {"cooldown": f"{i % 3 * 10}s", "budget": {"max": 1 + i % 3}},
                    "enabled": i % 5 != 4,
                }
            )
        )
    made.append(
        Rule.model_validate(
            {
                "name": "per-record",
                "match": {"kind": "dlq_record"},
                "when": {"count": 3, "within": "1h", "key": ["connector", "record"]},
                "actions": [{"type": "notify"}],
            }
        )
    )
    made += [r.rule for r in load_rules(EXAMPLES)]
    return RuleSet(made)


# -- the reference: the engine's matching and counting as they were ------------------------------


def _old_keyer(names: tuple[str, ...]) -> Callable[[Any, str | None], str]:
    fields: dict[str, Callable[[Any], object]] = {
        "connector": lambda e: e.connector,
        "task_id": task_id_of,
        "exception_class": lambda e: getattr(getattr(e, "error", None), "exception_class", None),
        "root_cause_class": lambda e: getattr(getattr(e, "error", None), "root_cause_class", None),
    }

    def key(event: Any, record: str | None) -> str:
        def text(name: str) -> str:
            value = record if name == "record" else fields[name](event)
            return "" if value is None else str(value)

        return ",".join(f"{name}={text(name)}" for name in names)

    return key


def reference_decide(
    state: ConnectorState,
    event: Any,
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Callable[[str], None],
    light: bool,
) -> list[Firing]:
    source = event.source
    partition_key = f"{source.topic}:{source.partition}"
    seen = state.offsets.get(partition_key)
    if seen is not None and source.offset <= seen:
        return []
    state.offsets[partition_key] = source.offset
    time_ms = source.timestamp_ms
    if state.watermark_ms is None or time_ms > state.watermark_ms:
        state.watermark_ms = time_ms
    if not state.connector:
        state.connect_cluster, state.connector = event.connect_cluster, event.connector
    kind = event.kind
    if kind in (EventKind.TASK_STATUS, EventKind.CONNECTOR_STATUS):
        engine._update_status(state, event, time_ms)
    elif kind is EventKind.PROGRESS and not engine.new_episode(state, event):
        return []
    if time_ms >= state.next_sweep_ms:
        reference_prune(state, rules)
        state.next_sweep_ms = time_ms + engine.SWEEP_EVERY_MS
    matched = rules.live(rules.candidates(event, meta), event, meta)
    decisions = reference_match(state, event, matched, now_ms, on_match, light)
    if kind is EventKind.PROGRESS and decisions:
        engine.note_acted(state, event, decisions)
    if meta is None and rules.meta_rules:
        engine.defer(state, event, rules, now_ms)
    return decisions


def reference_prune(state: ConnectorState, rules: RuleSet) -> None:
    now = state.watermark_ms
    assert now is not None
    for name in list(state.rules):
        rule = rules.by_name.get(name)
        if rule is None:
            del state.rules[name]
            continue
        rule_state = state.rules[name]
        windows = rule_state["windows"]
        for key in list(windows):
            entries = windows[key]
            prune_window(entries, rule.within_ms)
            if not entries or entries[-1][0] < now - rule.within_ms:
                del windows[key]
        prune_times(rule_state["executed"], now - rule.budget_per_ms + 1)
        last = rule_state["last_executed_ms"]
        if last is not None and now - last >= rule.cooldown_ms and not rule_state["executed"]:
            rule_state["last_executed_ms"] = None
        if not windows and not rule_state["executed"] and rule_state["last_executed_ms"] is None:
            del state.rules[name]
    for name in [n for n, i in state.inhibitions.items() if i["until_ms"] < now]:
        del state.inhibitions[name]
    engine._prune_waiting(state, rules, now)
    backoff = state.restart_backoff
    if backoff is not None and now - backoff["last_ms"] > rules.restart_reset_ms:
        state.restart_backoff = None


def reference_match(
    state: ConnectorState,
    event: Any,
    matched: tuple[CompiledRule, ...],
    now_ms: int,
    on_match: Callable[[str], None],
    light: bool,
) -> list[Firing]:
    source = event.source
    time_ms = source.timestamp_ms
    kind = event.kind
    decisions: list[Firing] = []
    record = engine._record_text(event) if kind is EventKind.DLQ_RECORD else None
    trigger: list[EventSummary] = []
    for rule in matched:
        if now_ms - time_ms > rule.within_ms:
            continue
        on_match(rule.name)
        if record is None and rule.keys_record:
            continue
        rule_state = state.rules.get(rule.name)
        if rule_state is None:
            rule_state = state.rules[rule.name] = new_rule_state()
        key = _old_keyer(rule.key)(event, record)
        windows = rule_state["windows"]
        entries = windows.get(key)
        if entries is None:
            if len(windows) >= engine.MAX_KEYS:  # room before the new key (it ranks stalest)
                evict_stalest(windows, engine.MAX_KEYS // 2)
            entries = windows[key] = []
        entry = (time_ms, source.topic, source.partition, source.offset, record)
        if not add_to_window(entries, entry, rule.within_ms) or len(entries) < rule.count:
            continue
        counted = list(entries)
        del windows[key]
        decisions.append(
            engine._fire(state, rule, rule_state, event, key, counted, now_ms, trigger, light)
        )
    return decisions


# -- random streams -------------------------------------------------------------------------------


def stream(rng: random.Random, count: int) -> Iterator[tuple[Any, ConnectorMeta | None, int]]:
    """(event, the connector's metadata now, now) for `count` events."""
    pool = errors(rng)
    metas = {c: rng.choice(METAS) for c in CONNECTORS}
    clock = 1_000_000
    offsets: dict[str, int] = {}
    for _ in range(count):
        clock += rng.choice((0, 1, 200, 900, 3_000, 20_000))
        time_ms = clock - (rng.choice((5_000, 40_000, 400_000)) if rng.random() < 0.15 else 0)
        connector = rng.choice(CONNECTORS)
        if rng.random() < 0.05:  # the metadata comes, goes or changes
            metas[connector] = rng.choice(METAS)
        topic = rng.choice(("status", "dlq-a", "dlq-b"))
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        if rng.random() < 0.05:
            offset = max(0, offset - rng.randrange(1, 4))  # a replay
        source = SourceRecord(topic=topic, partition=0, offset=offset, timestamp_ms=time_ms)
        common: dict[str, Any] = {"connect_cluster": "c", "connector": connector, "source": source}
        error = rng.choice(pool)
        roll = rng.random()
        if roll < 0.45:
            state = rng.choice(STATES)
            event: Any = TaskStatusEvent(
                **common,
                task_id=rng.randrange(3),
                state=state,
                worker_id=rng.choice(("w1", None)),
                generation=rng.choice((1, 2, None)),
                error=error if state == "FAILED" else None,
            )
        elif roll < 0.6:
            state = rng.choice(STATES)
            event = ConnectorStatusEvent(
                **common, state=state, error=error if state == "FAILED" else None
            )
        elif roll < 0.65:
            event = TopicStatusEvent(**common, topic=rng.choice(("orders", "audit")))
        elif roll < 0.72:
            event = ProgressEvent(
                **common,
                task_id=rng.choice((0, 1, None)),
                progress=rng.choice(("ok", "stalled", "unassigned", "lagging")),
                since_ms=time_ms - 1_000,
                held_ms=rng.choice((0, 60_000)),
                grace_ms=rng.choice((0, 30_000)),
            )
        else:
            origin = rng.choice(("orders", "orders-eu", "billing-7", "payments"))
            record = None
            if rng.random() < 0.9:
                record = RecordRef(topic=origin, partition=1, offset=rng.randrange(40))
            event = DlqRecordEvent(
                **common, task_id=rng.choice((0, 1, None)), record=record, error=error
            )
        now = time_ms + (rng.choice((60_000, 700_000, 5_000_000)) if rng.random() < 0.1 else 0)
        yield event, metas[connector], now


def dump(firing: Firing) -> Any:
    if isinstance(firing, Decision):
        return firing.model_dump(mode="json")
    return (firing.id, firing.rule, firing.reason, firing.detail, firing.key, firing.record_text)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), count=st.integers(1, 300), max_keys=st.sampled_from((4, 128)))
def test_the_fast_path_decides_as_the_plain_one(seed: int, count: int, max_keys: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "MAX_KEYS", max_keys)
        for light in (False, True):
            rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
            rules = ruleset()
            fast: dict[str, ConnectorState] = {}
            slow: dict[str, ConnectorState] = {}
            fast_matches: list[str] = []
            slow_matches: list[str] = []
            for event, meta, now in stream(rng, count):
                state = fast.setdefault(event.connector, ConnectorState())
                expected_state = slow.setdefault(event.connector, ConnectorState())
                if light:
                    made = engine.decide_firings(
                        state, event, rules, meta, now, fast_matches.append
                    )
                else:
                    made = list(
                        engine.decide(state, event, rules, meta, now, fast_matches.append)[1]
                    )
                expected = reference_decide(
                    expected_state, event, rules, meta, now, slow_matches.append, light
                )
                assert [dump(f) for f in made] == [dump(f) for f in expected]
                assert state.to_json() == expected_state.to_json()
            assert fast_matches == slow_matches


def test_the_streams_reach_every_branch() -> None:
    """The random streams above fire, evict count keys, and bring late and replayed events."""
    rng = random.Random(3)  # noqa: S311 (a reproducible mix, not a secret)
    rules = ruleset()
    states: dict[str, ConnectorState] = {}
    fired = late = 0
    dropped: list[int] = []  # keys each eviction dropped

    def evict(windows: dict[str, list[WindowEntry]], keep: int) -> None:
        dropped.append(len(windows) - keep)
        evict_stalest(windows, keep)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "MAX_KEYS", 4)
        patch.setattr(engine, "evict_stalest", evict)
        for event, meta, now in stream(rng, 3000):
            state = states.setdefault(event.connector, ConnectorState())
            late += (
                state.watermark_ms is not None and event.source.timestamp_ms < state.watermark_ms
            )
            fired += len(engine.decide_firings(state, event, rules, meta, now))
    assert fired > 50
    assert sum(n > 0 for n in dropped) > 5
    assert late > 50
