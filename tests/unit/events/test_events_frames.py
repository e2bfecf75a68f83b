"""offsetd.events.frames: routing raw records to their owner, and frames of raw records."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.frames import (
    Router,
    decode_frame,
    encode_frame,
    route_dlq,
    route_offsets,
    route_status,
)
from offsetd.events.models import TRACE_HEAD_CHARS, owner_key
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status
from tests.unit.events.test_events_decode import fixture

FIXTURES: dict[str, tuple[Router, Callable[[str, RawRecord], Any]]] = {
    "status_task_running": (route_status, decode_status),
    "status_task_failed": (route_status, decode_status),
    "status_task_tombstone": (route_status, decode_status),
    "status_connector_running": (route_status, decode_status),
    "status_connector_tombstone": (route_status, decode_status),
    "status_topic": (route_status, decode_status),
    "status_topic_tombstone": (route_status, decode_status),
    "dlq_with_context": (route_dlq, decode_dlq),
    "offsets_file_source": (route_offsets, decode_offsets),
    "offsets_mm2_source": (route_offsets, decode_offsets),
    "offsets_tombstone": (route_offsets, decode_offsets),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_route_is_the_owner_the_decoder_finds(name: str) -> None:
    route, decode = FIXTURES[name]
    raw = fixture(name)
    event = decode("west", raw)
    assert route("west", raw) == owner_key("west", event.connector)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_framed_record_decodes_to_the_same_event(name: str) -> None:
    _, decode = FIXTURES[name]
    raw = fixture(name)
    dlq = frozenset({raw.topic}) if decode is decode_dlq else frozenset()
    (back,) = decode_frame(encode_frame([raw], dlq_topics=dlq))
    assert decode("west", back) == decode("west", raw)
    if not dlq:
        assert back == raw


def test_a_dlq_frame_keeps_only_the_context_headers() -> None:
    raw = fixture("dlq_with_context")
    raw = dataclasses.replace(raw, headers=(("trace-id", b"x"), *raw.headers))
    (back,) = decode_frame(encode_frame([raw], dlq_topics=frozenset({raw.topic})))
    assert back.key is None
    assert back.value is None
    assert all(name.startswith(DLQ_HEADER_PREFIX) for name, _ in back.headers)
    assert len(back.headers) == len(raw.headers) - 1


def test_records_that_name_no_connector_are_malformed() -> None:
    raw = RawRecord("connect-status", 0, 7, 1, b"status-task--0", b"{}")
    with pytest.raises(Malformed, match="names no connector"):
        route_status("west", raw)
    with pytest.raises(Malformed, match="unknown status key prefix"):
        route_status("west", dataclasses.replace(raw, key=b"nope"))
    with pytest.raises(Malformed, match="no key"):
        route_status("west", dataclasses.replace(raw, key=None))
    with pytest.raises(Malformed, match="connector is unknown"):
        route_dlq("west", dataclasses.replace(raw, topic="dlq", headers=()))
    with pytest.raises(Malformed, match="not valid JSON"):
        route_offsets("west", dataclasses.replace(raw, key=b"[oops"))
    with pytest.raises(Malformed, match="JSON array"):
        route_offsets("west", dataclasses.replace(raw, key=b'["", {}]'))


def test_the_last_connector_header_owns_a_dlq_record() -> None:
    name = DLQ_HEADER_PREFIX + "connector.name"
    raw = RawRecord("dlq", 0, 1, 1, None, None, ((name, b"old"), (name, b"new")))
    assert route_dlq("west", raw) == "west/new"


def test_garbage_is_not_a_frame() -> None:
    for data in (b"", b"\x02", b"\x01\x00\x01\x00\x05ab", b"\x01\x00\x00\x00"):
        with pytest.raises(Malformed, match="not an offsetd frame"):
            decode_frame(data)


_bytes = st.none() | st.binary(max_size=64)


@given(
    st.lists(
        st.builds(
            RawRecord,
            topic=st.sampled_from(["connect-status", "a-dlq", "t\u00e9"]),
            partition=st.integers(0, 2**31 - 1),
            offset=st.integers(0, 2**63 - 1),
            timestamp_ms=st.integers(-1, 2**62),
            key=_bytes,
            value=_bytes,
            headers=st.lists(st.tuples(st.text(max_size=20), _bytes), max_size=3).map(tuple),
        ),
        max_size=5,
    )
)
def test_frames_round_trip(records: list[RawRecord]) -> None:
    assert decode_frame(encode_frame(records)) == records


@pytest.mark.parametrize(
    "trace",
    [
        "org.example.Boom: bad\n" + "\tat org.example.Frame.run(Frame.java:1)\n" * 400,  # 16 KB
        "org.example.Boom: ünïcödé\n" + "\tat org.example.Främé.run(Frame.java:1)\n" * 400,
        "org.example.Boom: short\n\tat org.example.Frame.run(Frame.java:1)\n",
    ],
    ids=["ascii", "multi-byte", "short"],
)
def test_a_dlq_frame_carries_the_trace_head_the_decoder_reads(trace: str) -> None:
    """The stack trace header travels cut to TRACE_HEAD_CHARS characters (never mid-character):
    the decoded error, trace head included, is the one the whole record gives."""
    raw = fixture("dlq_with_context")
    name = DLQ_HEADER_PREFIX + "exception.stacktrace"
    raw = dataclasses.replace(
        raw,
        headers=(*((n, v) for n, v in raw.headers if n != name), (name, trace.encode())),
    )
    (back,) = decode_frame(encode_frame([raw], dlq_topics=frozenset({raw.topic})))
    whole, framed = decode_dlq("west", raw), decode_dlq("west", back)
    assert framed.error == whole.error
    assert framed.error.trace_head == trace[:TRACE_HEAD_CHARS]
    assert framed.headers[name] == trace[:TRACE_HEAD_CHARS]
    assert framed.model_copy(update={"headers": whole.headers}) == whole


def test_a_trace_header_that_is_not_utf8_travels_as_it_is() -> None:
    raw = fixture("dlq_with_context")
    name = DLQ_HEADER_PREFIX + "exception.stacktrace"
    bad = b"\xff" * (TRACE_HEAD_CHARS + 10)
    raw = dataclasses.replace(raw, headers=(*raw.headers, (name, bad)))
    (back,) = decode_frame(encode_frame([raw], dlq_topics=frozenset({raw.topic})))
    assert dict(back.headers)[name] == bad
    with pytest.raises(Malformed, match="UTF-8"):
        decode_dlq("west", back)
