"""What the daemon's owner reads of the compiled parts (offsetd.app.decider) is Python's.

Held equal:
- `offsetd_native.frame_summary(frame)` to what the decider reads of `decode_frame(frame)`: the
  record count and the topic of the first record keyed `status-connector-` (random records of
  the decoding tests' generator, keys of every status prefix), and a ValueError exactly when
  `decode_frame` raises Malformed (random broken frames);
- `State.deferred_count` to `len(ConnectorState.deferred)` of the same state JSON (states with
  0 to past `MAX_DEFERRED` events waiting for metadata);
- `FrameOutcome.failures` to the suppressed firings caused by failures the Python engine hands
  the breaker for the same frames (`decide_batch`, held `inhibited` decisions included): their
  id, decision time and record, in order, the first of each distinct decision time and record
  (the breaker's answer depends on those alone, and it trips on the first that trips; random
  streams of DLQ records and FAILED tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import offsetd_native
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.engine import ConnectorState
from offsetd.engine.batch import decide_batch
from offsetd.engine.decide import MAX_DEFERRED
from offsetd.engine.tally import fold_suppressed
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.frames import decode_frame, encode_frame
from offsetd.events.status import decode_status
from offsetd.outcomes import PLANNED
from offsetd.rules.program import rule_program
from tests.unit.app.test_decider_engines import (
    CLUSTER,
    DLQ,
    RULES,
    STATUS,
    WINDOW,
    connector,
    dlq,
    frame,
    task,
)
from tests.unit.engine.test_engine_decide import SEC, SINK, Feed, rules
from tests.unit.engine.test_engine_deferred import TYPED
from tests.unit.native.test_native_decode import RAW_RECORDS, broken_frames

KEYS = st.sampled_from(
    [
        b"status-connector-a",
        b"status-connector-",
        b"status-task-a-0",
        b"status-topic-t:connector-a",
        b"status-connecto",
        b"",
    ]
)


def python_summary(data: bytes) -> tuple[int, str | None] | None:
    try:
        records = decode_frame(data)
    except Malformed:
        return None
    changed = next(
        (r.topic for r in records if r.key is not None and r.key.startswith(b"status-connector-")),
        None,
    )
    return len(records), changed


def compiled_summary(data: bytes) -> tuple[int, str | None] | None:
    try:
        return offsetd_native.frame_summary(data)
    except ValueError:
        return None


@given(records=st.lists(RAW_RECORDS, max_size=8), keys=st.lists(st.none() | KEYS, max_size=8))
@settings(max_examples=400, deadline=None)
def test_the_summary_is_what_the_decider_reads_of_the_records(
    records: list[RawRecord], keys: list[bytes | None]
) -> None:
    for i, key in enumerate(keys[: len(records)]):
        records[i] = RawRecord(
            records[i].topic,
            records[i].partition,
            records[i].offset,
            records[i].timestamp_ms,
            key,
            records[i].value,
            records[i].headers,
        )
    data = encode_frame(records)
    assert compiled_summary(data) == python_summary(data) is not None


@given(data=broken_frames() | st.binary(max_size=80).map(lambda b: b"\x01" + b))
@settings(max_examples=400, deadline=None)
def test_a_broken_frame_has_no_summary_exactly_when_python_refuses_it(data: bytes) -> None:
    assert compiled_summary(data) == python_summary(data)


def test_the_summary_names_the_first_connector_status() -> None:
    data = frame([task(1, 1, "FAILED"), dlq(1, 2, 3), connector(2, 3, "RUNNING")])
    assert offsetd_native.frame_summary(data) == (3, STATUS)
    assert offsetd_native.frame_summary(frame([dlq(1, 2, 3)])) == (1, None)


@given(waiting=st.integers(0, MAX_DEFERRED + 3))
@settings(max_examples=30, deadline=None)
def test_deferred_count_is_the_deferred_events(waiting: int) -> None:
    feed = Feed(rules(TYPED), meta=None)
    for i in range(waiting):
        feed.feed(feed.task(i * SEC))
    text = feed.state.model_dump_json()
    assert offsetd_native.State.from_json(text).deferred_count == len(feed.state.deferred)
    assert offsetd_native.State().deferred_count == 0


def python_failures(records: list[RawRecord], now: int) -> list[tuple[Any, ...]]:
    state = ConnectorState()
    decoders: dict[str, Callable[[str, RawRecord], Any]] = {STATUS: decode_status, DLQ: decode_dlq}
    out: list[tuple[Any, ...]] = []
    for one in records:  # one record a frame: the state between them as the owner keeps it
        _, firings = decide_batch(
            state,
            [one],
            lambda raw: decoders[raw.topic](CLUSTER, raw),
            RULES,
            lambda _event: SINK,
            lambda _event: now,
        )
        fold_suppressed(state, firings, WINDOW)
        first: dict[tuple[int, str | None], str] = {}
        for d in firings:
            if d.outcome != PLANNED and d.from_failure:
                first.setdefault((d.decided_at_ms, d.record_text), d.id)
        out.append(tuple((found, *key) for key, found in first.items()))
    return out


def compiled_failures(records: list[RawRecord], now: int) -> list[tuple[Any, ...]]:
    owner = offsetd_native.Owner(
        rule_program(RULES), {STATUS: (CLUSTER, "status"), DLQ: (CLUSTER, "dlq")}, WINDOW
    )
    state = offsetd_native.State()
    out: list[tuple[Any, ...]] = []
    for one in records:
        outcome = owner.decide_frame(
            state, frame([one]), (SINK.connector_class, SINK.connector_type), now
        )
        assert outcome is not None
        out.append(tuple(outcome.failures))
    return out


@given(kinds=st.lists(st.sampled_from(["dlq", "failed", "running"]), min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_the_failures_are_the_ones_python_hands_the_breaker(kinds: list[str]) -> None:
    records: list[RawRecord] = []
    for i, kind in enumerate(kinds):
        t = (i + 1) * 7 * SEC
        if kind == "dlq":
            records.append(dlq(i + 1, t, i % 4))
        else:
            records.append(task(i + 1, t, "FAILED" if kind == "failed" else "RUNNING"))
    now = len(kinds) * 7 * SEC + 1
    expected = python_failures(records, now)
    assert compiled_failures(records, now) == expected


def test_held_decisions_caused_by_failures_are_among_them() -> None:
    """ "skip" inhibits "restart": a FAILED task then is held (`inhibited`), a Decision."""
    records = [dlq(1, 1 * SEC, 5), task(1, 2 * SEC, "FAILED")]
    failures = compiled_failures(records, 3 * SEC)
    assert failures == python_failures(records, 3 * SEC)
    [(decision_id, decided_at, record)] = failures[1]
    assert (decided_at, record) == (3 * SEC, None)
    assert len(decision_id) == 32  # `decision_id`: a sha256, cut to 32 hex digits
