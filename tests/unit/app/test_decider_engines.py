"""FrameDecider decides frames with the compiled engine (`offsetd.engine.compiled`) where it can,
and that changes nothing anyone sees: held equal, on random streams of one connector's frames
(DLQ records, FAILED and RUNNING tasks, the connector STOPPED and RUNNING, replays, a record
Python rejects, an offsets record, the metadata arriving mid-stream), between a decider with the
compiled engine and one with the Python engine only (`daemon.compiled_engine: false`):

- every audit write (planned records and tally updates, awaited or not), in order;
- every metric sample (events, lateness, matches, decisions, audit writes, malformed, waiting);
- the remediator's submissions and the suppressed failures handed to the breaker (id, cluster,
  connector, decided at, record: the first of each, which is what the breaker's answer depends
  on);
- the stored states (JSON text), the metadata reads asked for, the refreshes.

And: the compiled engine decided most frames there (not a vacuous equality); the setting turns
it off, and the log says once which engine decides and why; a frame the compiled path refuses
(a record Python rejects) and events that waited for metadata known now are Python's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from offsetd.app.counters import LaterMetrics
from offsetd.app.decider import FrameDecider
from offsetd.app.wiring import Wiring
from offsetd.engine.cache import StateCache
from offsetd.engine.compiled import installed
from offsetd.events.decode import RawRecord
from offsetd.events.dlq import DLQ_HEADER_PREFIX
from offsetd.events.frames import encode_frame
from offsetd.metrics.instruments import DaemonMetrics
from offsetd.rules import ConnectorMeta, RuleSet
from tests.unit.engine.test_engine_decide import MIN, SEC, SINK, TRACE, rules

CLUSTER, CONNECTOR = "local", "orders-sink"
KEY = f"{CLUSTER}/{CONNECTOR}"
STATUS, OFFSETS, DLQ = "connect-status", "connect-offsets", "dlq"
WINDOW = 10 * MIN

SPECS: list[dict[str, Any]] = [
    {  # the poison-record rule in a storm: fires on every DLQ record, held back by its limits
        "name": "skip",
        "match": {"kind": "dlq_record"},
        "when": {"count": 1, "within": "10m"},
        "limits": {"cooldown": "2m", "budget": {"max": 2, "per": "1h"}},
        "inhibits": {"rules": ["restart"], "for": "15m"},
    },
    {
        "name": "restart",
        "match": {"kind": "task_status", "state": "FAILED"},
        "when": {"count": 1, "within": "10m"},
        "limits": {"cooldown": "1m"},
    },
    {  # needs the connector's metadata: its events wait while it is unknown
        "name": "typed",
        "match": {"kind": "task_status", "state": "FAILED", "connector_type": "sink"},
        "when": {"count": 2, "within": "10m"},
    },
]

pytestmark = pytest.mark.skipif(not installed(), reason="offsetd-native is not installed")


# -- raw records, as Connect writes them ----------------------------------------------------------


def status(offset: int, t: int, key: str, value: dict[str, Any] | None) -> RawRecord:
    data = None if value is None else json.dumps(value).encode()
    return RawRecord(STATUS, 0, offset, t, key.encode(), data)


def task(offset: int, t: int, state: str) -> RawRecord:
    value: dict[str, Any] = {"state": state, "worker_id": "w1:8083", "generation": 3}
    if state == "FAILED":
        value["trace"] = TRACE
    return status(offset, t, f"status-task-{CONNECTOR}-0", value)


def connector(offset: int, t: int, state: str) -> RawRecord:
    return status(offset, t, f"status-connector-{CONNECTOR}", {"state": state, "generation": 3})


def dlq(offset: int, t: int, record_offset: int) -> RawRecord:
    headers = {
        "topic": "orders",
        "partition": "3",
        "offset": str(record_offset),
        "connector.name": CONNECTOR,
        "task.id": "0",
        "stage": "VALUE_CONVERTER",
        "exception.class.name": "org.apache.kafka.connect.errors.DataException",
        "exception.message": "bad record",
    }
    return RawRecord(
        DLQ,
        0,
        offset,
        t,
        None,
        None,
        tuple((DLQ_HEADER_PREFIX + k, v.encode()) for k, v in headers.items()),
    )


def rejected(offset: int, t: int) -> RawRecord:
    """A status record Python rejects (Malformed): the compiled path leaves its frame."""
    return RawRecord(STATUS, 0, offset, t, f"status-task-{CONNECTOR}-0".encode(), b"{")


def progress(offset: int, t: int) -> RawRecord:
    """A source offset: the compiled decoders leave the offsets topic to Python."""
    key = json.dumps([CONNECTOR, {"table": "orders"}]).encode()
    return RawRecord(OFFSETS, 0, offset, t, key, json.dumps({"pos": offset}).encode())


def frame(records: list[RawRecord]) -> bytes:
    return encode_frame(records, dlq_topics=frozenset({DLQ}))


# -- the decider's surroundings, recorded ---------------------------------------------------------


class Audit:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.seen: set[str] = set()

    async def write_many(
        self, records: list[dict[str, Any]], updates: list[dict[str, Any]]
    ) -> list[bool]:
        self.calls.append(("many", json.dumps(records), json.dumps(list(updates))))
        flags = []
        for record in records:
            flags.append(record["id"] not in self.seen)
            self.seen.add(record["id"])
        return flags

    def write_soon(self, updates: list[dict[str, Any]]) -> None:
        self.calls.append(("soon", json.dumps(list(updates))))


class Remediator:
    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.noted: list[list[tuple[Any, ...]]] = []

    def submit(self, decision: Any) -> None:
        self.submitted.append(decision.id)

    def note_suppressed(self, decisions: list[Any]) -> None:
        # What the breaker reads of them (`Remediator.note_suppressed`, `BreakerTrip`): its
        # answer depends on the connector, the decision time and the record alone, and it trips
        # on the first failure that trips, so the first of each is what it is told.
        first: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for d in decisions:
            if d.from_failure:
                key = (d.connect_cluster, d.connector, d.decided_at_ms, d.record_text)
                first.setdefault(key, (d.id, *key))
        self.noted.append(list(first.values()))


class Meta:
    """`ConnectorMetaCache` as the decider asks it: known connectors, misses, refreshes."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str], ConnectorMeta] = {}
        self.missed: set[tuple[str, str]] = set()
        self.refreshed: list[str] = []

    def get(self, cluster: str, name: str) -> ConnectorMeta | None:
        found = self.known.get((cluster, name))
        if found is None:
            self.missed.add((cluster, name))
        return found

    def peek(self, cluster: str, name: str) -> ConnectorMeta | None:
        return self.known.get((cluster, name))

    async def lookup(self, cluster: str, name: str) -> ConnectorMeta | None:
        return self.known.get((cluster, name))

    async def refresh(self, cluster: str) -> None:
        self.refreshed.append(cluster)


class Reads:
    """`MetadataReader`: the reads of metadata asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    def await_meta(self, key: str, cluster: str, name: str) -> None:
        self.asked.append((key, cluster, name))

    def reading(self, _key: str) -> bool:
        return False


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


async def _no_nudge(_key: str, _news: dict[str, object]) -> None:
    raise AssertionError("the decider sends no nudge here")


def new_decider(compiled: bool, ruleset: RuleSet, clock: Clock) -> FrameDecider:
    registry = CollectorRegistry()
    settings_ = SimpleNamespace(
        daemon=SimpleNamespace(suppressed_window=WINDOW, compiled_engine=compiled),
        remediation=SimpleNamespace(scope=None),
    )
    cluster = SimpleNamespace(
        status_topic=STATUS, offsets_topic=OFFSETS, dlq_topics=[DLQ], scope=None
    )
    wiring = Wiring(
        settings=settings_,  # type: ignore[arg-type]
        alias="main",
        kafka=None,  # type: ignore[arg-type]
        connect={CLUSTER: cluster},  # type: ignore[dict-item]
        rules=ruleset,
        audit=Audit(),  # type: ignore[arg-type]
        meta=Meta(),  # type: ignore[arg-type]
        registry=registry,
        metrics=DaemonMetrics.create(registry),
        clock=clock,
        remediator=Remediator(),  # type: ignore[arg-type]
    )
    decider = FrameDecider(
        wiring, StateCache({}), "events", _no_nudge, LaterMetrics.create(registry)
    )
    decider.metadata = Reads()  # type: ignore[assignment]
    return decider


def samples(decider: FrameDecider) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for metric in decider.wiring.registry.collect()
        for sample in metric.samples
        if not sample.name.endswith("_created")
    }


def seen(decider: FrameDecider) -> dict[str, Any]:
    """Everything the decider did that anyone outside it sees."""
    wiring: Any = decider.wiring
    return {
        "audit": wiring.audit.calls,
        "submitted": wiring.remediator.submitted,
        "breaker": wiring.remediator.noted,
        "metrics": samples(decider),
        "states": dict(decider.cache._store),
        "asked": decider.metadata.asked,  # type: ignore[attr-defined]
        "missed": wiring.meta.missed,
        "refreshed": wiring.meta.refreshed,
    }


class Spy:
    """Counts the frames the compiled owner decided and those it handed back."""

    def __init__(self, decider: FrameDecider) -> None:
        assert decider.compiled is not None
        self.decided = self.left = 0
        owner = decider.compiled
        real = owner.decide_frame

        def decide_frame(*args: Any) -> Any:
            outcome = real(*args)
            if outcome is None:
                self.left += 1
            else:
                self.decided += 1
            return outcome

        owner.decide_frame = decide_frame  # type: ignore[method-assign,assignment]


# -- a stream: frames of random records, the metadata arriving on the way -------------------------

RECORD_KINDS = st.sampled_from(
    ["dlq"] * 6 + ["failed"] * 3 + ["running", "stopped", "started", "replay"]
)
STEPS = st.sampled_from([1, 50, 500, 5 * SEC, 40 * SEC, 3 * MIN])
FRAMES = st.lists(
    st.tuples(
        st.lists(st.tuples(RECORD_KINDS, STEPS, st.integers(0, 5)), min_size=1, max_size=12),
        st.sampled_from(["", "", "", "", "", "rejected", "offsets", "meta"]),
        st.sampled_from([0, 100, 2 * SEC, 90 * SEC]),  # how late the frame is decided
    ),
    min_size=1,
    max_size=14,
)


def stream(plan: list[Any]) -> list[tuple[str, Any, int]]:
    """(what, frame bytes or None, now) steps of the plan: "frame" or "meta" (known now)."""
    steps: list[tuple[str, Any, int]] = []
    t, offsets = 0, {STATUS: 0, DLQ: 0, OFFSETS: 0}

    def next_offset(topic: str) -> int:
        offsets[topic] += 1
        return offsets[topic]

    for records_plan, extra, late in plan:
        records: list[RawRecord] = []
        for kind, step, n in records_plan:
            t += step
            if kind == "dlq":
                records.append(dlq(next_offset(DLQ), t, n))
            elif kind == "failed":
                records.append(task(next_offset(STATUS), t, "FAILED"))
            elif kind == "running":
                records.append(task(next_offset(STATUS), t, "RUNNING"))
            elif kind in ("stopped", "started"):
                state = "STOPPED" if kind == "stopped" else "RUNNING"
                records.append(connector(next_offset(STATUS), t, state))
            else:  # a record seen before: skipped by both
                records.append(task(max(offsets[STATUS] - n, 1), t, "FAILED"))
        if extra == "rejected":
            records.insert(len(records) // 2, rejected(next_offset(STATUS), t))
        elif extra == "offsets":
            records.append(progress(next_offset(OFFSETS), t))
        steps.append(("frame", frame(records), t + late))
        if extra == "meta":
            steps.append(("meta", None, t + late + 1))
    return steps


def run(decider: FrameDecider, clock: Clock, steps: list[tuple[str, Any, int]]) -> None:
    async def go() -> None:
        for what, data, now in steps:
            clock.now = now
            if what == "frame":
                await decider.decide_frame(KEY, data)
            else:  # the metadata is known now, and the owner told so (`MetadataReader`)
                decider.wiring.meta.known[(CLUSTER, CONNECTOR)] = SINK  # type: ignore[attr-defined]
                await decider.apply_news(KEY, {"type": "metadata"})

    asyncio.run(go())


RULES = rules(*SPECS)
TOTALS = {"decided": 0, "left": 0}


@given(plan=FRAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_both_engines_give_the_same_audit_metrics_and_actions(plan: list[Any]) -> None:
    steps = stream(plan)
    clocks = Clock(), Clock()
    compiled = new_decider(True, RULES, clocks[0])
    python = new_decider(False, RULES, clocks[1])
    assert python.compiled is None
    spy = Spy(compiled)
    run(compiled, clocks[0], steps)
    run(python, clocks[1], steps)
    assert seen(compiled) == seen(python)
    TOTALS["decided"] += spy.decided
    TOTALS["left"] += spy.left


def test_the_stream_was_decided_mostly_compiled() -> None:
    """Not a vacuous equality: a fixed stream of the same shapes, most frames compiled."""
    plan = [
        ([("dlq", 1, i % 3), ("failed", 50, 0), ("dlq", 500, 1)], extra, 100)
        for i, extra in enumerate(["", "", "rejected", "", "meta", "", "offsets", ""] * 3)
    ]
    clocks = Clock(), Clock()
    compiled = new_decider(True, RULES, clocks[0])
    python = new_decider(False, RULES, clocks[1])
    spy = Spy(compiled)
    run(compiled, clocks[0], stream(plan))
    run(python, clocks[1], stream(plan))
    assert seen(compiled) == seen(python)
    assert spy.decided >= 16, (spy.decided, spy.left)
    assert spy.left >= 3  # the rejected records' and the offsets' frames
    audit: Any = compiled.wiring.audit
    assert any(call[0] == "many" for call in audit.calls)  # planned decisions were written
    assert compiled.wiring.remediator.noted  # type: ignore[union-attr]


def test_the_setting_turns_it_off_and_the_log_says_which_engine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="offsetd"):
        on = new_decider(True, RULES, Clock())
        off = new_decider(False, RULES, Clock())
    assert on.compiled is not None
    assert off.compiled is None
    lines = [r.getMessage() for r in caplog.records if "frames are decided" in r.getMessage()]
    assert lines[0].startswith("frames are decided by the compiled engine")
    assert lines[1] == "frames are decided by the Python engine: daemon.compiled_engine is off"


def test_a_rule_set_it_cannot_decide_is_pythons_with_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = rules(
        {  # RE2 reads \p{Greek}; the compiled matcher does not carry it over
            "name": "greek",
            "match": {"kind": "task_status", "connector": {"regex": "\\p{Greek}+"}},
            "when": {"count": 1, "within": "10m"},
        }
    )
    with caplog.at_level(logging.INFO, logger="offsetd"):
        decider = new_decider(True, refused, Clock())
    assert decider.compiled is None
    [line] = [r.getMessage() for r in caplog.records if "frames are decided" in r.getMessage()]
    assert line.startswith("frames are decided by the Python engine: the compiled path cannot")


def test_a_frame_the_compiled_path_refuses_is_decided_by_python() -> None:
    clock = Clock()
    decider = new_decider(True, RULES, clock)
    spy = Spy(decider)
    clock.now = 10 * SEC
    data = frame([dlq(1, 1 * SEC, 7), rejected(1, 2 * SEC), dlq(2, 3 * SEC, 8)])
    asyncio.run(decider.decide_frame(KEY, data))
    assert (spy.decided, spy.left) == (0, 1)
    value = decider.wiring.registry.get_sample_value
    assert value("offsetd_malformed_records_total", {"topic": STATUS}) == 1  # Python's count
    assert value("offsetd_events_total", {"kind": "dlq_record", "topic": DLQ}) == 2
    assert decider.wiring.remediator.submitted  # type: ignore[union-attr]


def test_events_waiting_for_metadata_known_now_are_decided_by_python() -> None:
    """The frame's firings and the deferred events' are folded and written together (one
    audit write, as `decide_frame` does): the compiled path leaves that frame whole."""
    clock = Clock()
    decider = new_decider(True, RULES, clock)
    python = new_decider(False, RULES, Clock())
    spy = Spy(decider)
    first = frame([task(1, 1 * SEC, "FAILED")])
    second = frame([task(2, 2 * SEC, "FAILED")])
    for one in (decider, python):
        clock_: Any = one.wiring.clock
        clock_.now = 3 * SEC
        asyncio.run(one.decide_frame(KEY, first))  # metadata unknown: "typed" waits
        one.wiring.meta.known[(CLUSTER, CONNECTOR)] = SINK  # type: ignore[attr-defined]
        asyncio.run(one.decide_frame(KEY, second))
    assert (spy.decided, spy.left) == (1, 0)  # the second never reached the compiled owner
    assert decider.metadata.asked == [(KEY, CLUSTER, CONNECTOR)]  # type: ignore[attr-defined]
    assert seen(decider) == seen(python)
    typed = [c for c in decider.wiring.audit.calls if "typed" in c[1]]  # type: ignore[attr-defined]
    assert typed  # decided once the metadata was known
