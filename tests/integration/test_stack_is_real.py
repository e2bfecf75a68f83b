"""The local stack is real: Connect moves offsets, routes bad records to a DLQ, and MM2 mirrors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient

from offsetd.devstack import mm2
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    headers_of,
    produce,
    string_file_source,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_filestream_source_offset_is_the_byte_length_of_the_file(
    connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    lines = [f"line {i}: ascii only" for i in range(25)]
    source_file = tmp_path / "input.txt"
    source_file.write_text("".join(f"{line}\n" for line in lines), encoding="ascii")
    topic, name = unique("fs-source"), unique("fs-source")
    create_topic(west, topic)
    connect.create(name, string_file_source(source_file, topic))
    try:
        connect.wait_running(name)
        expected = {
            "offsets": [
                {
                    "partition": {"filename": str(source_file)},
                    "offset": {"position": source_file.stat().st_size},
                }
            ]
        }
        # Connect commits source offsets only every offset.flush.interval.ms: poll for them.
        seen = wait_for(
            "the flushed FileStreamSource offset",
            lambda: (offsets := connect.offsets(name)) == expected and offsets,
        )
        assert seen == expected
        values = [m.value() for m in consume_all(west, topic)]
        assert values == [line.encode() for line in lines]
    finally:
        connect.delete(name)


def test_malformed_json_lands_in_the_dlq_with_context_headers(
    connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    topic, dlq, name = unique("orders"), unique("dlq-orders"), unique("json-sink")
    create_topic(west, topic)
    good_before = [(b"k1", b'{"id": 1}'), (b"k2", b'{"id": 2}')]
    poison = (b"k3", b'{"id": 3, broken')
    good_after = [(b"k4", b'{"id": 4}')]
    offsets = produce(west, topic, [*good_before, poison, *good_after])
    sink_file = tmp_path / "sink.txt"
    connect.create(
        name,
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(sink_file),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "consumer.override.auto.offset.reset": "earliest",
        },
    )
    try:
        connect.wait_running(name)
        wait_for(
            "the good records in the sink file",
            lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) == 3,
        )
        dead = wait_for("the poison record in the DLQ", lambda: consume_all(west, dlq))
        assert len(dead) == 1
        record = dead[0]
        assert (record.key(), record.value()) == poison
        headers = {k: v.decode() for k, v in headers_of(record).items()}
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.partition"] == "0"
        assert headers["__connect.errors.offset"] == str(offsets[2])
        assert headers["__connect.errors.connector.name"] == name
        assert headers["__connect.errors.task.id"] == "0"
        assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert headers["__connect.errors.exception.class.name"] == (
            "org.apache.kafka.connect.errors.DataException"
        )
        assert "__connect.errors.exception.stacktrace" in headers
        # The connector kept going: its group committed past the last record.
        status = connect.status(name)
        assert status is not None
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
    finally:
        connect.delete(name)


def test_mm2_replicates_east_to_west_and_lists_last_replicated_offsets(
    connect: ConnectClient, east: str, west: str
) -> None:
    topic = unique("payments")
    create_topic(east, topic)
    records = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(10)]
    produce(east, topic, records)
    mirrored = f"{mm2.SOURCE}.{topic}"
    wait_for(
        f"{mirrored} on west",
        lambda: mirrored in AdminClient({"bootstrap.servers": west}).list_topics(timeout=5).topics,
        timeout_s=90,
    )

    def all_ten() -> list[Message] | None:
        got = consume_all(west, mirrored)
        return got if len(got) == 10 else None

    replicated = wait_for("all ten records on west", all_ten)
    assert [(m.key(), m.value()) for m in replicated] == records

    def source_offset() -> dict[str, int] | None:
        for entry in connect.offsets(mm2.SOURCE_CONNECTOR)["offsets"]:
            if entry["partition"] == {"cluster": mm2.SOURCE, "topic": topic, "partition": 0}:
                offset: dict[str, int] = entry["offset"]
                return offset
        return None

    # MirrorSourceConnector stores the *last replicated* source offset, not the next one.
    assert wait_for("the MM2 source offset for the topic", source_offset) == {"offset": 9}


def test_heartbeats_from_east_are_replicated_and_the_east_group_is_checkpointed(
    stack: StackInfo, east: str, west: str
) -> None:
    heartbeats = consume_all(east, mm2.HEARTBEATS_TOPIC)
    assert heartbeats, "the heartbeat emitter writes into east"
    replicated = f"{mm2.SOURCE}.{mm2.HEARTBEATS_TOPIC}"
    wait_for("replicated heartbeats on west", lambda: consume_all(west, replicated))
    checkpoints = f"{mm2.SOURCE}.checkpoints.internal"

    def audit_checkpoint() -> bool:
        topics = AdminClient({"bootstrap.servers": west}).list_topics(timeout=5).topics
        if checkpoints not in topics:
            return False
        # Checkpoint keys are (group, topic, partition) in MM2's binary schema: group name first.
        return any(
            mm2.AUDIT_GROUP.encode() in (m.key() or b"") for m in consume_all(west, checkpoints)
        )

    assert wait_for("a checkpoint of the heartbeat-audit group", audit_checkpoint, timeout_s=90)
    assert stack.mm2["consumer_group"]["cluster"] == "east"
