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


def run_stream(
    seed: int, count: int, max_keys: int, window_ms: int, batch: int
) -> dict[str, int]:
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
