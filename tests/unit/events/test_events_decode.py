"""offsetd.events decoders: raw connect-status, DLQ and connect-offsets records to events.

The fixtures in tests/fixtures/events/ are real records read with confluent-kafka from the local
stack (Kafka Connect 4.2.0): a FileStreamSink with a JsonConverter that failed on the value
`not json{`, its DLQ record with context headers, a DLQ without them, a stopped and a deleted
connector, a topic-tracking reset, MirrorSourceConnector and FileStreamSource offsets and an
offsets reset. Bytes are base64; each file has a `description`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.events.decode import (
    ClientHeaders,
    Malformed,
    RawRecord,
    parse_trace,
    raw_record,
)
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.models import (
    TRACE_HEAD_CHARS,
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    EventKind,
    RecordRef,
    SourceOffsetEvent,
    TaskStatusEvent,
    TopicStatusEvent,
    error_from_trace,
)
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "events"
CLUSTER = "local"
CONVERTER_ERROR = "org.apache.kafka.connect.errors.DataException"
JSON_PARSE_ERROR = "com.fasterxml.jackson.core.JsonParseException"


def fixture(name: str) -> RawRecord:
    doc: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())

    def unb64(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    return RawRecord(
        topic=doc["topic"],
        partition=doc["partition"],
        offset=doc["offset"],
        timestamp_ms=doc["timestamp_ms"],
        key=unb64(doc["key"]),
        value=unb64(doc["value"]),
        headers=tuple((name, unb64(value)) for name, value in doc["headers"]),
    )


def rec(
    key: bytes | str | None,
    value: bytes | str | dict[str, Any] | list[Any] | None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
    topic: str = "connect-status",
) -> RawRecord:
    """A synthetic record at connect-status-3@42 (or `topic`), written like Connect writes."""
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"))
    return RawRecord(
        topic=topic,
        partition=3,
        offset=42,
        timestamp_ms=1_700_000_000_000,
        key=key.encode() if isinstance(key, str) else key,
        value=value.encode() if isinstance(value, str) else value,
        headers=headers,
    )


def status(state: str = "RUNNING", trace: str | None = None, generation: Any = 7) -> dict[str, Any]:
    return {"state": state, "trace": trace, "worker_id": "10.0.0.5:8083", "generation": generation}


def dlq_headers(**overrides: str | None) -> tuple[tuple[str, bytes | None], ...]:
    """Context headers in the order DeadLetterQueueReporter writes them."""
    values: dict[str, str | None] = {
        "topic": "orders",
        "partition": "3",
        "offset": "1041",
        "connector.name": "my-sink-2",
        "task.id": "10",
        "stage": "VALUE_CONVERTER",
        "class.name": "org.apache.kafka.connect.json.JsonConverter",
        "exception.class.name": CONVERTER_ERROR,
        "exception.message": "Converting byte[] to Kafka Connect data failed",
        "exception.stacktrace": f"{CONVERTER_ERROR}: Converting byte[] to Kafka Connect data "
        "failed\n\tat org.apache.kafka.connect.json.JsonConverter.toConnectData(JsonConverter."
        f"java:349)\nCaused by: {JSON_PARSE_ERROR}: Unrecognized token 'not'\n\tat x.Y(Y.java:1)\n",
    }
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return tuple(
        (DLQ_HEADER_PREFIX + name, None if value is None else value.encode())
        for name, value in values.items()
        if value != "<absent>"
    )


# -- real records (fixtures) ---------------------------------------------------------------------


def test_real_connector_and_task_running() -> None:
    connector = decode_status(CLUSTER, fixture("status_connector_running"))
    assert isinstance(connector, ConnectorStatusEvent)
    assert (connector.connector, connector.state, connector.error) == (
        "poison-sink-2",
        "RUNNING",
        None,
    )
    assert connector.worker_id == "127.0.0.1:58971"
    assert connector.generation == 11
    assert connector.source.coordinates == "connect-status-1@6"
    assert connector.time_ms == 1795251891571
    task = decode_status(CLUSTER, fixture("status_task_running"))
    assert isinstance(task, TaskStatusEvent)
    assert (task.connector, task.task_id, task.state, task.generation) == (
        "poison-sink-2",
        0,
        "RUNNING",
        12,
    )


def test_real_failed_task_names_the_converter_exception_and_its_root_cause() -> None:
    raw = fixture("status_task_failed")
    event = decode_status(CLUSTER, raw)
    assert isinstance(event, TaskStatusEvent)
    assert (event.connector, event.task_id, event.state) == ("poison-sink-2", 0, "FAILED")
    assert event.error is not None
    assert event.error.exception_class == "org.apache.kafka.connect.errors.ConnectException"
    assert event.error.message == "Tolerance exceeded in error handler"
    # the deepest cause inside the converter: DataException <- SerializationException <- this
    assert event.error.root_cause_class == JSON_PARSE_ERROR
    assert event.error.root_cause_message is not None
    assert event.error.root_cause_message.startswith("Unrecognized token 'not'")
    assert f"Caused by: {CONVERTER_ERROR}" in event.error.trace_head
    trace = json.loads(raw.value or b"")["trace"]
    assert len(trace) > TRACE_HEAD_CHARS
    assert event.error.trace_head == trace[:TRACE_HEAD_CHARS]


def test_real_stopped_connector_and_tombstones() -> None:
    stopped = decode_status(CLUSTER, fixture("status_connector_stopped"))
    assert isinstance(stopped, ConnectorStatusEvent)
    assert (stopped.connector, stopped.state) == ("plain-dlq-sink-7", "STOPPED")
    gone = decode_status(CLUSTER, fixture("status_connector_tombstone"))
    assert isinstance(gone, ConnectorStatusEvent)
    assert (gone.connector, gone.state, gone.generation) == ("plain-dlq-sink-7", None, None)
    task = decode_status(CLUSTER, fixture("status_task_tombstone"))
    assert isinstance(task, TaskStatusEvent)
    assert (task.connector, task.task_id, task.state) == ("plain-dlq-sink-7", 0, None)


def test_real_topic_status_and_its_tombstone() -> None:
    used = decode_status(CLUSTER, fixture("status_topic"))
    assert isinstance(used, TopicStatusEvent)
    assert (used.connector, used.topic, used.task_id, used.deleted) == (
        "poison-sink-2",
        "orders-2d86c050",
        0,
        False,
    )
    assert used.discovered_ms == 1795251891673
    reset = decode_status(CLUSTER, fixture("status_topic_tombstone"))
    assert isinstance(reset, TopicStatusEvent)
    assert (reset.topic, reset.deleted, reset.task_id, reset.discovered_ms) == (
        "orders-2d86c050",
        True,
        None,
        None,
    )


def test_real_dlq_record_with_context_headers() -> None:
    event = decode_dlq(CLUSTER, fixture("dlq_with_context"))
    assert (event.connector, event.task_id) == ("poison-sink-2", 0)
    assert event.record == RecordRef(topic="orders-2d86c050", partition=0, offset=2)
    assert event.source.coordinates == "orders-2d86c050-dlq-0@0"
    assert event.error.stage == "VALUE_CONVERTER"
    assert event.error.executing_class == "org.apache.kafka.connect.json.JsonConverter"
    assert event.error.exception_class == CONVERTER_ERROR
    assert event.error.message == (
        "Converting byte[] to Kafka Connect data failed due to serialization error: "
    )
    assert event.error.root_cause_class == JSON_PARSE_ERROR
    assert len(event.headers) == 10
    assert all(name.startswith(DLQ_HEADER_PREFIX) for name in event.headers)
    stacktrace = event.headers[DLQ_HEADER_PREFIX + "exception.stacktrace"]
    assert stacktrace is not None
    assert event.error.trace_head == stacktrace[:TRACE_HEAD_CHARS]


def test_real_dlq_record_without_context_headers_needs_its_owner() -> None:
    raw = fixture("dlq_without_context")
    with pytest.raises(Malformed, match=r"no __connect\.errors\.connector\.name header") as caught:
        decode_dlq(CLUSTER, raw)
    assert caught.value.coordinates == raw.coordinates == "plain-1706f9f9-dlq-0@0"
    event = decode_dlq(CLUSTER, raw, connector="plain-dlq-sink-7")
    assert (event.connector, event.task_id, event.record) == ("plain-dlq-sink-7", None, None)
    assert event.error == ErrorInfo()
    assert event.headers == {}  # the original record's binary headers are not ours to decode


def test_real_source_offsets() -> None:
    mm2 = decode_offsets(CLUSTER, fixture("offsets_mm2_source"))
    assert mm2.connector == "east->west.MirrorSourceConnector"
    assert mm2.partition == {"cluster": "east", "partition": 0, "topic": "mm2-orders-0660ada8"}
    assert mm2.offset == {"offset": 2}
    file_source = decode_offsets(CLUSTER, fixture("offsets_file_source"))
    assert file_source.connector == "file-src-1"
    assert file_source.offset == {"position": 14}
    removed = decode_offsets(CLUSTER, fixture("offsets_tombstone"))
    assert (removed.partition, removed.offset) == (file_source.partition, None)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_decodes_to_a_valid_event(path: Path) -> None:
    """Events survive a round trip through their validating model (whichever way they were made)."""
    raw = fixture(path.stem)
    event: Any
    if path.stem.startswith("status"):
        event = decode_status(CLUSTER, raw)
    elif path.stem.startswith("dlq"):
        event = decode_dlq(CLUSTER, raw, connector="owner")
    else:
        event = decode_offsets(CLUSTER, raw)
    assert type(event).model_validate_json(event.model_dump_json()) == event
    assert event.connect_cluster == CLUSTER
    assert event.source.coordinates == raw.coordinates


# -- status keys and values ----------------------------------------------------------------------


def test_task_id_is_after_the_last_dash() -> None:
    event = decode_status(CLUSTER, rec("status-task-my-sink-2-10", status()))
    assert isinstance(event, TaskStatusEvent)
    assert (event.connector, event.task_id, event.kind) == ("my-sink-2", 10, EventKind.TASK_STATUS)
    assert (event.state, event.worker_id, event.generation) == ("RUNNING", "10.0.0.5:8083", 7)


@pytest.mark.parametrize(
    ("key", "connector", "task"),
    [
        ("status-task-a-0", "a", 0),
        ("status-task-a--1", "a-", 1),
        ("status-task-east->west.MirrorSourceConnector-3", "east->west.MirrorSourceConnector", 3),
        ("status-task-x:connector-y-2", "x:connector-y", 2),
    ],
)
def test_task_keys(key: str, connector: str, task: int) -> None:
    event = decode_status(CLUSTER, rec(key, status()))
    assert isinstance(event, TaskStatusEvent)
    assert (event.connector, event.task_id) == (connector, task)


def test_connector_key_takes_the_whole_rest_as_the_name() -> None:
    event = decode_status(CLUSTER, rec("status-connector-my-sink-2-10", status("PAUSED")))
    assert isinstance(event, ConnectorStatusEvent)
    assert (event.connector, event.state, event.kind) == (
        "my-sink-2-10",
        "PAUSED",
        EventKind.CONNECTOR_STATUS,
    )


def test_topic_key_splits_at_the_first_connector_separator() -> None:
    value = {
        "topic": {"name": "t.1", "connector": "a:connector-b", "task": 4, "discoverTimestamp": 9}
    }
    event = decode_status(CLUSTER, rec("status-topic-t.1:connector-a:connector-b", value))
    assert isinstance(event, TopicStatusEvent)
    assert (event.topic, event.connector, event.task_id, event.discovered_ms) == (
        "t.1",
        "a:connector-b",
        4,
        9,
    )


def test_tombstones() -> None:
    connector = decode_status(CLUSTER, rec("status-connector-c", None))
    task = decode_status(CLUSTER, rec("status-task-my-sink-2-10", None))
    topic = decode_status(CLUSTER, rec("status-topic-orders:connector-my-sink-2", None))
    assert isinstance(connector, ConnectorStatusEvent)
    assert connector.state is None
    assert isinstance(task, TaskStatusEvent)
    assert (task.connector, task.task_id, task.state) == ("my-sink-2", 10, None)
    assert isinstance(topic, TopicStatusEvent)
    assert (topic.topic, topic.connector, topic.deleted) == ("orders", "my-sink-2", True)


def test_extra_fields_are_ignored_and_trace_only_matters_when_failed() -> None:
    value = status("UNASSIGNED", trace="java.lang.IllegalStateException: old") | {"version": "4.2"}
    event = decode_status(CLUSTER, rec("status-task-a-0", value))
    assert isinstance(event, TaskStatusEvent)
    assert (event.state, event.error) == ("UNASSIGNED", None)


def test_json_may_be_padded_with_whitespace() -> None:
    padded = b' \n{"state":"PAUSED","generation":3}\r\n '
    event = decode_status(CLUSTER, rec("status-connector-c", padded))
    assert isinstance(event, ConnectorStatusEvent)
    assert (event.state, event.generation) == ("PAUSED", 3)


def test_failed_without_a_trace_has_no_error() -> None:
    event = decode_status(CLUSTER, rec("status-connector-c", status("FAILED")))
    assert isinstance(event, ConnectorStatusEvent)
    assert (event.state, event.error) == ("FAILED", None)


def test_failed_connector_gets_the_exception_and_root_cause() -> None:
    trace = (
        "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to "
        "unrecoverable exception.\n\tat a.B.c(B.java:1)\n"
        "Caused by: java.net.SocketTimeoutException: connect timed out\n\tat d.E(E.java:2)\n"
    )
    event = decode_status(CLUSTER, rec("status-connector-c", status("FAILED", trace)))
    assert isinstance(event, ConnectorStatusEvent)
    assert event.error == ErrorInfo(
        exception_class="org.apache.kafka.connect.errors.ConnectException",
        message="Exiting WorkerSinkTask due to unrecoverable exception.",
        root_cause_class="java.net.SocketTimeoutException",
        root_cause_message="connect timed out",
        trace_head=trace,
    )


# -- traces --------------------------------------------------------------------------------------


def test_parse_trace_agrees_with_models_error_from_trace_on_real_traces() -> None:
    trace = json.loads(fixture("status_task_failed").value or b"")["trace"]
    dlq = decode_dlq(CLUSTER, fixture("dlq_with_context"))
    stacktrace = dlq.headers[DLQ_HEADER_PREFIX + "exception.stacktrace"]
    for text in (trace, stacktrace, "java.lang.NullPointerException", "", None):
        assert parse_trace(text) == error_from_trace(text)


JAVA_NAME = st.from_regex(r"[a-z]{1,6}(\.[a-z]{1,6}){0,3}\.[A-Z][A-Za-z$]{0,10}", fullmatch=True)
MESSAGE = st.text(st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=30).map(
    str.strip
)


@st.composite
def java_traces(draw: st.DrawFn) -> str:
    """printStackTrace-shaped text: exception, frames, causes (non-empty messages or none)."""

    def header(name: str, message: str) -> str:
        return f"{name}: {message}" if message else name

    lines = [header(draw(JAVA_NAME), draw(MESSAGE))]
    for _ in range(draw(st.integers(0, 4))):
        lines += ["\tat a.B.c(B.java:1)"] * draw(st.integers(0, 60))
        lines.append("Caused by: " + header(draw(JAVA_NAME), draw(MESSAGE)))
    return "\n".join(lines) + "\n"


@given(java_traces())
@settings(max_examples=300, deadline=None)  # a loaded machine takes 200 ms for one long trace
def test_parse_trace_agrees_with_models_error_from_trace(trace: str) -> None:
    assert parse_trace(trace) == error_from_trace(trace)


def test_parse_trace_reads_only_the_head() -> None:
    frames = "\tat a.B.c(B.java:1)\n" * 400
    trace = f"x.Outer: top\n{frames}Caused by: y.Hidden: beyond the head\n"
    error = parse_trace(trace)
    assert error is not None
    assert len(error.trace_head) == TRACE_HEAD_CHARS
    assert (error.root_cause_class, error.root_cause_message) == ("x.Outer", "top")


def test_parse_trace_empty_cause_message_does_not_swallow_the_next_line() -> None:
    """An empty `Caused by:` message stays empty in both parsers (it once took the next line)."""
    trace = "x.Outer: top\nCaused by: y.Inner: \n\tat a.B.c(B.java:1)\n"
    error = parse_trace(trace)
    assert error is not None
    assert (error.root_cause_class, error.root_cause_message) == ("y.Inner", None)
    legacy = error_from_trace(trace)
    assert legacy is not None
    assert (legacy.root_cause_class, legacy.root_cause_message) == ("y.Inner", None)


def test_parse_trace_handles_windows_line_ends() -> None:
    error = parse_trace("x.Outer: top\r\n\tat a.B(B.java:1)\r\nCaused by: y.Inner\r\n")
    assert error is not None
    assert (error.exception_class, error.message) == ("x.Outer", "top")
    assert (error.root_cause_class, error.root_cause_message) == ("y.Inner", None)


# -- DLQ -----------------------------------------------------------------------------------------


def test_dlq_with_context_headers() -> None:
    raw = rec(b"k", b"not json{", (*dlq_headers(), ("trace-id", b"\x00\xff")), topic="dlq")
    event = decode_dlq(CLUSTER, raw)
    assert isinstance(event, DlqRecordEvent)
    assert (event.connector, event.task_id, event.kind) == ("my-sink-2", 10, EventKind.DLQ_RECORD)
    assert event.record == RecordRef(topic="orders", partition=3, offset=1041)
    assert event.error.exception_class == CONVERTER_ERROR
    assert event.error.message == "Converting byte[] to Kafka Connect data failed"
    assert (event.error.root_cause_class, event.error.root_cause_message) == (
        JSON_PARSE_ERROR,
        "Unrecognized token 'not'",
    )
    assert (event.error.stage, event.error.executing_class) == (
        "VALUE_CONVERTER",
        "org.apache.kafka.connect.json.JsonConverter",
    )
    assert set(event.headers) == {name for name, _ in dlq_headers()}
    assert event.headers[DLQ_HEADER_PREFIX + "offset"] == "1041"


def test_dlq_owner_from_the_header_wins_over_the_argument() -> None:
    event = decode_dlq(CLUSTER, rec(None, None, dlq_headers(), topic="dlq"), connector="other")
    assert event.connector == "my-sink-2"


def test_dlq_without_a_stacktrace_uses_the_exception_headers_as_root_cause() -> None:
    headers = dlq_headers(exception_stacktrace="<absent>")
    error = decode_dlq(CLUSTER, rec(None, None, headers, topic="dlq")).error
    assert (error.root_cause_class, error.root_cause_message) == (
        CONVERTER_ERROR,
        "Converting byte[] to Kafka Connect data failed",
    )
    assert error.trace_head == ""


def test_dlq_without_exception_headers_reads_the_stacktrace_first_line() -> None:
    headers = dlq_headers(exception_class_name="<absent>", exception_message=None)
    event = decode_dlq(CLUSTER, rec(None, None, headers, topic="dlq"))
    assert event.headers[DLQ_HEADER_PREFIX + "exception.message"] is None
    assert (event.error.exception_class, event.error.message) == (
        CONVERTER_ERROR,
        "Converting byte[] to Kafka Connect data failed",
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"offset": "<absent>"},
        {"topic": ""},
        {"partition": "x"},
        {"offset": "-1"},
        {"offset": "1e3"},
        {"partition": "\u0663"},  # an Arabic-Indic 3: Java never writes it
        {"offset": "9" * 20},
    ],
)
def test_dlq_record_needs_all_three_numeric_coordinates(overrides: dict[str, str]) -> None:
    event = decode_dlq(CLUSTER, rec(None, None, dlq_headers(**overrides), topic="dlq"))
    assert event.record is None
    assert event.connector == "my-sink-2"


def test_dlq_duplicate_headers_last_wins() -> None:
    headers = ((DLQ_HEADER_PREFIX + "task.id", b"1"), *dlq_headers())
    assert decode_dlq(CLUSTER, rec(None, None, headers, topic="dlq")).task_id == 10


def test_dlq_huge_stacktrace_is_kept_but_only_its_head_is_parsed() -> None:
    frames = "\tat a.B.c(B.java:1)\n" * 50_000
    trace = f"x.Outer: top\n{frames}Caused by: y.Deep: far away\n"
    event = decode_dlq(
        CLUSTER, rec(None, None, dlq_headers(exception_stacktrace=trace), topic="dlq")
    )
    assert event.headers[DLQ_HEADER_PREFIX + "exception.stacktrace"] == trace
    assert len(event.error.trace_head) == TRACE_HEAD_CHARS
    assert event.error.root_cause_class == CONVERTER_ERROR  # no cause within the head


# -- offsets -------------------------------------------------------------------------------------


def test_offsets_key_and_value() -> None:
    key = '["file-src",{"filename":"/data/a.txt","n":1.5,"ok":true,"none":null}]'
    event = decode_offsets(CLUSTER, rec(key, {"position": 15000}, topic="connect-offsets"))
    assert isinstance(event, SourceOffsetEvent)
    assert event.connector == "file-src"
    assert event.partition == {"filename": "/data/a.txt", "n": 1.5, "ok": True, "none": None}
    assert event.offset == {"position": 15000}
    assert event.kind == EventKind.SOURCE_OFFSET


# -- malformed records ---------------------------------------------------------------------------

STATUS_CASES: list[tuple[bytes | None, bytes | None, str]] = [
    (None, b"{}", "has no key"),
    (b"status-connector-\xff", b"{}", "status key is not valid UTF-8 (byte 17)"),
    (b"status-connectors-a", b"{}", "unknown status key prefix: 'status-connectors-a'"),
    (b"status-bogus-" + b"x" * 500, b"{}", "unknown status key prefix: 'status-bogus-xxx"),
    (b"status-connector-", b"{}", "empty connector name"),
    (b"status-task-a", b"{}", "task status key is not status-task-<name>-<id>"),
    (b"status-task--0", b"{}", "task status key is not status-task-<name>-<id>"),
    (b"status-task-a-x", b"{}", "task id in the status key is not a number"),
    (b"status-task-a-+1", b"{}", "task id in the status key is not a number"),
    (b"status-task-a-2147483648", b"{}", "task id in the status key is not a number"),
    (b"status-task-a-" + b"9" * 5000, b"{}", "task id in the status key is not a number"),
    (b"status-task-a-0", b"\xc3(", "status value is not valid UTF-8"),
    (
        b"status-task-a-0",
        b"not json{",
        "status value is not valid JSON (Expecting value at char 0)",
    ),
    (b"status-task-a-0", b'{"state":"RUNNING"', "status value is not valid JSON"),
    (b"status-task-a-0", b'{"state":"RUNNING","generation":1} x', "(Extra data at char 35)"),
    (b"status-task-a-0", b"", "status value is not valid JSON (Expecting value at char 0)"),
    (b"status-task-a-0", b'{"generation":NaN}', "NaN is not a JSON number"),
    (b"status-task-a-0", b"[" * 100_000, "status value is not valid JSON"),
    (b"status-task-a-0", b'{"generation":' + b"1" * 5000 + b"}", "not valid JSON"),
    (b"status-task-a-0", b'["RUNNING"]', "status value is an array, not an object"),
    (b"status-task-a-0", b'{"state":"running","generation":1}', "not a known state: \"'running'\""),
    (b"status-task-a-0", b'{"state":null,"generation":1}', "'state' is not a known state"),
    (b"status-task-a-0", b'{"state":"RUNNING"}', "'generation' is missing, not an integer"),
    (
        b"status-task-a-0",
        b'{"state":"RUNNING","generation":"7"}',
        "'generation' is a string, not an integer",
    ),
    (b"status-task-a-0", b'{"state":"RUNNING","generation":true}', "'generation' is a boolean"),
    (b"status-task-a-0", b'{"state":"RUNNING","generation":7.0}', "'generation' is a number"),
    (
        b"status-task-a-0",
        b'{"state":"FAILED","generation":1,"trace":5}',
        "'trace' is an integer, not a string",
    ),
    (
        b"status-task-a-0",
        b'{"state":"FAILED","generation":1,"worker_id":[]}',
        "'worker_id' is an array",
    ),
    (b"status-topic-t", b"{}", "topic status key is not status-topic-<topic>:connector-<name>"),
    (b"status-topic-:connector-c", b"{}", "topic status key is not"),
    (b"status-topic-t:connector-", b"{}", "topic status key is not"),
    (b"status-topic-t:connector-c", b'{"name":"t"}', 'not an object {"topic": {...}}'),
    (b"status-topic-t:connector-c", b'{"topic":{"task":"0","discoverTimestamp":1}}', "integers"),
    (b"status-topic-t:connector-c", b'{"topic":{"task":0}}', "integers"),
]


@pytest.mark.parametrize(("key", "value", "reason"), STATUS_CASES)
def test_malformed_status(key: bytes | None, value: bytes | None, reason: str) -> None:
    with pytest.raises(Malformed) as caught:
        decode_status(CLUSTER, rec(key, value))
    assert reason in caught.value.reason
    assert (caught.value.topic, caught.value.partition, caught.value.offset) == (
        "connect-status",
        3,
        42,
    )
    assert str(caught.value).startswith("connect-status-3@42: ")
    assert len(str(caught.value)) < 200  # never the payload


DLQ_CASES: list[tuple[dict[str, str | None], str]] = [
    ({"connector.name": "<absent>"}, "no __connect.errors.connector.name header"),
    ({"connector.name": ""}, "no __connect.errors.connector.name header"),
    ({"task.id": "x"}, "__connect.errors.task.id is not a number in 0..2147483647: 'x'"),
    ({"task.id": "-1"}, "__connect.errors.task.id is not a number"),
]


@pytest.mark.parametrize(("overrides", "reason"), DLQ_CASES)
def test_malformed_dlq(overrides: dict[str, str | None], reason: str) -> None:
    with pytest.raises(Malformed) as caught:
        decode_dlq(CLUSTER, rec(b"k", b"v", dlq_headers(**overrides), topic="dlq"))
    assert reason in caught.value.reason
    assert caught.value.coordinates == "dlq-3@42"


def test_malformed_dlq_header_is_not_utf8() -> None:
    headers = ((DLQ_HEADER_PREFIX + "stage", b"\xffVALUE"), *dlq_headers())
    with pytest.raises(Malformed, match=r"header __connect.errors.stage is not valid UTF-8"):
        decode_dlq(CLUSTER, rec(b"k", b"v", headers, topic="dlq"))


@pytest.mark.parametrize("at", [0, 3, 9])
def test_malformed_dlq_names_its_first_header_that_is_not_utf8(at: int) -> None:
    headers = list(dlq_headers())
    name = headers[at][0]
    headers[at] = (name, b"ok \xc3(")
    headers.append((DLQ_HEADER_PREFIX + "stage", b"\xff"))  # a later one: not named
    headers.insert(0, ("not-context", b"\xff"))  # not read at all
    with pytest.raises(Malformed) as caught:
        decode_dlq(CLUSTER, rec(b"k", b"v", tuple(headers), topic="dlq"))
    assert caught.value.reason == f"header {name} is not valid UTF-8 (byte 3)"
    assert caught.value.coordinates == "dlq-3@42"


OFFSETS_CASES: list[tuple[bytes | None, bytes | None, str]] = [
    (None, b"{}", "offsets record has no key"),
    (b'["c",{"p":1}', b"{}", "offsets key is not valid JSON"),
    (b'{"c":{"p":1}}', b"{}", "offsets key is not a JSON array"),
    (b'["c"]', b"{}", "offsets key is not a JSON array"),
    (b'["",{"p":1}]', b"{}", "offsets key is not a JSON array"),
    (b'[1,{"p":1}]', b"{}", "offsets key is not a JSON array"),
    (b'["c",null]', b"{}", "offsets key partition is null, not an object"),
    (b'["c",{"p":[1]}]', b"{}", "offsets key partition field 'p' is an array, not a scalar"),
    (b'["c",{"p":1}]', b"[1]", "offsets value is an array, not an object"),
    (b'["c",{"p":1}]', b'{"o":{"x":1}}', "offsets value field 'o' is an object, not a scalar"),
    (b'["c",{"p":1}]', b'{"o":Infinity}', "Infinity is not a JSON number"),
    (b'["c",{"p":1}]', b"\xfe\xff", "offsets value is not valid UTF-8"),
]


@pytest.mark.parametrize(("key", "value", "reason"), OFFSETS_CASES)
def test_malformed_offsets(key: bytes | None, value: bytes | None, reason: str) -> None:
    with pytest.raises(Malformed) as caught:
        decode_offsets(CLUSTER, rec(key, value, topic="connect-offsets"))
    assert reason in caught.value.reason
    assert caught.value.coordinates == "connect-offsets-3@42"


def test_malformed_never_echoes_the_payload_and_survives_pickling() -> None:
    secret = b"password=hunter2 " * 1000
    with pytest.raises(Malformed) as caught:
        decode_status(CLUSTER, rec(b"status-connector-c", b"{" + secret))
    assert "hunter2" not in str(caught.value)
    with pytest.raises(Malformed) as caught:
        decode_status(CLUSTER, rec(b"status-weird-" + secret, b"{}"))
    assert str(caught.value).count("hunter2") <= 1
    assert str(caught.value).endswith("...")
    clone = pickle.loads(pickle.dumps(caught.value))  # noqa: S301 - our own object
    assert (clone.reason, clone.coordinates, str(clone)) == (
        caught.value.reason,
        caught.value.coordinates,
        str(caught.value),
    )


# -- fuzzing: anything but an event raises Malformed, never something else -----------------------

OPTIONAL_BYTES = st.none() | st.binary(max_size=200)
HEADERS = st.lists(
    st.tuples(
        st.sampled_from([DLQ_HEADER_PREFIX + n for n in ("topic", "partition", "offset")])
        | st.sampled_from([DLQ_HEADER_PREFIX + n for n in ("connector.name", "task.id", "stage")])
        | st.sampled_from([DLQ_HEADER_PREFIX + "exception.stacktrace", "other"])
        | st.text(max_size=20),
        OPTIONAL_BYTES,
    ),
    max_size=8,
).map(tuple)
KEY_PREFIXES = st.sampled_from(
    [b"", b"status-connector-", b"status-task-", b"status-task-a-", b"status-topic-", b'["c",']
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["state", "generation", "trace", "worker_id", "topic", "task", "p"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=10,
)


def _decode_or_malformed(raw: RawRecord) -> None:
    where: set[str] = set()
    for decode in (decode_status, decode_offsets, decode_dlq):
        try:
            decode(CLUSTER, raw)
        except Malformed as exc:
            where.add(exc.coordinates)
    assert where <= {raw.coordinates}


@given(key=OPTIONAL_BYTES, value=OPTIONAL_BYTES, headers=HEADERS, prefix=KEY_PREFIXES)
@settings(max_examples=500)
def test_random_bytes_raise_only_malformed(
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    prefix: bytes,
) -> None:
    _decode_or_malformed(rec(None if key is None else prefix + key, value, headers))


@given(
    key=st.sampled_from(["status-connector-c", "status-task-c-1", "status-topic-t:connector-c"])
    | JSON_VALUES.map(lambda v: json.dumps(["c", v])),
    value=JSON_VALUES,
)
@settings(max_examples=500)
def test_random_json_shapes_raise_only_malformed(key: str, value: Any) -> None:
    _decode_or_malformed(rec(key, json.dumps(value)))


# -- raw_record ----------------------------------------------------------------------------------


class FakeMessage:
    def __init__(self, timestamp: tuple[int, int], headers: ClientHeaders | None = None) -> None:
        self._timestamp, self._headers = timestamp, headers

    def topic(self) -> str | None:
        return "connect-status"

    def partition(self) -> int | None:
        return 2

    def offset(self) -> int | None:
        return 7

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def key(self) -> bytes | None:
        return b"status-connector-c"

    def value(self) -> bytes | None:
        return None

    def headers(self) -> ClientHeaders | None:
        return self._headers


def test_raw_record_from_a_consumed_message() -> None:
    raw = raw_record(FakeMessage((1, 1_700_000_000_000), [("h", None), ("h", b"x")]))
    assert raw == RawRecord(
        "connect-status",
        2,
        7,
        1_700_000_000_000,
        b"status-connector-c",
        None,
        (("h", None), ("h", b"x")),
    )
    assert raw.coordinates == "connect-status-2@7"
    assert raw_record(FakeMessage((0, 0))).timestamp_ms == -1  # TIMESTAMP_NOT_AVAILABLE
    assert raw_record(FakeMessage((0, 0), {"a": "text", "b": None})).headers == (
        ("a", b"text"),
        ("b", None),
    )


def test_a_remembered_status_value_decodes_as_the_first_time() -> None:
    raw = fixture("status_task_running")
    first = decode_status("west", raw)
    again = decode_status("west", dataclasses.replace(raw, offset=raw.offset + 1))
    assert again.model_dump(exclude={"source"}) == first.model_dump(exclude={"source"})
    assert again.source.offset == raw.offset + 1
    bad = dataclasses.replace(raw, value=b'{"state":"RUNNING"}')
    for _ in range(2):  # a malformed value is never remembered: rejected every time
        with pytest.raises(Malformed, match="generation"):
            decode_status("west", bad)
