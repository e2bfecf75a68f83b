"""The compiled owner decides a frame as the daemon's Python path does (native/src/owner/).

Held equal, frame after frame, on the same frames and the same starting states:

- `offsetd_native.Owner.decide_frame` on a compiled `State` that a `StateCache` holds
  (`get_compiled`), falling back to Python when it returns None — as the daemon does;
- the path `offsetd.app.decider.FrameDecider.decide_frame` runs today, on a `ConnectorState` of
  another `StateCache`: `decode_frame`, `decide_batch(..., light=True)` with "now" constant for
  the frame (the daemon's clock) or each event's own time (`now_ms=None`, the bench's replay),
  then `fold_suppressed` and `json.dumps(tally_record(...))` for each tally it changed.

After every frame: the planned decisions (`Decision.model_dump_json()` texts), the tallies'
audit records (text), `applied`, the counts the metrics are given (`decisions` per rule, mode,
outcome and reason; `matches` per rule == what `on_match` is told; `events` per kind and topic
== what `on_event` sees; `times` of the events that are not DLQ records; `failures` == the
distinct (decided at, record) of the suppressed firings `from_failure`, what the breaker is
handed), and the two stores' state texts. A frame the compiled owner returns None for leaves its
state byte for byte as it was; the Python path then decides it, and the next frame goes compiled
again from the Python's state text (`StateCache` switching engines). A frame of records the
compiled owner holds wholly (built from valid events, within its ranges) must be decided
compiled, so the equality cannot hold by handing everything back.

The frames: `tests/unit/engine/test_engine_fastpath`'s streams (every status and DLQ kind,
tombstones, replays, late and out-of-order events, metadata coming, going and changing, more
count keys than MAX_KEYS) written back into Connect's records, several connectors' owners per
batch as the ingest frames them (`encode_frame`), with offsets-topic records, malformed records,
records of a topic nobody reads, and the events tests' random `status_records` and
`dlq_records`; frames the Python side decides although the compiled one could (a connector
switching engines); the bench's records (`bench.bench_daemon.generate` on the fixtures'
templates) with its 52 rules (`write_rules`); and data that is not a frame at all.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import offsetd_native
import pytest
from bench import bench_daemon
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.engine.decision import audit_json, rule_spec
from offsetd.engine.state import ConnectorState
from offsetd.engine.tally import fold_suppressed, tally_record
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.frames import decode_frame, encode_frame, route_status_or_dlq
from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    EventKind,
    ProgressEvent,
    TaskStatusEvent,
    TopicStatusEvent,
    owner_key,
)
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status
from offsetd.rules import ConnectorMeta, RuleSet
from offsetd.rules.program import rule_program
from tests.unit.engine.test_engine_fastpath import ruleset, stream
from tests.unit.events.test_events_construct import dlq_records, status_records

# the module (`offsetd.engine.decide` is also the name of its function in the package)
engine = importlib.import_module("offsetd.engine.decide")

CLUSTER = "c"  # the fast path's streams' Connect cluster
# topic -> (Connect cluster, kind), as `Wiring.source_topics` gives them; "nobody" is read by
# no one (Python: Malformed, "not a topic this process reads"; compiled: left to Python).
TOPICS: dict[str, tuple[str, str]] = {
    "status": (CLUSTER, "status"),
    "dlq-a": (CLUSTER, "dlq"),
    "dlq-b": (CLUSTER, "dlq"),
    "offsets": (CLUSTER, "offsets"),
    "other-status": ("d", "status"),
    bench_daemon.TOPIC: (bench_daemon.CLUSTER, "shape"),
}
DLQ_TOPICS = frozenset({"dlq-a", "dlq-b"})
PLANNED = "planned"


def decode_by_shape(cluster: str, raw: RawRecord) -> Any:
    """The bench's copy topic: `bench_daemon.is_status` tells the decoder."""
    if bench_daemon.is_status(raw):
        return decode_status(cluster, raw)
    return decode_dlq(cluster, raw)


DECODERS: dict[str, Callable[[str, RawRecord], Any]] = {
    "status": decode_status,
    "dlq": decode_dlq,
    "offsets": decode_offsets,
    "shape": decode_by_shape,
}


def python_decoder(raw: RawRecord) -> Any:
    """`FrameDecider.decoder`: the topic's decoder, Malformed for a topic nobody reads."""
    found = TOPICS.get(raw.topic)
    if found is None:
        raise Malformed("not a topic this process reads", raw.topic, raw.partition, raw.offset)
    cluster, kind = found
    return DECODERS[kind](cluster, raw)


# -- the Python path, and what the compiled owner hands back ------------------------------------


@dataclasses.dataclass
class Decided:
    """One frame's outcome, in `offsetd_native.FrameOutcome`'s terms."""

    applied: int
    planned: list[str]
    tallies: list[str]
    decisions: list[tuple[str, str, str, str | None, int]]
    matches: list[tuple[str, int]]
    events: list[tuple[str, str, int]]
    times: list[tuple[str, int]]
    failures: list[tuple[str, int, str | None]]
    audit: list[tuple[str, str]]  # the planned decisions' audit records: (id, text)
    tally_audit: list[tuple[str, str]]  # the tallies': (id, text)
    skipped: int = 0  # records Python skipped (malformed, or failed otherwise)

    @classmethod
    def of(cls, outcome: offsetd_native.FrameOutcome) -> Decided:
        return cls(
            outcome.applied,
            list(outcome.planned),
            list(outcome.tallies),
            list(outcome.decisions),
            list(outcome.matches),
            list(outcome.events),
            list(outcome.times),
            list(outcome.failures),
            list(outcome.audit),
            list(outcome.tally_audit),
        )


def python_frame(
    state: ConnectorState,
    frame: bytes,
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int | None,
    window_ms: int,
) -> Decided:
    """What `FrameDecider.decide_frame` does with a frame (and tells its metrics), without
    the audit's I/O: the frame decided on `state` in place."""
    matched: Counter[str] = Counter()
    events: dict[tuple[str, str], int] = {}
    times: list[tuple[str, int]] = []
    skipped: list[RawRecord] = []

    def on_event(event: Any) -> None:  # EventCounters.event
        key = (str(event.kind), event.source.topic)
        events[key] = events.get(key, 0) + 1
        if event.kind is not EventKind.DLQ_RECORD:
            times.append((str(event.kind), event.source.timestamp_ms))

    applied, firings = decide_batch(
        state,
        decode_frame(frame),
        python_decoder,
        rules,
        lambda _event: meta,
        (lambda event: event.source.timestamp_ms) if now_ms is None else (lambda _event: now_ms),
        on_match=lambda rule: matched.update((rule,)),
        on_event=on_event,
        on_malformed=lambda raw, _bad: skipped.append(raw),
        on_error=lambda raw, _exc: skipped.append(raw),  # the daemon's `failed`: skipped
        light=True,
    )
    decisions: dict[tuple[str, str, str, str | None], int] = {}
    failures: dict[tuple[int, str | None], str] = {}
    for firing in firings:  # decide_all's Counter; note_suppressed's failures
        labels = (firing.rule, firing.mode, firing.outcome, firing.reason)
        decisions[labels] = decisions.get(labels, 0) + 1
        if firing.outcome != PLANNED and firing.from_failure:
            # the breaker trips on the first firing that trips, by (decided at, record)
            failures.setdefault((firing.decided_at_ms, firing.record_text), firing.id)
    planned, tallies = fold_suppressed(state, firings, window_ms)
    tally_records = [tally_record(state, tally, window_ms) for tally in tallies]
    order = {rule.name: i for i, rule in enumerate(rules.rules)}
    return Decided(
        applied,
        [decision.model_dump_json() for decision in planned],
        [json.dumps(record) for record in tally_records],
        [(*labels, count) for labels, count in decisions.items()],
        sorted(matched.items(), key=lambda item: order[item[0]]),  # compared in load order
        [(*key, count) for key, count in events.items()],
        times,
        [(found, *key) for key, found in failures.items()],
        [(d.id, audit_json(d.audit_record(rules)).decode()) for d in planned],
        [(str(record["id"]), audit_json(record).decode()) for record in tally_records],
        len(skipped),
    )


class Owners:
    """Two stores of connector states fed the same frames: `reference`'s decided by the Python
    path only, `mixed`'s by the compiled owner where it can (else the Python path, as the
    daemon does). Counts what the frames reached, for the coverage tests."""

    def __init__(self, rules: RuleSet, window_ms: int, max_keys: int) -> None:
        self.rules = rules
        self.window_ms = window_ms
        specs = {rule.name: rule_spec(rule).text for rule in rules}
        self.owner = offsetd_native.Owner(
            rule_program(rules), TOPICS, window_ms, max_keys, rule_specs=specs
        )
        self.reference_store: dict[str, str] = {}
        self.mixed_store: dict[str, str] = {}
        self.reference = StateCache(self.reference_store)
        self.mixed = StateCache(self.mixed_store)
        self.seen: Counter[str] = Counter()

    def frame(
        self,
        key: str,
        frame: bytes,
        meta: ConnectorMeta | None,
        now_ms: int | None,
        *,
        whole: bool = False,
        python: bool = False,
    ) -> Decided | None:
        """Decide `frame` of owner `key` on both sides and hold them equal. `whole`: every
        record is one the compiled owner holds (it must decide the frame); `python`: the
        mixed side hands this frame to Python although the compiled owner could decide it.
        Returns the compiled outcome (None: the frame was Python's)."""
        state = self.reference.get(key)
        expected = python_frame(state, frame, self.rules, meta, now_ms, self.window_ms)
        if expected.applied:
            self.reference.put(key, state)
        compiled = None if python else self.mixed.get_compiled(key)
        outcome = None
        if compiled is not None:
            before = compiled.to_json()
            known = None if meta is None else (meta.connector_class, meta.connector_type)
            made = self.owner.decide_frame(compiled, frame, known, now_ms)
            if made is None:
                assert compiled.to_json() == before  # untouched, byte for byte
            else:
                outcome = Decided.of(made)
        assert outcome is not None or not whole or python, "a frame it holds was left to Python"
        if outcome is None:  # the Python engine decides it, from the stored text
            fallback = self.mixed.get(key)
            assert fallback.to_json() == (self.mixed_store.get(key) or ConnectorState().to_json())
            again = python_frame(fallback, frame, self.rules, meta, now_ms, self.window_ms)
            assert again == expected
            if again.applied:
                self.mixed.put(key, fallback)
            self.seen["python frames"] += 1
        else:
            assert expected.skipped == 0  # nothing Python skipped was decided compiled
            expected.skipped = 0
            assert outcome.planned == expected.planned
            assert outcome.tallies == expected.tallies
            assert outcome == expected
            if outcome.applied:
                self.mixed.put(key, compiled)
            self.seen["compiled frames"] += 1
            self.seen["replays"] += len(decode_frame(frame)) - outcome.applied
            self.seen["deferring"] += bool(state.deferred)
            self.seen["holding"] += bool(state.held)
            self.count(outcome)
        assert self.mixed_store.get(key) == self.reference_store.get(key)
        return outcome

    def count(self, outcome: Decided) -> None:
        self.seen["events"] += outcome.applied
        self.seen["planned"] += len(outcome.planned)
        self.seen["tallies"] += len(outcome.tallies)
        self.seen["failures"] += len(outcome.failures)
        for _rule, _mode, result, reason, n in outcome.decisions:
            self.seen[f"{result} {reason}"] += n


# -- the fast path's streams as Connect's records -------------------------------------------------


def status_value(event: TaskStatusEvent | ConnectorStatusEvent) -> bytes | None:
    if event.state is None:
        return None  # a tombstone
    value: dict[str, Any] = {"state": event.state, "trace": None, "generation": 0}
    if event.error is not None:
        value["trace"] = event.error.trace_head
    if isinstance(event, TaskStatusEvent):
        value["worker_id"] = event.worker_id
        value["generation"] = event.generation or 0  # Connect always writes one
    return json.dumps(value, separators=(",", ":")).encode()


def dlq_headers(event: DlqRecordEvent) -> tuple[tuple[str, bytes | None], ...]:
    error = event.error
    context: dict[str, str | None] = {"connector.name": event.connector}
    if event.record is not None:
        context |= {
            "topic": event.record.topic,
            "partition": str(event.record.partition),
            "offset": str(event.record.offset),
        }
    if event.task_id is not None:
        context["task.id"] = str(event.task_id)
    if error is not None:
        context |= {
            "stage": error.stage,
            "exception.class.name": error.exception_class,
            "exception.message": error.message,
            "exception.stacktrace": error.trace_head,
        }
    return tuple(
        (DLQ_HEADER_PREFIX + name, None if value is None else value.encode())
        for name, value in context.items()
    )


def record_of(event: Any, rng: random.Random) -> RawRecord:
    """A Connect record that decodes to (about) `event`: the same coordinates, connector, kind,
    state and error; a progress event becomes an offsets-topic record (Python's to decide)."""
    source = event.source
    coordinates = (source.partition, source.offset, source.timestamp_ms)
    connector = event.connector
    if isinstance(event, TaskStatusEvent):
        key = f"status-task-{connector}-{event.task_id}".encode()
        return RawRecord("status", *coordinates, key, status_value(event))
    if isinstance(event, ConnectorStatusEvent):
        key = f"status-connector-{connector}".encode()
        return RawRecord("status", *coordinates, key, status_value(event))
    if isinstance(event, TopicStatusEvent):
        key = f"status-topic-{event.topic}:connector-{connector}".encode()
        inner = {"name": event.topic, "connector": connector, "task": rng.randrange(3)}
        topic_value = json.dumps({"topic": inner | {"discoverTimestamp": source.timestamp_ms}})
        tombstone = rng.random() < 0.1
        return RawRecord("status", *coordinates, key, None if tombstone else topic_value.encode())
    if isinstance(event, DlqRecordEvent):
        topic = source.topic if source.topic in DLQ_TOPICS else "dlq-a"  # the stream's mix
        return RawRecord(topic, *coordinates, b"k", b"v", dlq_headers(event))
    assert isinstance(event, ProgressEvent)
    key = json.dumps([connector, {"table": "t"}]).encode()
    value = json.dumps({"position": source.offset}).encode()
    return RawRecord("offsets", source.partition, source.offset, source.timestamp_ms, key, value)


def renumbered(
    raw: RawRecord, source: Any, seen: dict[str, int], taken: dict[str, int]
) -> RawRecord:
    """`raw` with the next offset of its own topic (the stream numbers its topics otherwise
    than `record_of` places its records), a replay of the stream kept a replay."""
    high = seen.get(source.topic, -1)
    following = taken.get(raw.topic, 0)
    if source.offset <= high:  # a replay: as far back in the record's topic
        return dataclasses.replace(raw, offset=max(0, following - 1 - (high - source.offset)))
    seen[source.topic] = source.offset
    taken[raw.topic] = following + 1
    return dataclasses.replace(raw, offset=following)


@dataclasses.dataclass
class Frame:
    key: str
    data: bytes
    meta: ConnectorMeta | None
    now_ms: int | None
    whole: bool  # every record is one the compiled owner holds


def malformed_record(rng: random.Random, connector: str, offset: int) -> RawRecord:
    """A record Python skips as malformed (and the compiled owner leaves to it)."""
    key = f"status-task-{connector}-0".encode()
    value = rng.choice([b"{not json", b'{"state":"FAILED","generation":"x"}', b"[]"])
    return RawRecord("status", 3, offset, 1_000_000 + offset, key, value)


def frames_of_stream(
    rng: random.Random,
    count: int,
    batch: int,
    constant_now: bool,
    strangers: list[RawRecord],
) -> Iterator[Frame]:
    """The fast path's stream, `batch` events at a time, framed per owner as the ingest frames
    a batch (in order of first record), with now the batch's clock or each event's own time.
    Some batches bring an offsets record, a malformed record, a record of a topic nobody reads,
    or some of `strangers` (random records) in a frame of their own."""
    events = list(stream(rng, count))
    extra = 0
    seen: dict[str, int] = {}  # the stream's topic -> its highest offset so far
    taken: dict[str, int] = {}  # the records' topic -> its next offset
    for start in range(0, len(events), batch):
        chunk = events[start : start + batch]
        frames: dict[str, list[RawRecord]] = {}
        metas: dict[str, ConnectorMeta | None] = {}
        broken: set[str] = set()
        for event, meta, _now in chunk:
            if isinstance(event, ProgressEvent) and rng.random() < 0.8:
                continue  # progress comes as a nudge; some become offsets records here
            raw = renumbered(record_of(event, rng), event.source, seen, taken)
            frames.setdefault(event.connector, []).append(raw)
            metas[event.connector] = meta
            if raw.topic == "offsets":
                broken.add(event.connector)
        if frames and rng.random() < 0.15:
            connector = rng.choice(list(frames))
            extra += 1
            odd, leaves = rng.choice(
                [
                    (malformed_record(rng, connector, extra), True),
                    (RawRecord("nobody", 0, extra, 1_000_000, b"k", b"v"), True),
                    (frames[connector][0], False),  # the same record twice: one is a replay
                ]
            )
            frames[connector].insert(rng.randrange(len(frames[connector]) + 1), odd)
            if leaves:
                broken.add(connector)
        now = None if not constant_now else chunk[-1][2] - rng.choice((0, 0, 0, 30_000))
        for connector, records in frames.items():
            key = owner_key(CLUSTER, connector)
            data = encode_frame(records, dlq_topics=DLQ_TOPICS)
            yield Frame(key, data, metas[connector], now, connector not in broken)
        if strangers and rng.random() < 0.3:
            some = [strangers.pop() for _ in range(min(len(strangers), rng.randint(1, 4)))]
            moved = [
                dataclasses.replace(
                    raw,
                    topic=rng.choice(("status", "other-status"))
                    if raw.key and raw.key.startswith(b"status-")
                    else rng.choice(sorted(DLQ_TOPICS)),
                    partition=7,
                )
                for raw in some
            ]
            data = encode_frame(moved, dlq_topics=DLQ_TOPICS)
            yield Frame(owner_key(CLUSTER, "strangers"), data, None, now, False)


@cache
def bench_rules() -> RuleSet:
    """The bench's 52 rules (the examples and the 45 generated ones), loaded for real."""
    with tempfile.TemporaryDirectory() as folder:
        return bench_daemon.write_rules(Path(folder))


RULE_SETS: dict[str, Callable[[], RuleSet]] = {"fastpath": ruleset, "bench": bench_rules}


def run_stream(
    rules: str,
    seed: int,
    count: int,
    batch: int,
    max_keys: int,
    window_ms: int,
    constant_now: bool,
    strangers: list[RawRecord],
) -> Owners:
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    owners = Owners(RULE_SETS[rules](), window_ms, max_keys)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "MAX_KEYS", max_keys)
        for frame in frames_of_stream(rng, count, batch, constant_now, strangers):
            python = frame.whole and rng.random() < 0.1  # a connector switching engines
            made = owners.frame(
                frame.key, frame.data, frame.meta, frame.now_ms, whole=frame.whole, python=python
            )
            owners.seen["whole frames left to Python"] += python
            owners.seen["frames left by the owner"] += made is None and not python
    return owners


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.sampled_from(sorted(RULE_SETS)),
    seed=st.integers(0, 10**6),
    count=st.integers(1, 500),
    batch=st.integers(1, 40),
    max_keys=st.sampled_from((4, 128)),
    window_ms=st.sampled_from((60_000, 600_000)),
    constant_now=st.booleans(),
    strangers=st.lists(status_records() | dlq_records(), max_size=8),
)
def test_the_compiled_owner_decides_frames_as_python(
    rules: str,
    seed: int,
    count: int,
    batch: int,
    max_keys: int,
    window_ms: int,
    constant_now: bool,
    strangers: list[RawRecord],
) -> None:
    run_stream(rules, seed, count, batch, max_keys, window_ms, constant_now, strangers)


def test_the_streams_reach_every_branch() -> None:
    """The frames above are decided compiled and by Python, fire, suppress for every reason,
    fold into tallies, hand failures to the breaker and switch engines."""
    seen = run_stream("fastpath", 5, 3000, 25, 4, 60_000, True, [])
    seen_now = run_stream("fastpath", 6, 1500, 9, 128, 600_000, False, [])
    seen.seen.update(seen_now.seen)
    got = seen.seen
    assert got["compiled frames"] > 500
    assert got["python frames"] > 100
    assert got["frames left by the owner"] > 50
    assert got["whole frames left to Python"] > 20
    assert got["events"] > 2500
    assert got["planned"] > 50
    assert got["tallies"] > 300
    assert got["failures"] > 100
    assert got["replays"] > 50
    assert got["deferring"] > 50
    assert got["holding"] > 0
    for reason in ("budget", "cooldown", "disabled", "inhibited"):
        assert got[f"suppressed {reason}"] > 0, reason


# -- frames that are the Python engine's -------------------------------------------------------


def one_task(connector: str, offset: int) -> RawRecord:
    """A FAILED status of task 0 of `connector` at `offset` (its time follows the offset)."""
    trace = "org.apache.kafka.connect.errors.ConnectException: timed out\n\tat a.B(B.java:1)"
    value = json.dumps({"state": "FAILED", "trace": trace, "worker_id": "w", "generation": 1})
    key = f"status-task-{connector}-0".encode()
    return RawRecord("status", 0, offset, 1_000_000 + 1_000 * offset, key, value.encode())


def offsets_record(connector: str, offset: int) -> RawRecord:
    key = json.dumps([connector, {"table": "t"}]).encode()
    return RawRecord("offsets", 0, offset, 1_000_000 + 1_000 * offset, key, b'{"position":1}')


@pytest.mark.parametrize("now_ms", [None, 1_500_000])
def test_a_frame_with_a_record_it_leaves_is_python_then_the_next_is_compiled(
    now_ms: int | None,
) -> None:
    owners = Owners(ruleset(), 600_000, 128)
    key = owner_key(CLUSTER, "orders-sink")
    first = encode_frame([one_task("orders-sink", 1), one_task("orders-sink", 2)])
    assert owners.frame(key, first, None, now_ms, whole=True) is not None
    for odd in (
        offsets_record("orders-sink", 3),
        malformed_record(random.Random(1), "orders-sink", 4),  # noqa: S311 (not a secret)
        dataclasses.replace(one_task("orders-sink", 5), topic="nobody"),
        dataclasses.replace(one_task("orders-sink", 6), timestamp_ms=2**62 + 1),
    ):
        frame = encode_frame([one_task("orders-sink", odd.offset + 10), odd])
        assert owners.frame(key, frame, None, now_ms) is None  # untouched, then Python's
        after = encode_frame([one_task("orders-sink", odd.offset + 20)])
        assert owners.frame(key, after, None, now_ms, whole=True) is not None
    last = one_task("orders-sink", 26)  # the partition's high-water offset: a replay too
    replay = encode_frame([one_task("orders-sink", 1), last])
    outcome = owners.frame(key, replay, None, now_ms, whole=True)
    assert outcome is not None
    assert outcome.applied == 0
    assert outcome.events == []


SINK = ConnectorMeta("io.confluent.connect.jdbc.JdbcSinkConnector", "sink")
POISON = "org.apache.kafka.connect.errors.DataException: bad value\n\tat a.B(B.java:1)"


def poison_dlq(offset: int) -> RawRecord:
    """A DLQ record of orders-sink for the record orders-1@5 (the same poison record)."""
    context = {
        "topic": "orders",
        "partition": "1",
        "offset": "5",
        "connector.name": "orders-sink",
        "task.id": "0",
        "stage": "VALUE_CONVERTER",
        "exception.class.name": "org.apache.kafka.connect.errors.DataException",
        "exception.message": "bad value",
        "exception.stacktrace": POISON,
    }
    headers = tuple((DLQ_HEADER_PREFIX + k, v.encode()) for k, v in context.items())
    return RawRecord("dlq-a", 0, offset, 1_000_000 + 1_000 * offset, b"k", b"v", headers)


@pytest.mark.parametrize("now_ms", [None, 1_100_000])
def test_an_inhibited_restart_of_a_failure_is_handed_to_the_breaker(now_ms: int | None) -> None:
    """poison-record-skip plans a skip (three DLQ records of one record) and inhibits
    poison-record-restart: the FAILED status that follows fires the restart as an `inhibited`
    Decision (not a light Suppression). It is suppressed and from a failure, so `decide_all`
    hands it to `note_suppressed` (the breaker): `failures` names it."""
    owners = Owners(ruleset(), 600_000, 128)
    key = owner_key(CLUSTER, "orders-sink")
    skip = owners.frame(key, encode_frame([poison_dlq(i) for i in range(3)]), SINK, now_ms)
    assert skip is not None
    assert [d[:3] for d in skip.decisions if d[0] == "poison-record-skip"] == [
        ("poison-record-skip", "approve", "planned")
    ]
    task = RawRecord(
        "status",
        0,
        10,
        1_010_000,
        b"status-task-orders-sink-0",
        json.dumps({"state": "FAILED", "trace": POISON, "generation": 1}).encode(),
    )
    restart = owners.frame(key, encode_frame([task]), SINK, now_ms, whole=True)
    assert restart is not None
    assert ("poison-record-restart", "enforce", "suppressed", "inhibited", 1) in restart.decisions
    assert [failure[1:] for failure in restart.failures] == [(now_ms or 1_010_000, None)]


@pytest.mark.parametrize(
    "data",
    [b"", b"\x02{}", b"\x01", b"\x01\x00\x01\x00\x05ab", b"garbage", b"\x01\x00\x00\x00"],
)
def test_data_that_is_not_a_frame_is_python(data: bytes) -> None:
    owner = offsetd_native.Owner(rule_program(ruleset()), TOPICS, 600_000)
    state = offsetd_native.State()
    frame = encode_frame([one_task("orders-sink", 1)])
    assert owner.decide_frame(state, frame, None, None) is not None
    before = state.to_json()
    assert owner.decide_frame(state, data, None, None) is None
    assert state.to_json() == before
    assert owner.decide_frame(state, frame[:-3], None, None) is None  # cut short
    assert state.to_json() == before


# -- the bench's records and rules ----------------------------------------------------------------


def bench_templates() -> bench_daemon.Templates:
    """`load_templates`'s fallbacks: the fixtures' RUNNING status, FAILED trace, DLQ headers."""
    fixture = bench_daemon._fixture
    running = json.loads(decode_b64(fixture("status_task_running.json")["value"]))
    failed = json.loads(decode_b64(fixture("status_task_failed.json")["value"]))
    pairs = fixture("dlq_with_context.json")["headers"]
    headers = [(name, decode_b64(value)) for name, value in pairs]
    return bench_daemon.Templates(running, [failed["trace"]], headers)


def decode_b64(text: str) -> bytes:
    return base64.b64decode(text)


BENCH_RECORDS = 6000


@pytest.mark.parametrize("now_ms", [None, "clock"])
def test_the_bench_records_and_rules_decide_as_python(now_ms: str | None) -> None:
    """The bench's first records (`generate`, as its copy topic holds them), framed per owner
    in batches as the ingest frames them, with its 52 rules and its connectors' metadata."""
    base_ms = 1_795_000_000_000
    made = islice(bench_daemon.generate(bench_templates()), BENCH_RECORDS)
    records = [
        RawRecord(
            bench_daemon.TOPIC,
            partition,
            i,
            base_ms + i * bench_daemon.SPAN_MS // bench_daemon.RECORDS,
            key,
            value,
            tuple(headers),
        )
        for i, (key, value, headers, partition) in enumerate(made)
    ]
    owners = Owners(bench_rules(), 600_000, 128)
    metas = {c.name: c.meta for c in bench_daemon.connectors()}
    for start in range(0, len(records), 500):
        frames: dict[str, list[RawRecord]] = {}
        for raw in records[start : start + 500]:
            frames.setdefault(route_status_or_dlq(bench_daemon.CLUSTER, raw), []).append(raw)
        now = None if now_ms is None else records[start + 499].timestamp_ms
        for key, batch in frames.items():
            meta = metas.get(key.partition("/")[2])
            data = encode_frame(batch)  # as `engine_replay.frames_of`: whole DLQ records
            assert owners.frame(key, data, meta, now, whole=True) is not None
    assert owners.seen["events"] == len(records)
    assert owners.seen["planned"] > 500
    assert owners.seen["tallies"] > 300
    assert owners.seen["suppressed inhibited"] > 0
