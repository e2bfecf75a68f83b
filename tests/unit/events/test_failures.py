"""offsetd's classification of Connect failures (offsetd.events.failures), on real traces.

The fixtures under tests/fixtures/events/ are records read from the local stack (the status
topic and a DLQ) after failures provoked there; `traces/` holds the traces of more failures
provoked on the stack, as Connect wrote them to the status topic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetd.events.decode import parse_trace
from offsetd.events.dlq import decode_dlq
from offsetd.events.failures import CATALOG, FAILURE_CLASSES, classify, exception_chain
from offsetd.events.models import ErrorInfo, TaskStatusEvent
from offsetd.events.status import decode_status
from tests.unit.events.test_events_decode import fixture

TOLERANCE = "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler"
TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def error_of(trace: str) -> ErrorInfo:
    error = parse_trace(trace)
    assert error is not None
    return error


def test_a_converter_failure_read_from_the_status_topic_is_a_poison_record() -> None:
    event = decode_status("local", fixture("status_task_failed"))
    assert isinstance(event, TaskStatusEvent)
    found = classify(event.error)
    assert found.failure == "poison_record"
    assert found.because == "com.fasterxml.jackson.core.JsonParseException"  # the deepest cause


def test_a_dlq_record_with_its_context_is_a_poison_record() -> None:
    event = decode_dlq("local", fixture("dlq_with_context"), connector="owner")
    assert classify(event.error).failure == "poison_record"


def test_the_chain_is_outer_first_and_once_each() -> None:
    event = decode_status("local", fixture("status_task_failed"))
    assert isinstance(event, TaskStatusEvent)
    assert event.error is not None
    assert exception_chain(event.error) == (
        "org.apache.kafka.connect.errors.ConnectException",
        "org.apache.kafka.connect.errors.DataException",
        "org.apache.kafka.common.errors.SerializationException",
        "com.fasterxml.jackson.core.JsonParseException",
    )


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.txt")), ids=lambda p: p.stem)
def test_every_captured_trace_has_the_class_its_name_says(path: Path) -> None:
    """`<failure class>--<what was provoked>.txt`: the class is in the file name."""
    expected = path.stem.split("--")[0]
    assert expected in FAILURE_CLASSES
    assert classify(error_of(path.read_text())).failure == expected


@pytest.mark.parametrize(
    ("trace", "failure", "because"),
    [
        (  # the schema registry is down: the converter's DataException is not the record's fault
            f"{TOLERANCE}\n"
            "Caused by: org.apache.kafka.connect.errors.DataException: Failed to deserialize data"
            " for topic orders to Avro\n"
            "Caused by: org.apache.kafka.common.errors.SerializationException: Error retrieving"
            " Avro value schema for id 7\n"
            "Caused by: java.net.ConnectException: Connection refused\n",
            "transient",
            "java.net.ConnectException",
        ),
        (  # an authentication failure surfacing as a timeout is a person's problem
            "org.apache.kafka.connect.errors.ConnectException: flush failed\n"
            "Caused by: org.apache.kafka.common.errors.TimeoutException: timed out\n"
            "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: Authentication"
            " failed during authentication due to invalid credentials with SASL mechanism"
            " SCRAM-SHA-512\n",
            "configuration",
            "org.apache.kafka.common.errors.SaslAuthenticationException",
        ),
        (
            "org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from"
            " producer send callback\n"
            "Caused by: org.apache.kafka.common.errors.RecordTooLargeException: The message is"
            " 2000123 bytes when serialized which is larger than 1048576\n",
            "poison_record",
            "org.apache.kafka.common.errors.RecordTooLargeException",
        ),
        (
            "org.apache.kafka.connect.errors.ConnectException: java.sql.SQLException: I/O error\n"
            "Caused by: java.sql.SQLException: I/O error\n"
            "Caused by: java.net.SocketTimeoutException: Read timed out\n",
            "transient",
            "java.net.SocketTimeoutException",
        ),
        (
            "org.apache.kafka.connect.errors.ConnectException: java.sql.BatchUpdateException\n"
            "Caused by: java.sql.SQLIntegrityConstraintViolationException: Duplicate entry '7'\n",
            "poison_record",
            "java.sql.SQLIntegrityConstraintViolationException",
        ),
        (
            "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access"
            " topics: [orders]\n",
            "configuration",
            "org.apache.kafka.common.errors.TopicAuthorizationException",
        ),
        (
            "org.apache.kafka.connect.errors.ConnectException: Failed to find any class that"
            " implements Connector\n"
            "Caused by: java.lang.ClassNotFoundException: com.example.Missing\n",
            "configuration",
            "java.lang.ClassNotFoundException",
        ),
        (
            f"{TOLERANCE}\nCaused by: com.example.CustomTransformException: bad field\n",
            "poison_record",
            "Tolerance exceeded in error handler",
        ),
        (
            "java.lang.IllegalStateException: something odd\n",
            "unknown",
            "no known exception class in the trace",
        ),
    ],
    ids=[
        "registry-down",
        "auth-under-timeout",
        "record-too-large",
        "jdbc-timeout",
        "jdbc-duplicate",
        "topic-acl",
        "missing-plugin",
        "tolerance-exceeded",
        "unknown",
    ],
)
def test_documented_failures(trace: str, failure: str, because: str) -> None:
    found = classify(error_of(trace))
    assert (found.failure, found.because) == (failure, because)


def test_no_error_is_unknown() -> None:
    assert classify(None).failure == "unknown"


def test_every_catalog_entry_names_a_class_and_a_known_failure() -> None:
    for name, failure in CATALOG.items():
        assert failure in FAILURE_CLASSES
        assert failure != "unknown"  # unknown is what the catalog does not know
        assert "." in name, name


def test_a_cut_trace_still_uses_its_root_cause() -> None:
    """The trace head is bounded: the root cause Connect reported still decides."""
    error = ErrorInfo(
        exception_class="org.apache.kafka.connect.errors.ConnectException",
        message="Tolerance exceeded in error handler",
        root_cause_class="java.net.SocketTimeoutException",
        trace_head="org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded",
    )
    assert classify(error).failure == "transient"
