"""The compiled framing makes the ingest's frames byte for byte (native/src/ingest).

`Ingest._plan` (the Python: `_route`, `plan_frames`, `encode_frame`) and `Ingest._plan_compiled`
(`offsetd_native.Framer`) frame the same random batches of confluent-kafka messages: the same
frames (owner and value, in order), the same positions, the same records reported as malformed
(unroutable, too large) with the same reasons, in the same order. The batches mix a status
topic, a DLQ topic (headers only, stack traces cut), a topic of both (`route_status_or_dlq`),
an offsets topic (routed by the Python callback), topics nobody reads and error events; keys
and headers valid and not (no key, unknown prefixes, names without a task id or connector, bytes
that are not UTF-8, empty or missing connector headers, duplicates), traces over 4,096
characters in ASCII, in other scripts and not UTF-8, and frame and message limits small enough
that frames split and records are left out.
"""

from __future__ import annotations

import json
from typing import Any

import confluent_kafka as ck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.frames import (
    frame_head_size,
    route_dlq,
    route_offsets,
    route_status,
    route_status_or_dlq,
)
from offsetd.ingest import Ingest, Source, _framer

STATUS, DLQ, MIXED, OFFSETS, OTHER = "connect-status", "orders-dlq", "copy", "connect-offsets", "x"
SOURCES = {
    STATUS: Source("east", route_status),
    DLQ: Source("east", route_dlq, dlq=True),
    MIXED: Source("west", route_status_or_dlq),
    OFFSETS: Source("west", route_offsets),
}
PREFIX = "__connect.errors."

NAMES = st.sampled_from(["orders", "orders-sink", "a-b-c", "", "é-sink", "x:connector-y"])
STATUS_KEYS = st.one_of(
    st.builds(lambda n: f"status-connector-{n}".encode(), NAMES),
    st.builds(lambda n, t: f"status-task-{n}-{t}".encode(), NAMES, st.integers(0, 12)),
    st.builds(lambda n: f"status-task-{n}".encode(), NAMES),
    st.builds(lambda t, n: f"status-topic-{t}:connector-{n}".encode(), NAMES, NAMES),
    st.sampled_from([b"status-other-x", b"status-", b"status-task-\xff-1", b"\xc3(", b""]),
    st.binary(max_size=12),
)
TRACE_LINE = "org.apache.kafka.connect.errors.DataException: boom\n\tat x.y.Z(Z.java:1)\n"
TRACES = st.one_of(
    st.just((TRACE_LINE * 80).encode()),  # ~4.9 KB, ASCII
    st.just(("Ошибка: в записи\n\tat ж.Й(1)\n" * 200).encode()),  # over 4,096 characters
    st.just(b"\xff\xfe" + b"a" * 5000),  # not UTF-8
    st.binary(max_size=64),
)
HEADER_VALUES = st.one_of(st.none(), st.binary(max_size=16), NAMES.map(str.encode))


@st.composite
def headers(draw: st.DrawFn) -> list[tuple[str, bytes | None]] | None:
    if draw(st.booleans()):
        return None if draw(st.booleans()) else []
    found: list[tuple[str, bytes | None]] = []
    for _ in range(draw(st.integers(0, 6))):
        name = draw(
            st.sampled_from(
                [
                    f"{PREFIX}connector.name",
                    f"{PREFIX}exception.stacktrace",
                    f"{PREFIX}topic",
                    f"{PREFIX}task.id",
                    "traceparent",
                    "é",
                ]
            )
        )
        value = draw(TRACES if name.endswith("stacktrace") else HEADER_VALUES)
        found.append((name, value))
    return found


@st.composite
def messages(draw: st.DrawFn) -> ck.Message:
    topic = draw(st.sampled_from([STATUS, DLQ, MIXED, OFFSETS, OTHER]))
    partition = draw(st.integers(0, 3))
    offset = draw(st.integers(0, 10**12))
    if draw(st.integers(0, 20)) == 0:
        code = draw(st.sampled_from([ck.KafkaError._PARTITION_EOF, ck.KafkaError._TRANSPORT]))
        return ck.Message(
            topic=topic, partition=partition, offset=offset, error=ck.KafkaError(code)
        )
    if topic == OFFSETS:
        key = json.dumps([draw(NAMES), {"p": 1}]).encode() if draw(st.booleans()) else b"[1]"
    else:
        key = draw(st.none() | STATUS_KEYS)  # type: ignore[assignment]
    value = draw(st.none() | st.binary(max_size=80))
    kind = draw(st.sampled_from([0, 1, 2]))
    stamp = (kind, draw(st.integers(-1, 2**40)))
    given = draw(headers())
    made: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
    made |= {"key": key, "value": value, "timestamp": stamp}
    if given is not None:
        made["headers"] = given
    return ck.Message(**made)


def ingest(
    max_frame_bytes: int, max_message_bytes: int, compiled: bool
) -> tuple[Ingest, list[tuple[str, str]]]:
    reported: list[tuple[str, str]] = []

    def malformed(raw: RawRecord, bad: Malformed) -> None:
        reported.append((raw.coordinates, bad.reason))

    made = Ingest(
        {"bootstrap.servers": "127.0.0.1:1"},
        SOURCES,
        "events",
        "group",
        max_frame_bytes=max_frame_bytes,
        max_message_bytes=max_message_bytes,
        on_malformed=malformed,
        compiled=compiled,
    )
    return made, reported


@given(
    batch=st.lists(messages(), max_size=40),
    max_frame_bytes=st.sampled_from([64, 400, 3000, 1 << 20]),
    max_message_bytes=st.sampled_from([4000, 9000, 1 << 20]),
)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_compiled_framing_makes_the_pythons_frames(
    batch: list[ck.Message], max_frame_bytes: int, max_message_bytes: int
) -> None:
    python, python_reported = ingest(max_frame_bytes, max_message_bytes, compiled=False)
    compiled, compiled_reported = ingest(max_frame_bytes, max_message_bytes, compiled=True)
    expected_frames, expected_positions = python._plan(batch)
    framer = _framer(SOURCES, compiled.max_frame_bytes, compiled.max_record_bytes)
    frames, positions = compiled._plan_compiled(batch, framer)
    assert list(frames) == list(expected_frames)
    assert positions == expected_positions
    assert compiled_reported == python_reported
    assert compiled.too_large == python.too_large


def test_a_storm_batch_frames_alike_and_splits_by_size() -> None:
    """A batch as a DLQ storm brings it: one connector's records with 5 KB traces, framed into
    several frames of at most the frame size, in order, the same as the Python."""
    trace = (TRACE_LINE * 80).encode()
    batch = [
        ck.Message(
            topic=DLQ,
            partition=0,
            offset=i,
            key=b"k",
            value=b"v" * 100,
            timestamp=(1, 1000 + i),
            headers=[
                (f"{PREFIX}connector.name", b"orders-sink"),
                (f"{PREFIX}exception.stacktrace", trace),
            ],
        )
        for i in range(500)
    ]
    python, _ = ingest(64 * 1024, 1 << 20, compiled=False)
    compiled, _ = ingest(64 * 1024, 1 << 20, compiled=True)
    expected, _ = python._plan(batch)
    framer = _framer(SOURCES, compiled.max_frame_bytes, compiled.max_record_bytes)
    frames, _ = compiled._plan_compiled(batch, framer)
    assert list(frames) == list(expected)
    assert len(frames) > 30  # 500 records of ~4.2 KB framed (trace cut), 64 KiB a frame
    head = frame_head_size([DLQ])
    assert all(len(value) <= 64 * 1024 + head for _, value in frames)
    assert {owner for owner, _ in frames} == {"east/orders-sink"}
