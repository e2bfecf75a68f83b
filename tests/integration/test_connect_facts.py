"""What Connect really writes when a sink task dies on a poison record, read through our decoders.

One FileStreamSink (JsonConverter, `errors.tolerance=none`, a DLQ with context headers) is fed
five good records, which it commits; then, in one produce call, three good records, the poison
record and three more good ones, so that they reach the task in one batch. Everything asserted
here is read from the real topics (connect-status, the DLQ, the sink's consumer group) and
decoded with offsetd.events, not taken from the REST API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.devstack.stack import StackInfo
from offsetd.events.decode import raw_record
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.models import DlqRecordEvent, RecordRef, TaskStatusEvent
from offsetd.events.status import decode_status
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

CLUSTER = "local"
STATUS_PARTITIONS = 5
POISON = b"not json{"
CONNECT_EXCEPTION = "org.apache.kafka.connect.errors.ConnectException"
DATA_EXCEPTION = "org.apache.kafka.connect.errors.DataException"
JSON_PARSE_EXCEPTION = "com.fasterxml.jackson.core.JsonParseException"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


def _good(start: int, n: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(start, start + n)]


def _create_dlq(bootstrap: str, name: str) -> None:
    """A DLQ whose record timestamps are the broker's append time (the records themselves keep
    the original record's CreateTime), so they can be ordered against connect-status records."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result(timeout=30)


def _sink(connect: ConnectClient, name: str, topic: str, dlq: str, out: Path) -> None:
    connect.create(
        name,
        dlq_json_file_sink(topic, out, dlq),
    )


def _task_events(west: str, status_topic: str, name: str) -> list[TaskStatusEvent]:
    """Every status record of task 0 of `name`, decoded, in log order (one key, one partition)."""
    key = f"status-task-{name}-0".encode()
    events = []
    for partition in range(STATUS_PARTITIONS):
        for msg in consume_all(west, status_topic, partition):
            if msg.key() == key:
                event = decode_status(CLUSTER, raw_record(msg))
                assert isinstance(event, TaskStatusEvent)
                events.append(event)
    return events


def _failed(events: list[TaskStatusEvent]) -> list[TaskStatusEvent]:
    return [e for e in events if e.state == "FAILED"]


def _dlq_events(west: str, dlq: str) -> list[DlqRecordEvent]:
    return [decode_dlq(CLUSTER, raw_record(msg)) for msg in consume_all(west, dlq)]


def _committed(connect: ConnectClient, name: str) -> int | None:
    """The sink group's committed offset for partition 0 (REST reads the consumer group)."""
    entries = connect.offsets(name)["offsets"]
    return entries[0]["offset"]["kafka_offset"] if entries else None


@dataclass
class Scenario:
    name: str
    topic: str
    dlq: str
    status_topic: str
    out: Path
    poison_offset: int
    batch: list[int]
    committed_before: int


@pytest.fixture(scope="module")
def failed_sink(
    connect: ConnectClient, west: str, stack: StackInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    name = f"{unique('facts')}-sink-2"  # dashes and digits, as real names have
    topic, dlq = unique("facts-orders"), unique("facts-dlq")
    out = tmp_path_factory.mktemp("facts") / "sink.out"
    create_topic(west, topic)
    _create_dlq(west, dlq)
    assert produce(west, topic, _good(0, 5)) == [0, 1, 2, 3, 4]
    _sink(connect, name, topic, dlq, out)
    connect.wait_running(name)
    wait_for("the first five records committed", lambda: _committed(connect, name) == 5)
    # One produce call: the records share a producer batch, hence one fetch and one poll.
    batch = produce(west, topic, [*_good(5, 3), (b"poison", POISON), *_good(9, 3)])
    assert batch == list(range(5, 12))
    status_topic = stack.connect["status.storage.topic"]
    wait_for("a FAILED task status", lambda: _failed(_task_events(west, status_topic, name)))
    wait_for("a DLQ record", lambda: _dlq_events(west, dlq))
    yield Scenario(name, topic, dlq, status_topic, out, 8, batch, 5)
    connect.delete(name)


def test_dlq_record_is_written_before_the_task_is_reported_failed(
    failed_sink: Scenario, west: str
) -> None:
    s = failed_sink
    (dlq,) = _dlq_events(west, s.dlq)
    assert (dlq.connector, dlq.task_id) == (s.name, 0)
    assert dlq.record == RecordRef(topic=s.topic, partition=0, offset=s.poison_offset)
    assert dlq.error.stage == "VALUE_CONVERTER"
    assert dlq.error.executing_class == JSON_CONVERTER
    assert dlq.error.exception_class == DATA_EXCEPTION  # what the converter threw
    assert dlq.error.root_cause_class == JSON_PARSE_EXCEPTION
    assert dlq.headers[DLQ_HEADER_PREFIX + "offset"] == str(s.poison_offset)

    (failed,) = _failed(_task_events(west, s.status_topic, s.name))
    assert failed.error is not None
    assert failed.error.exception_class == CONNECT_EXCEPTION
    assert failed.error.message == "Tolerance exceeded in error handler"
    assert failed.error.root_cause_class == JSON_PARSE_EXCEPTION
    assert f"\nCaused by: {DATA_EXCEPTION}: " in failed.error.trace_head
    # The trace never names the record (reference §6): only the DLQ does.
    assert s.topic not in failed.error.trace_head
    # Broker append time of the DLQ record vs. Connect's send time of the FAILED status.
    assert dlq.source.timestamp_ms <= failed.source.timestamp_ms, (
        dlq.source.timestamp_ms,
        failed.source.timestamp_ms,
    )


def test_committed_offset_is_the_start_of_the_failed_batch(
    failed_sink: Scenario, connect: ConnectClient
) -> None:
    s = failed_sink
    committed = _committed(connect, s.name)
    assert committed == s.committed_before == s.batch[0]
    assert committed < s.poison_offset
    # The good records before the poison one were converted but never reached put():
    # FileStreamSink writes each value's toString(), a java.util.Map here.
    assert s.out.read_text().splitlines() == [f"{{n={i}}}" for i in range(5)]


def test_each_restart_fails_again_with_a_new_status_and_dlq_record(
    failed_sink: Scenario, connect: ConnectClient, west: str
) -> None:
    s = failed_sink
    path = connect.path(s.name, "/restart")
    for attempt in (1, 2):
        failures = len(_failed(_task_events(west, s.status_topic, s.name)))
        dlq_records = len(_dlq_events(west, s.dlq))
        response = connect.http.post(path, params={"includeTasks": "true", "onlyFailed": "true"})
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        assert [t["state"] for t in body["tasks"]] == ["RESTARTING"]

        def failed_again(before: int = failures) -> list[TaskStatusEvent] | None:
            events = _task_events(west, s.status_topic, s.name)
            return events if len(_failed(events)) > before else None

        events = wait_for(f"FAILED again after restart {attempt}", failed_again)
        assert len(_failed(events)) == failures + 1
        newest = _failed(events)[-1]
        assert newest.error is not None
        assert newest.error.root_cause_class == JSON_PARSE_EXCEPTION

        def dlq_again(before: int = dlq_records) -> list[DlqRecordEvent] | None:
            events = _dlq_events(west, s.dlq)
            return events if len(events) > before else None

        dlq = wait_for(f"a new DLQ record after restart {attempt}", dlq_again)
        assert len(dlq) == dlq_records + 1
        assert dlq[-1].record == RecordRef(topic=s.topic, partition=0, offset=s.poison_offset)
        assert _committed(connect, s.name) == s.batch[0]
    states = [e.state for e in _task_events(west, s.status_topic, s.name)]
    assert states.count("FAILED") == 3
    assert states.count("RESTARTING") >= 2


def test_every_connect_status_record_decodes(stack: StackInfo, west: str) -> None:
    """Whatever this stack's Connect and MM2 wrote so far is never Malformed."""
    topic = stack.connect["status.storage.topic"]
    kinds: dict[str, int] = {}
    for partition in range(STATUS_PARTITIONS):
        for msg in consume_all(west, topic, partition):
            event = decode_status(CLUSTER, raw_record(msg))
            kinds[event.kind] = kinds.get(event.kind, 0) + 1
    assert kinds.get("connector_status")
    assert kinds.get("task_status")


def test_a_replayed_dlq_record_carries_both_contexts_and_the_last_one_is_current(
    connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    """A record sent back from a DLQ keeps its old `__connect.errors.*` headers; Connect 4.2
    appends the new context after them (some older DeadLetterQueueReporter versions refused to
    add a header already present, and kept only the stale one). The decoder takes the last."""
    name = f"{unique('facts-replay')}-1"
    topic, dlq = unique("facts-replay"), unique("facts-replay-dlq")
    create_topic(west, topic)
    _create_dlq(west, dlq)
    stale = {"topic": "old-topic", "partition": "9", "offset": "999", "connector.name": "old-sink"}
    headers: list[tuple[str, str | bytes | None]] = [
        (DLQ_HEADER_PREFIX + k, v.encode()) for k, v in stale.items()
    ]
    producer = Producer({"bootstrap.servers": west})
    producer.produce(topic, key=b"poison", value=POISON, headers=headers)
    assert producer.flush(30) == 0
    _sink(connect, name, topic, dlq, tmp_path / "out")
    try:
        (msg,) = wait_for("a DLQ record", lambda: consume_all(west, dlq))
        raw = raw_record(msg)
        names = [h for h, _ in raw.headers if h.startswith(DLQ_HEADER_PREFIX)]
        assert names[:4] == [DLQ_HEADER_PREFIX + k for k in stale]  # the stale ones, first
        assert len(names) == 4 + 10  # then Connect's full set
        event = decode_dlq(CLUSTER, raw)
        assert (event.connector, event.task_id) == (name, 0)
        assert event.record == RecordRef(topic=topic, partition=0, offset=0)
        assert event.error.stage == "VALUE_CONVERTER"
    finally:
        connect.delete(name)
