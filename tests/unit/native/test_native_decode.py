"""The compiled decoding (native/src/decode/) is Python's, record for record.

Held equal: `offsetd_native.frame_fields(frame)` to `decode_frame(frame)` (every field of every
record, and an error exactly when Python raises Malformed), and each record's outcome in
`offsetd_native.Decoder` to Python's decoder for its topic (`decode_status`, `decode_dlq` as
`offsetd.app.wiring` calls it, without `connector=`):

- an event the compiled side makes is Python's: the same `model_dump_json()` text;
- a record Python rejects (Malformed, or any other error) is never a compiled event;
- a record Python decodes is left to Python only for a reason the compiled side names, and the
  reason holds (an integer beyond i64, a lone surrogate, JSON nested past the scanner's depth).

On random records (the events tests' generators: valid status and DLQ records, random bytes and
headers, random JSON shapes; and here: hand-made JSON texts with escapes, duplicate keys,
whitespace, big and long numbers, lone surrogates, deep nesting, long non-ASCII traces) framed
with `encode_frame` in mixed topics, with memos warm and cold; on random broken frames; and on
the recorded fixtures. The trace readers (`first_line`, `last_cause`) and the Unicode classes
they use (`re`'s `\\w` and `\\s`) are compared directly, the classes on every code point.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import offsetd_native
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetd.events.decode import Malformed, RawRecord, first_line, last_cause
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.frames import decode_frame, encode_frame
from offsetd.events.models import TRACE_HEAD_CHARS
from offsetd.events.status import STATUS_STATES, decode_status
from tests.unit.events.test_events_construct import TRACES, dlq_records, status_records
from tests.unit.events.test_events_decode import (
    FIXTURES,
    HEADERS,
    JSON_VALUES,
    KEY_PREFIXES,
    OPTIONAL_BYTES,
    fixture,
)

# topic -> (Connect cluster, kind), as `Wiring.source_topics` would give them; "other" is read
# by nobody (Python: Malformed, "not a topic this process reads").
TOPICS = {
    "connect-status": ("west", "status"),
    "east-status": ("east", "status"),
    "dlq-a": ("west", "dlq"),
    "dlq-b": ("east", "dlq"),
    "connect-offsets": ("west", "offsets"),
}
ALL_TOPICS = [*TOPICS, "other"]
DECODERS: dict[str, Callable[[str, RawRecord], Any]] = {
    "status": decode_status,
    "dlq": decode_dlq,
}
# Why a record Python decodes may still be left to it (offsetd_native.pyi, Decoder).
UNSURE = {"big integer", "lone surrogate", "deep JSON", "long integer"}
I64 = range(-(2**63), 2**63)
SHARED = offsetd_native.Decoder(TOPICS)  # memos warm across examples, as Python's are


def python_outcome(raw: RawRecord) -> tuple[str, Any]:
    """("event", the event), ("malformed", None), ("error", the exception) or ("python", None)
    for a topic the compiled side does not decode."""
    found = TOPICS.get(raw.topic)
    if found is None or found[1] == "offsets":
        return ("python", None)
    cluster, kind = found
    try:
        return ("event", DECODERS[kind](cluster, raw))
    except Malformed:
        return ("malformed", None)
    except Exception as exc:  # e.g. pydantic refusing a lone surrogate: never an event here
        return ("error", exc)


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if hasattr(value, "__dict__"):
        return any(has_surrogate(v) for v in vars(value).values())
    return False


def big_integer(event: Any) -> bool:
    return any(
        isinstance(v, int) and v not in I64
        for v in (getattr(event, f, None) for f in ("generation", "task_id", "discovered_ms"))
    )


def assert_same_outcomes(frame: bytes, decoder: Any = None) -> list[tuple[str, str | None]]:
    """Every record of `frame`, compiled and Python, held to the rules in the docstring."""
    records = decode_frame(frame)
    outcomes = (decoder or offsetd_native.Decoder(TOPICS)).frame_outcomes(frame)
    assert len(outcomes) == len(records)
    seen: list[tuple[str, str | None]] = []
    for raw, (made, reason) in zip(records, outcomes, strict=True):
        what, reference = python_outcome(raw)
        assert (made is None) != (reason is None)
        if made is not None:
            assert what == "event", (raw, made, reference)
            assert made == reference.model_dump_json()
        elif what == "event":
            assert reason in UNSURE, (raw, reason, reference)
            if reason == "big integer":
                assert big_integer(reference)
            elif reason == "lone surrogate":
                assert has_surrogate(reference)
        elif what == "python":
            assert reason == "not decoded here"
        else:  # Python raised
            assert reason in {"malformed", "deep JSON", "long integer"}, (raw, reason, reference)
        seen.append((what, reason))
    return seen


def framed(records: list[RawRecord], topics: list[str], dlq_cut: bool) -> bytes:
    """The records, each moved to one of `topics`, as one frame; `dlq_cut`: DLQ records keep
    only their context headers, as the ingest sends them."""
    moved = [
        dataclasses.replace(raw, topic=topics[i % len(topics)]) for i, raw in enumerate(records)
    ]
    dlq = frozenset({"dlq-a", "dlq-b"}) if dlq_cut else frozenset()
    return encode_frame(moved, dlq_topics=dlq)


def check(records: list[RawRecord], topics: list[str], dlq_cut: bool) -> list[tuple[str, Any]]:
    frame = framed(records, topics, dlq_cut)
    cold = assert_same_outcomes(frame)
    warm = assert_same_outcomes(frame, SHARED)
    assert cold == warm
    events = offsetd_native.decode_frame_events(frame, TOPICS)
    assert events == [made for made, _ in offsetd_native.Decoder(TOPICS).frame_outcomes(frame)]
    assert offsetd_native.Decoder(TOPICS).frame_event_count(frame) == len(events) - events.count(
        None
    )
    return cold


# -- the frame format --------------------------------------------------------------------------

RAW_RECORDS = st.builds(
    RawRecord,
    topic=st.sampled_from(ALL_TOPICS) | st.text(max_size=8),
    partition=st.integers(-(2**31), 2**31 - 1),
    offset=st.integers(-(2**63), 2**63 - 1),
    timestamp_ms=st.integers(-(2**63), 2**63 - 1),
    key=OPTIONAL_BYTES,
    value=OPTIONAL_BYTES,
    headers=HEADERS,
)


def fields_of(frame: bytes) -> list[tuple[Any, ...]] | str:
    try:
        return [dataclasses.astuple(raw) for raw in decode_frame(frame)]
    except Malformed:
        return "Malformed"


def compiled_fields_of(frame: bytes) -> list[tuple[Any, ...]] | str:
    try:
        return offsetd_native.frame_fields(frame)
    except ValueError:
        return "Malformed"


@given(records=st.lists(RAW_RECORDS, max_size=6), dlq_cut=st.booleans())
@settings(max_examples=300, deadline=None)
def test_frames_read_as_python_reads_them(records: list[RawRecord], dlq_cut: bool) -> None:
    dlq = frozenset({"dlq-a", "dlq-b"}) if dlq_cut else frozenset()
    frame = encode_frame(records, dlq_topics=dlq)
    assert compiled_fields_of(frame) == fields_of(frame) != "Malformed"


@st.composite
def broken_frames(draw: st.DrawFn) -> bytes:
    frame = bytearray(encode_frame(draw(st.lists(RAW_RECORDS, min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["cut", "flip", "insert", "lengths"]))
        at = draw(st.integers(0, len(frame)))
        if how == "cut":
            del frame[at:]
        elif how == "flip" and at < len(frame):
            frame[at] = draw(st.integers(0, 255))
        elif how == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif at + 2 <= len(frame):  # a length or count made larger or negative
            frame[at : at + 2] = draw(st.sampled_from([b"\xff\xff", b"\x00\x00", b"\x80\x00"]))
    return bytes(frame)


@given(frame=broken_frames() | st.binary(max_size=80).map(lambda b: b"\x01" + b))
@settings(max_examples=500, deadline=None)
def test_a_broken_frame_is_refused_exactly_when_python_refuses_it(frame: bytes) -> None:
    assert compiled_fields_of(frame) == fields_of(frame)


def test_garbage_is_not_a_frame() -> None:
    for data in (b"", b"\x02", b"\x01\x00\x01\x00\x05ab", b"\x01\x00\x00\x00", b"\x01\x00"):
        with pytest.raises(ValueError, match="not an offsetd frame"):
            offsetd_native.frame_fields(data)
        with pytest.raises(ValueError, match="not an offsetd frame"):
            offsetd_native.decode_frame_events(data, TOPICS)
    assert offsetd_native.frame_fields(b"\x01\x00\x00") == []


# -- events: the events tests' generators ------------------------------------------------------

TOPIC_MIXES = st.lists(st.sampled_from(ALL_TOPICS), min_size=1, max_size=4)


@given(records=st.lists(status_records(), min_size=1, max_size=8), topics=TOPIC_MIXES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_status_records_decode_as_python(records: list[RawRecord], topics: list[str]) -> None:
    check(records, topics, dlq_cut=False)


def test_valid_status_records_are_compiled_events_but_for_big_generations() -> None:
    """The generator's valid records on a status topic: Python's events, each one compiled
    unless its generation is beyond i64 (it draws them from ±2**70)."""

    @given(records=st.lists(status_records(), min_size=1, max_size=8))
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def run(records: list[RawRecord]) -> None:
        for what, reason in check(records, ["connect-status"], dlq_cut=False):
            assert what == "event"
            assert reason in (None, "big integer")

    run()


@given(
    records=st.lists(dlq_records(), min_size=1, max_size=8),
    topics=TOPIC_MIXES,
    dlq_cut=st.booleans(),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_dlq_records_decode_as_python(
    records: list[RawRecord], topics: list[str], dlq_cut: bool
) -> None:
    outcomes = check(records, topics, dlq_cut)
    for (what, reason), topic in zip(outcomes, (topics * 8)[: len(records)], strict=True):
        if topic.startswith("dlq"):  # header values are UTF-8 text: nothing left unsure
            assert reason is None or (what, reason) == ("malformed", "malformed")


@given(
    records=st.lists(
        st.builds(
            lambda key, value, headers, prefix: RawRecord(
                "t", 0, 1, 2, None if key is None else prefix + key, value, headers
            ),
            OPTIONAL_BYTES,
            OPTIONAL_BYTES,
            HEADERS,
            KEY_PREFIXES,
        ),
        min_size=1,
        max_size=6,
    ),
    topics=TOPIC_MIXES,
    dlq_cut=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_random_bytes_decode_as_python(
    records: list[RawRecord], topics: list[str], dlq_cut: bool
) -> None:
    check(records, topics, dlq_cut)


@given(
    keys=st.lists(
        st.sampled_from(["status-connector-c", "status-task-c-1", "status-topic-t:connector-c"]),
        min_size=1,
        max_size=5,
    ),
    values=st.lists(JSON_VALUES, min_size=5, max_size=5),
)
@settings(max_examples=300, deadline=None)
def test_random_json_shapes_decode_as_python(keys: list[str], values: list[Any]) -> None:
    records = [
        RawRecord("t", 0, i, 2, key.encode(), json.dumps(value).encode())
        for i, (key, value) in enumerate(zip(keys, values, strict=False))
    ]
    check(records, ["connect-status"], dlq_cut=False)


# -- events: hand-made JSON texts --------------------------------------------------------------

SPACE = st.sampled_from(["", " ", "\t", "\n", "\r\n", "  \n"])
LONG_TRACES = st.builds(
    lambda line, cause, n: f"{line}\n" + "\tat a.B(B.java:1)\n" * n + f"Caused by: {cause}\n",
    st.text(min_size=1, max_size=30),
    st.sampled_from(["é.Ü: ünï", "x.Y: \u3000m\r", "x.Y", "x.Y:", "bad line", "٣.٤: x"]),
    st.sampled_from([0, 10, 300]),
).map(lambda t: t * 3) | st.sampled_from(["é" * 5000, "x.Y: " + "ü" * 4100 + "\nCaused by: a.B"])


def json_string(text: str) -> str:
    """`text` as a JSON string, written one of several ways."""
    return json.dumps(text, ensure_ascii=len(text) % 2 == 0)


JSON_STRINGS = st.one_of(
    st.sampled_from(sorted(STATUS_STATES)).map(json_string),
    st.sampled_from(['"RUNN\\u0049NG"', '"FAIL\\u0045D"', '"running"', '"\\ud800"']),
    st.sampled_from(['"\\ud83d\\ude00"', '"\\ud83d\\u0041"', '"a\\/b\\"\\\\\\b\\f\\n\\r\\t"']),
    st.sampled_from(['"\\uDBFF\\uDFFF"', '"x\\u"', '"\\x"', '"tab\tin"', '"\\u00e9"']),
    TRACES.filter(lambda t: t is not None).map(json_string),  # type: ignore[arg-type]
    LONG_TRACES.map(json_string),
)
JSON_NUMBERS = st.one_of(
    st.integers(-(2**65), 2**65).map(str),
    st.sampled_from(["-0", "0", "1.5", "1e999", "-1E-3", "2.0", "1.", ".5", "01", "-", "+1"]),
    st.sampled_from(["9" * 700, "9" * 600, "-" + "9" * 30, "NaN", "Infinity", "-Infinity"]),
)
JSON_SCALARS = st.one_of(
    JSON_STRINGS, JSON_NUMBERS, st.sampled_from(["null", "true", "false", "nul", "[]", "{}"])
)
FIELD_NAMES = st.sampled_from(
    ["state", "generation", "trace", "worker_id", "version", "st\\u0061te", "topic", "\\ud800"]
)


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON-ish text: mostly valid, sometimes subtly not (what Python must judge)."""
    kind = draw(st.integers(0, 9))
    if depth > 2 or kind < 4:
        return draw(JSON_SCALARS)
    if kind == 9:  # deep: past the compiled scanner's depth, or not
        n = draw(st.sampled_from([10, 63, 64, 65, 200]))
        return "[" * n + "]" * n
    if kind == 8:
        items = draw(st.lists(json_texts(depth + 1), max_size=3))
        return "[" + ",".join(items) + draw(st.sampled_from(["]", ",]", "]]"]))
    members = []
    for _ in range(draw(st.integers(0, 6))):  # duplicates too: the last wins
        name = draw(FIELD_NAMES)
        members.append(
            f'{draw(SPACE)}"{name}"{draw(SPACE)}:{draw(SPACE)}{draw(json_texts(depth + 1))}'
        )
    close = draw(st.sampled_from(["}", "}", "}", ",}", "} x", "}}"]))
    return "{" + ",".join(members) + draw(SPACE) + close


VALID_STRINGS = st.one_of(
    st.sampled_from(['"\\ud83d\\ude00"', '"a\\/b\\"\\\\\\b\\f\\n\\r\\t"', '"\\u00e9"', '""']),
    TRACES.filter(lambda t: t is not None).map(json_string),  # type: ignore[arg-type]
    LONG_TRACES.map(json_string),
)


@st.composite
def status_texts(draw: st.DrawFn) -> str:
    """A status value: one time in two, one Python takes (but for what `json_texts` adds)."""
    fields = {
        "state": draw(JSON_STRINGS),
        "generation": draw(JSON_NUMBERS),
        "trace": draw(JSON_STRINGS | st.just("null")),
        "worker_id": draw(JSON_STRINGS | st.just("null") | JSON_NUMBERS),
    }
    if draw(st.booleans()):
        fields["state"] = json_string(draw(st.sampled_from(["FAILED", "FAILED", "RUNNING"])))
        fields["generation"] = str(draw(st.integers(-(2**63), 2**63 - 1)))
        fields["trace"] = draw(VALID_STRINGS | st.just("null"))
        fields["worker_id"] = draw(VALID_STRINGS | st.just("null"))
    names = draw(st.permutations(list(fields)))
    extra = draw(st.lists(st.tuples(FIELD_NAMES, json_texts()), max_size=2))
    members = [f'"{n}":{fields[n]}' for n in names] + [f'"{n}":{v}' for n, v in extra]
    if not draw(st.integers(0, 3)):
        members = [m for m in members if draw(st.integers(0, 5))]  # some missing
    return draw(SPACE) + "{" + f",{draw(SPACE)}".join(members) + "}" + draw(SPACE)


@st.composite
def topic_texts(draw: st.DrawFn) -> str:
    numbers = JSON_NUMBERS | st.sampled_from(["true", "null", '"1"', "-1", "0"])
    task, discovered = draw(numbers), draw(numbers)
    inner = f'{{"name":"t","task":{task},"discoverTimestamp":{discovered}}}'
    return draw(st.sampled_from([f'{{"topic":{inner}}}', f'{{"topic":{inner},"topic":[]}}', inner]))


STATUS_KEYS = st.sampled_from(
    [b"status-connector-c", b"status-task-my-sink-2-10", b"status-topic-t:connector-c"]
) | st.sampled_from(
    [
        b"status-connector-c",
        b"status-connector-",
        b"status-task-my-sink-2-10",
        b"status-task-c-007",
        b"status-task-c-2147483648",
        b"status-task--1",
        b"status-task-c-\xd9\xa3",
        b"status-topic-t:connector-c",
        b"status-topic-t:connector-a:connector-b",
        b"status-topic-:connector-c",
        b"status-topic-t:connector-",
        b"status-\xff",
        "status-connector-é-ü".encode(),
    ]
)


@given(
    items=st.lists(
        st.tuples(
            STATUS_KEYS,
            st.none() | status_texts() | topic_texts() | json_texts(),
            st.sampled_from(["connect-status", "east-status"]),
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hand_made_status_values_decode_as_python(
    items: list[tuple[bytes, str | None, str]],
) -> None:
    records = [
        RawRecord(
            topic, 3, i, 99, key, None if text is None else text.encode("utf-8", "surrogatepass")
        )
        for i, (key, text, topic) in enumerate(items)
    ]
    frame = encode_frame(records)
    assert_same_outcomes(frame)
    assert_same_outcomes(frame, SHARED)


def test_each_reason_is_given_where_it_is_due() -> None:
    """One record per reason: the tests above assert reasons hold; these, that each happens."""
    values = {
        b'{"state":"RUNNING","generation":99999999999999999999}': "big integer",
        b'{"state":"RUNNING","generation":1,"worker_id":"\\udc00"}': "lone surrogate",
        b'{"state":"FAILED","generation":1,"trace":"x.Y\\ud800"}': "lone surrogate",
        b'{"state":"RUNNING","generation":1,"x":' + b"[" * 70 + b"]" * 70 + b"}": "deep JSON",
        b'{"state":"RUNNING","generation":1,"x":' + b"1" * 700 + b"}": "long integer",
        b'{"state":"RUNNING","generation":1.0}': "malformed",
    }
    records = [
        RawRecord("connect-status", 0, i, 1, b"status-task-c-0", value)
        for i, value in enumerate(values)
    ]
    records.append(RawRecord("connect-offsets", 0, 9, 1, b'["c",{}]', b"{}"))
    reasons = [reason for _, reason in assert_same_outcomes(encode_frame(records))]
    assert reasons == [*values.values(), "not decoded here"]
    topic = RawRecord(
        "connect-status",
        0,
        1,
        1,
        b"status-topic-t:connector-c",
        b'{"topic":{"task":1,"discoverTimestamp":-99999999999999999999}}',
    )
    assert [r for _, r in assert_same_outcomes(encode_frame([topic]))] == ["big integer"]


# -- the trace readers and their Unicode classes -----------------------------------------------

TRACE_PIECES = st.sampled_from(
    [
        "Caused by: ",
        "\nCaused by: ",
        "\n",
        "\r",
        "\r\n",
        ":",
        " ",
        "\t",
        "x.Y",
        "$",
        "é",
        "٣",
        "\u3000",
        "\u2028",
        "\x1c",
        "\x85",
        "\x0b",
        "\u200b",
        "-",
        "a.B$c_1",
    ]
)
TRACE_TEXTS = st.lists(TRACE_PIECES | st.text(max_size=5), max_size=20).map("".join)
SPACES = st.sampled_from(["", " ", "\t", "\x1c", "\x1f", "\x0b", "\u3000", "\u200b", "\x85", "\r"])
TRACE_LINES = st.builds(
    lambda prefix, cls, sep, space, message, end: prefix + cls + sep + space + message + end,
    st.sampled_from(["", "Caused by: ", "Caused by:", " ", "\u3000"]),
    st.sampled_from(["x.Y", "é.Ü$1", "٣", "a-b", "", "x.Y\u200b"]),
    st.sampled_from([":", "", " :", "::"]),
    st.lists(SPACES, max_size=3).map("".join),
    st.sampled_from(["", "m", "msg with: colon", "ü\u3000"]),
    st.lists(SPACES | st.sampled_from(["\n", "\r\n", "\u2028"]), max_size=3).map("".join),
)
TRACES_OF_LINES = st.lists(TRACE_LINES, max_size=6).map("\n".join)


@given(head=TRACE_TEXTS | TRACES_OF_LINES)
@settings(max_examples=1000, deadline=None)
def test_trace_lines_are_read_as_python_reads_them(head: str) -> None:
    assert offsetd_native.trace_first_line(head) == first_line(head)
    assert offsetd_native.trace_last_cause(head) == last_cause(head)


def python_ranges(pattern: str) -> list[tuple[int, int]]:
    """The code point ranges a one-character `re` class matches, from Python itself."""
    ranges: list[tuple[int, int]] = []
    for low, high in ((0, 0xD7FF), (0xE000, 0x10FFFF)):  # surrogates are never in a str we read
        text = "".join(map(chr, range(low, high + 1)))
        for run in re.finditer(f"{pattern}+", text):
            ranges.append((low + run.start(), low + run.end() - 1))
    return ranges


@pytest.mark.parametrize(("name", "pattern"), [("word", r"\w"), ("space", r"\s")])
def test_the_unicode_tables_are_pythons(name: str, pattern: str) -> None:
    expected = python_ranges(pattern)
    assert offsetd_native.char_class_ranges(name) == expected, (
        "regenerate native/src/decode/unicode_tables.rs (or fix text.rs) from: " + repr(expected)
    )
    if name == "space":  # `str.strip()` removes the same characters
        stripped = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and not chr(c).strip()]
        assert stripped == [c for low, high in expected for c in range(low, high + 1)]


def test_heads_are_cut_at_code_points() -> None:
    trace = "x.Y: " + "é" * TRACE_HEAD_CHARS
    raw = RawRecord(
        "connect-status",
        0,
        1,
        1,
        b"status-task-c-0",
        json.dumps({"state": "FAILED", "generation": 1, "trace": trace}).encode(),
    )
    (made,) = offsetd_native.decode_frame_events(encode_frame([raw]), TOPICS)
    assert made is not None
    assert json.loads(made)["error"]["trace_head"] == trace[:TRACE_HEAD_CHARS]
    assert_same_outcomes(encode_frame([raw]))


# -- recorded ----------------------------------------------------------------------------------

RECORDED = sorted(p.stem for p in FIXTURES.glob("*.json"))


@pytest.mark.parametrize("name", RECORDED)
@pytest.mark.parametrize("dlq_cut", [False, True])
def test_recorded_fixtures_decode_as_python(name: str, dlq_cut: bool) -> None:
    raw = fixture(name)
    topic = {"status": "connect-status", "dlq": "dlq-a", "offsets": "connect-offsets"}
    moved = dataclasses.replace(raw, topic=topic[name.partition("_")[0]])
    frame = encode_frame([moved], dlq_topics=frozenset({"dlq-a"} if dlq_cut else ()))
    ((what, reason),) = assert_same_outcomes(frame)
    expected = {
        "offsets": ("python", "not decoded here"),
        "dlq_without_context": ("malformed", "malformed"),  # no connector header
    }
    assert (what, reason) == expected.get(name, expected.get(name[:7], ("event", None)))


def test_recorded_fixtures_in_one_frame() -> None:
    topic = {"status": "connect-status", "dlq": "dlq-b", "offsets": "connect-offsets"}
    records = [
        dataclasses.replace(fixture(name), topic=topic[name.partition("_")[0]], offset=i)
        for i, name in enumerate(RECORDED * 2)
    ]
    outcomes = assert_same_outcomes(encode_frame(records), SHARED)
    assert sum(what == "event" for what, _ in outcomes) == 2 * len(
        [n for n in RECORDED if n.startswith(("status", "dlq_with_"))]
    )


def test_an_unknown_topic_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown topic kind"):
        offsetd_native.Decoder({"t": ("c", "nope")})


def test_a_frame_of_dlq_records_keeps_each_ones_owner() -> None:
    name = DLQ_HEADER_PREFIX + "connector.name"
    records = [
        RawRecord("dlq-a", 0, 1, 1, None, None, ((name, b"old"), (name, b"new"))),
        RawRecord("dlq-a", 0, 2, 1, None, None, ((name, b""),)),
        RawRecord("dlq-a", 0, 3, 1, None, None, ((name, b"\xff"), (name, b"ok"))),
    ]
    outcomes = offsetd_native.Decoder(TOPICS).frame_outcomes(encode_frame(records))
    assert [json.loads(made)["connector"] if made else reason for made, reason in outcomes] == [
        "new",
        "malformed",
        "malformed",
    ]
    assert_same_outcomes(encode_frame(records))
