"""The compiled engine decides as the Python engine does (native/src/engine/).

Held equal, event by event, on the same streams: `offsetd.engine.decide.decide_firings` on a
`ConnectorState` and `offsetd_native.Engine.decide` on a `State`, given the rules Python's
`RuleSet.matched(event, meta)` returns (and `waiting_for_meta` while the metadata is unknown).
After every event: the firings (a `Decision`'s JSON byte for byte its `model_dump_json()`, a
`Suppression`'s fields and id) and the state's JSON (`to_json()` == `model_dump_json()`). At the
end of each batch: `fold_suppressed`'s planned decisions (JSON) and the tallies it changed, as
the audit writes them (`json.dumps(tally_record(...))`), and the state after the fold.

The streams are `tests/unit/engine/test_engine_fastpath`'s (every kind, tombstones, replays,
late and out-of-order events, DLQ records with and without a record, metadata coming and going,
more count keys than MAX_KEYS) with its rule set (the live tests' conditions and
`rules/examples/`), and the recorded events of `tests/fixtures/events`. Progress events are
Python's (the compiled engine does not decide them): Python decides and folds them, and the
compiled state is read back from Python's JSON, as the owner hands such a record over. The
state's JSON also round-trips on random states.
"""

from __future__ import annotations

import importlib
import json
import random
from collections.abc import Iterator
from typing import Any

import offsetd_native
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetd.engine import ConnectorState
from offsetd.engine.decision import Decision, Firing, Suppression
from offsetd.engine.tally import fold_suppressed, tally_record
from offsetd.events.dlq import decode_dlq
from offsetd.events.models import EventKind
from offsetd.events.status import decode_status
from offsetd.rules import ConnectorMeta, RuleSet
from offsetd.rules.program import rule_program
from tests.unit.engine.test_engine_fastpath import ruleset, stream
from tests.unit.events.test_events_decode import FIXTURES, fixture
from tests.unit.rules.test_rules_live import METAS

# the module (`offsetd.engine.decide` is also the name of its function in the package)
engine = importlib.import_module("offsetd.engine.decide")
COMPILED_KINDS = frozenset(
    {
        EventKind.CONNECTOR_STATUS,
        EventKind.TASK_STATUS,
        EventKind.TOPIC_STATUS,
        EventKind.DLQ_RECORD,
    }
)


def suppression_fields(firing: Suppression) -> dict[str, Any]:
    """A light suppression as the compiled engine's `Firing.to_json()` writes it."""
    return {
        "id": firing.id,
        "rule": firing.rule,
        "mode": firing.mode,
        "connect_cluster": firing.connect_cluster,
        "connector": firing.connector,
        "task_id": firing.task_id,
        "key": firing.key,
        "action_types": list(firing.action_types),
        "outcome": "suppressed",
        "reason": firing.reason,
        "detail": firing.detail,
        "event_time_ms": firing.event_time_ms,
        "decided_at_ms": firing.decided_at_ms,
        "trigger_source": firing.trigger_source.model_dump(mode="json"),
        "record_text": firing.record_text,
        "from_failure": firing.from_failure,
    }


def assert_same_firing(compiled: offsetd_native.Firing, expected: Firing) -> None:
    assert compiled.id == expected.id
    assert compiled.outcome == expected.outcome
    if isinstance(expected, Decision):
        assert compiled.is_decision
        assert compiled.to_json() == expected.model_dump_json()
    else:
        assert not compiled.is_decision
        assert json.loads(compiled.to_json()) == suppression_fields(expected)


class Pair:
    """One connector's state in both engines, with the firings of the batch so far."""

    def __init__(self) -> None:
        self.python = ConnectorState()
        self.native = offsetd_native.State()
        self.python_batch: list[Firing] = []
        self.native_batch: list[offsetd_native.Firing] = []


class Run:
    """Both engines on one stream; counts what the stream reached (for the coverage test)."""

    def __init__(self, rules: RuleSet, max_keys: int, window_ms: int) -> None:
        self.rules = rules
        self.native = offsetd_native.Engine(rule_program(rules), max_keys)
        self.window_ms = window_ms
        self.pairs: dict[str, Pair] = {}
        self.seen: dict[str, int] = {}

    def count(self, what: str, n: int = 1) -> None:
        self.seen[what] = self.seen.get(what, 0) + n

    def event(self, event: Any, meta: ConnectorMeta | None, now: int) -> None:
        pair = self.pairs.setdefault(event.connector, Pair())
        if event.kind not in COMPILED_KINDS:  # Python's: decided and folded there
            self.fold(pair)
            made = engine.decide_firings(pair.python, event, self.rules, meta, now)
            fold_suppressed(pair.python, made, self.window_ms)
            pair.native = offsetd_native.State.from_json(pair.python.to_json())
            self.count("python's")
            return
        matched = [r.name for r in self.rules.matched(event, meta)]
        waiting = []
        if meta is None and self.rules.meta_rules:
            waiting = [r.name for r in self.rules.waiting_for_meta(event)]
        deferred = len(pair.python.deferred)
        expected = engine.decide_firings(pair.python, event, self.rules, meta, now)
        made = self.native.decide(
            pair.native, event.model_dump_json(), matched, meta is not None, now, waiting
        )
        assert len(made) == len(expected)
        for compiled, firing in zip(made, expected, strict=True):
            assert_same_firing(compiled, firing)
            self.count("decision" if isinstance(firing, Decision) else "suppression")
            self.count(f"outcome {firing.outcome} {firing.reason}")
        assert pair.native.to_json() == pair.python.to_json()
        pair.python_batch += expected
        pair.native_batch += made
        self.count("events")
        self.count("deferred", len(pair.python.deferred) > deferred)
        self.count("held", bool(pair.python.held))

    def fold(self, pair: Pair) -> None:
        planned, tallies = fold_suppressed(pair.python, pair.python_batch, self.window_ms)
        native_planned, native_tallies = self.native.fold(
            pair.native, pair.native_batch, self.window_ms
        )
        assert native_planned == [d.model_dump_json() for d in planned]
        expected = [json.dumps(tally_record(pair.python, t, self.window_ms)) for t in tallies]
        assert native_tallies == expected
        assert pair.native.to_json() == pair.python.to_json()
        self.count("planned", len(planned))
        self.count("tallies", len(tallies))
        pair.python_batch, pair.native_batch = [], []

    def fold_all(self) -> None:
        for pair in self.pairs.values():
            self.fold(pair)


def run_stream(seed: int, count: int, max_keys: int, window_ms: int, batch: int) -> dict[str, int]:
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    run = Run(ruleset(), max_keys, window_ms)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "MAX_KEYS", max_keys)
        for i, (event, meta, now) in enumerate(stream(rng, count)):
            run.event(event, meta, now)
            if (i + 1) % batch == 0:
                run.fold_all()
        run.fold_all()
    for state in run.pairs.values():  # and the states read back
        text = state.python.to_json()
        assert offsetd_native.State.from_json(text).to_json() == text
    return run.seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    count=st.integers(1, 400),
    max_keys=st.sampled_from((4, 128)),
    window_ms=st.sampled_from((60_000, 600_000)),
    batch=st.integers(1, 50),
)
def test_the_compiled_engine_decides_as_python(
    seed: int, count: int, max_keys: int, window_ms: int, batch: int
) -> None:
    run_stream(seed, count, max_keys, window_ms, batch)


def test_the_streams_reach_every_branch() -> None:
    """The streams above fire, suppress for every reason, hold, defer, fold into tallies,
    evict count keys and hand progress events to Python."""
    evictions: list[int] = []
    evict = engine.evict_stalest

    def counted_evict(windows: dict[str, Any], keep: int) -> None:
        evictions.append(len(windows) - keep)
        evict(windows, keep)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "evict_stalest", counted_evict)
        seen = run_stream(3, 3000, 4, 60_000, 17)
    assert seen["events"] > 2500
    assert seen["python's"] > 100
    for reason in ("None", "budget", "cooldown", "disabled", "inhibited"):
        assert any(k.endswith(f" {reason}") for k in seen), reason
    assert seen["planned"] > 50
    assert seen["suppression"] > 300
    assert seen["tallies"] > 300
    assert seen["held"] > 10
    assert seen["deferred"] > 10
    assert sum(n > 0 for n in evictions) > 5


def recorded() -> Iterator[Any]:
    """The recorded status and DLQ events of tests/fixtures/events."""
    for path in sorted(FIXTURES.glob("*.json")):
        if path.stem.startswith("dlq"):
            yield decode_dlq("local", fixture(path.stem), connector="owner")
        elif path.stem.startswith("status"):
            event = decode_status("local", fixture(path.stem))
            if event is not None:
                yield event


@pytest.mark.parametrize("meta", METAS)
def test_recorded_events_decide_as_python(meta: ConnectorMeta | None) -> None:
    """Each recorded event three times over (one connector), at several ages, then replayed."""
    events = list(recorded())
    assert len(events) >= 8
    run = Run(ruleset(), 128, 600_000)
    for round_ in range(3):
        for i, event in enumerate(events):
            shifted = event.model_copy(
                update={
                    "connector": "owner",
                    "source": event.source.model_copy(
                        update={
                            "offset": event.source.offset + 1000 * round_ + i,
                            "timestamp_ms": event.source.timestamp_ms + 10_000 * round_ + i,
                        }
                    ),
                }
            )
            now = shifted.source.timestamp_ms + (0, 90_000, 7_200_000)[i % 3]
            run.event(shifted, meta, now)
            run.event(shifted, meta, now)  # a replay: ignored by both
        run.fold_all()
    assert run.seen["events"] == 2 * 3 * len(events)


# -- the state's JSON -----------------------------------------------------------------------------

TIMES = st.integers(-(2**62), 2**62)
INTS = st.integers(-(2**63), 2**63 - 1)
TEXTS = st.text(max_size=12)
SCALARS = st.none() | st.booleans() | INTS | TEXTS | st.floats(1e-4, 1e14) | st.just(2.0)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)
RECORDS = st.builds(
    lambda t, p, o: f"{t}-{p}@{o}", TEXTS, st.integers(0, 2**31), st.integers(-5, 2**62)
)
STATUS = st.fixed_dictionaries(
    {
        "state": TEXTS,
        "generation": st.none() | INTS,
        "worker_id": st.none() | TEXTS,
        "time_ms": TIMES,
    }
)
MARK = st.fixed_dictionaries(
    {
        "decision_id": TEXTS,
        "event_time_ms": INTS,
        "decided_at_ms": INTS,
        "topic": TEXTS,
        "partition": INTS,
        "offset": INTS,
        "record": st.none() | TEXTS,
    }
)
STATES = st.fixed_dictionaries(
    {
        "connect_cluster": TEXTS,
        "connector": TEXTS,
        "offsets": st.dictionaries(TEXTS, INTS, max_size=3),
        "watermark_ms": st.none() | TIMES,
        "next_sweep_ms": TIMES,
        "connector_status": st.none() | STATUS,
        "tasks": st.dictionaries(INTS, STATUS, max_size=3),
        "rules": st.dictionaries(
            TEXTS,
            st.fixed_dictionaries(
                {
                    "windows": st.dictionaries(
                        TEXTS,
                        st.lists(
                            st.tuples(TIMES, TEXTS, INTS, INTS, st.none() | RECORDS), max_size=3
                        ),
                        max_size=3,
                    ),
                    "executed": st.lists(TIMES, max_size=3),
                    "last_executed_ms": st.none() | TIMES,
                }
            ),
            max_size=2,
        ),
        "restart_backoff": st.none() | st.fixed_dictionaries({"attempts": TIMES, "last_ms": TIMES}),
        "inhibitions": st.dictionaries(
            TEXTS,
            st.fixed_dictionaries(
                {"by": TEXTS, "since_ms": TIMES, "until_ms": TIMES, "stopped": st.booleans()}
            ),
            max_size=2,
        ),
        "held": st.lists(
            st.fixed_dictionaries(
                {
                    "by": TEXTS,
                    "since_ms": TIMES,
                    "decision": st.fixed_dictionaries(
                        {"id": TEXTS, "rule": TEXTS, "event_time_ms": TIMES},
                        optional={"inputs": JSON, "params": JSON},
                    ),
                }
            ),
            max_size=2,
        ),
        "deferred": st.lists(
            st.fixed_dictionaries(
                {
                    "time_ms": TIMES,
                    "deferred_ms": TIMES,
                    "event": st.dictionaries(TEXTS, JSON, max_size=4),
                }
            ),
            max_size=2,
        ),
        "released": st.dictionaries(TEXTS, TIMES, max_size=2),
        "suppressed": st.dictionaries(
            TEXTS,
            st.fixed_dictionaries(
                {
                    "id": TEXTS,
                    "rule": TEXTS,
                    "mode": TEXTS,
                    "reason": TEXTS,
                    "incident": st.none() | TEXTS,
                    "window_start_ms": TIMES,
                    "count": st.integers(0, 2**40),
                    "actions": st.lists(TEXTS, max_size=2),
                    "detail": st.none() | TEXTS,
                    "first": MARK,
                    "last": MARK,
                }
            ),
            max_size=2,
        ),
        "incidents": st.dictionaries(TEXTS, TEXTS, max_size=2),
        "progress": st.dictionaries(TEXTS, TEXTS, max_size=2),
    }
)


@given(data=STATES)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_random_states_round_trip(data: dict[str, Any]) -> None:
    text = ConnectorState.model_validate(data).model_dump_json()
    assert offsetd_native.State.from_json(text).to_json() == text
    assert offsetd_native.State.from_json(ConnectorState().model_dump_json()).to_json() == (
        offsetd_native.State().to_json()
    )


# -- what stays Python's --------------------------------------------------------------------------


def one_event(time_ms: int) -> str:
    return json.dumps(
        {
            "connect_cluster": "c",
            "connector": "orders-sink",
            "source": {"topic": "s", "partition": 0, "offset": 1, "timestamp_ms": time_ms},
            "kind": "task_status",
            "task_id": 0,
            "state": "FAILED",
            "worker_id": None,
            "generation": None,
            "error": None,
        }
    )


@pytest.mark.parametrize("time_ms", [2**62 + 1, -(2**62) - 1])
def test_times_beyond_its_range_are_left_to_python_before_the_state_changes(time_ms: int) -> None:
    native = offsetd_native.Engine(rule_program(ruleset()))
    state = offsetd_native.State()
    with pytest.raises(ValueError, match="left to Python: an event or decision time"):
        native.decide(state, one_event(time_ms), ["r0"], True, 0)
    assert state.to_json() == ConnectorState().model_dump_json()
    with pytest.raises(ValueError, match="left to Python: an event or decision time"):
        native.decide(state, one_event(0), ["r0"], True, 2**62 + 1)
    assert native.decide(state, one_event(0), ["r0"], True, 0) != []  # in range: decided


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("rules", 0, "engine", "within_ms"), 2**53, "beyond what the compiled engine holds"),
        (("rules", 0, "engine", "actions", 0, "params"), {"x": 1e-5}, "as Python writes it"),
        (("rules", 0, "engine", "actions", 0, "params"), {"x": 10**20}, "as Python writes it"),
        (("engine", "meta_rules"), [], "meta_rules is not the rules that need metadata"),
        (("rules", 0, "engine", "key"), ["connector", "offset"], "not a rule program"),
    ],
)
def test_a_program_it_cannot_decide_exactly_is_refused(
    path: tuple[Any, ...], value: Any, why: str
) -> None:
    program = json.loads(rule_program(ruleset()))
    target = program
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=why):
        offsetd_native.Engine(json.dumps(program))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"watermark_ms": 2**62 + 1}, "beyond"),
        (
            {"tasks": {"0": {"state": "X", "generation": 2**64, "worker_id": None, "time_ms": 0}}},
            "not a connector state",
        ),
        (
            {
                "rules": {
                    "r": {
                        "windows": {"k": [[0, "s", 0, 1, "no-record"]]},
                        "executed": [],
                        "last_executed_ms": None,
                    }
                }
            },
            "is not topic-p@o",
        ),
        ({"held": [{"by": "a", "since_ms": 0, "decision": {"rule": "r"}}]}, "without its rule"),
        ({"deferred": [{"time_ms": 0, "deferred_ms": 0, "event": {"x": 1e16}}]}, "as Python"),
    ],
)
def test_a_state_it_cannot_continue_exactly_is_refused(change: dict[str, Any], why: str) -> None:
    data = json.loads(ConnectorState().model_dump_json())
    data.update(change)
    text = ConnectorState.model_validate(data).model_dump_json()
    with pytest.raises(ValueError, match=why):
        offsetd_native.State.from_json(text)
