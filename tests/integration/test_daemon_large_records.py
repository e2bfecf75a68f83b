"""`offsetd run` on the real stack: one very large record neither stops the daemon nor is lost
when it can be carried.

A watched DLQ topic (its `max.message.bytes` raised, as a team would for long traces) gets, in
one batch: a record whose error headers (9 MB uncompressed, a few KB compressed) no frame of the
internal topic can carry, a record with a 1.5 MB stack trace header (incompressible: over 1 MB
even compressed, more than the producer's old 1 MB limit), and a normal one; later one more.
The first is counted as malformed, logged with its coordinates and size but not its content,
skipped and committed; every other one reaches a decision, and the daemon stays up.
"""

from __future__ import annotations

import base64
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from offsetd.ingest import EVENTS_MAX_MESSAGE_BYTES, IngestError, ensure_events_topic
from tests.integration.daemonproc import Daemon, decide_only_config
from tests.integration.kafkautil import offset_of, unique, wait_for

pytestmark = pytest.mark.integration

RULE = """\
name: dlq-any-notify
description: Every DLQ record of a connector is worth a note (a test rule).
mode: observe
match:
  kind: dlq_record
when:
  count: 1
  within: 10m
  key: connector
actions:
  - type: notify
    severity: info
    summary: A record went to the DLQ.
"""
PREFIX = "__connect.errors."
MARKER = "CONTENT-MARKER-do-not-log"
SOURCE_TOPIC_LIMIT = 4 << 20  # the DLQ topic's max.message.bytes, raised at creation


@pytest.fixture
def daemon_config(stack: StackInfo, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "dlq-any.yaml").write_text(RULE)
    path = tmp_path / "offsetd.yaml"
    data = decide_only_config(  # decisions only: nothing may act on the stack's connectors
        stack,
        path,
        app_id=unique("offsetd-large"),
        rules_dir=rules,
        partitions=2,
        audit_topic=unique("offsetd.audit"),
        data_dir=tmp_path / "state",
        dlq_topics=[unique("dlq-large")],
    )
    return path, data


def dlq_record(
    connector: str, trace: str, message: str = "Converting byte[] to Kafka Connect data failed"
) -> list[tuple[str, str | bytes | None]]:
    """The context headers Connect writes with a failing record (no payload needed here)."""
    return [
        (PREFIX + "topic", b"orders"),
        (PREFIX + "partition", b"0"),
        (PREFIX + "offset", b"42"),
        (PREFIX + "connector.name", connector.encode()),
        (PREFIX + "task.id", b"0"),
        (PREFIX + "stage", b"VALUE_CONVERTER"),
        (PREFIX + "class.name", b"org.apache.kafka.connect.json.JsonConverter"),
        (PREFIX + "exception.class.name", b"org.apache.kafka.connect.errors.DataException"),
        (PREFIX + "exception.message", message.encode()),
        (PREFIX + "exception.stacktrace", trace.encode()),
    ]


def produce_with_headers(
    bootstrap: str, topic: str, records: list[tuple[bytes, list[tuple[str, str | bytes | None]]]]
) -> list[int]:
    """In order, to partition 0, compressed; the client's own limit raised for the big ones."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "gzip",
            "message.max.bytes": 32 << 20,
            "linger.ms": 50,
        }
    )
    offsets: dict[int, int] = {}
    errors: list[str] = []

    def report(index: int) -> Any:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                offsets[index] = offset_of(msg)

        return on_delivery

    for index, (value, headers) in enumerate(records):
        producer.produce(
            topic, value=value, key=b"k", partition=0, headers=headers, on_delivery=report(index)
        )
    assert producer.flush(60) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(records))]


def _notes(west: str, audit_topic: str) -> dict[str, dict[str, Any]]:
    return {
        r["connector"]: r
        for r in read_records({"bootstrap.servers": west}, audit_topic)
        if r.get("kind") is None and r.get("rule") == "dlq-any-notify"
    }


def _committed(west: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": west, "group.id": group})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_a_record_too_large_for_any_frame_is_skipped_and_the_stream_goes_on(
    west: str, tmp_path: Path, daemon_config: tuple[Path, dict[str, Any]]
) -> None:
    config, data = daemon_config
    dlq = data["connect_clusters"]["local"]["dlq_topics"][0]
    app_id, audit_topic = data["daemon"]["app_id"], data["daemon"]["audit_topic"]
    admin = AdminClient({"bootstrap.servers": west})
    created = admin.create_topics(
        [NewTopic(dlq, 1, 1, config={"max.message.bytes": str(SOURCE_TOPIC_LIMIT)})],
        operation_timeout=30,
    )
    created[dlq].result(timeout=30)
    tag = unique("c")
    too_large, large, after, later, long_trace = (
        f"{name}-{tag}" for name in ("huge", "large", "after", "later", "long")
    )
    # 9 MB of message: over the internal topic's 8 MiB once framed, tiny once compressed
    line = f"at org.example.{MARKER}.Converter.convert(Converter.java:1); "
    huge_message = "boom: " + line * (9_000_000 // len(line))
    # 1.5 MB that no codec can shrink below 1 MB: the old producer limit refused its frame
    large_message = "boom: " + base64.b64encode(os.urandom(1_125_000)).decode()
    # 9 MB of trace: travels as the 4096 characters rules read, so it is decided like any other
    huge_trace = "org.apache.kafka.connect.errors.DataException: boom\n" + ("\t" + line + "\n") * (
        9_000_000 // len(line)
    )
    plain = "org.apache.kafka.connect.errors.DataException: boom"
    daemon = Daemon(config, tmp_path / "daemon.log", data["daemon"]["web_port"])
    daemon.start()
    try:
        offsets = produce_with_headers(
            west,
            dlq,
            [
                (b"v", dlq_record(too_large, plain, message=huge_message)),
                (b"v", dlq_record(large, plain, message=large_message)),
                (b"v", dlq_record(after, "org.apache.kafka.connect.errors.DataException: x")),
                (b"v", dlq_record(long_trace, huge_trace)),
            ],
        )
        wait_for(
            "decisions for the large, the normal and the long-trace record",
            lambda: {large, after, long_trace} <= set(_notes(west, audit_topic)),
            timeout_s=120,
        )
        assert daemon.proc is not None
        assert daemon.proc.poll() is None, "the daemon must live on"
        # A later record, in a batch of its own, still gets its decision.
        (later_offset,) = produce_with_headers(
            west, dlq, [(b"v", dlq_record(later, "org.apache.kafka.connect.errors.DataException"))]
        )
        wait_for("the later record's decision", lambda: later in _notes(west, audit_topic))
        notes = _notes(west, audit_topic)
        assert too_large not in notes
        assert notes[large]["inputs"]["trigger"]["kind"] == "dlq_record"
        assert notes[large]["inputs"]["events"][0]["offset"] == offsets[1]
        assert notes[after]["inputs"]["events"][0]["offset"] == offsets[2]
        assert notes[long_trace]["inputs"]["events"][0]["offset"] == offsets[3]
        assert notes[later]["inputs"]["events"][0]["offset"] == later_offset
        # Counted once as malformed, on its topic; logged with coordinates and size only.
        assert daemon.metric("offsetd_malformed_records_total", topic=dlq) == 1.0
        log = daemon.log()
        lines = [s for s in log.splitlines() if f"{dlq}-0@{offsets[0]}" in s]
        assert len(lines) == 1, lines
        assert "too large" in lines[0]
        found = re.search(r"too large: (\d+) bytes", lines[0])
        assert found is not None, lines[0]
        size = int(found.group(1))
        assert size > 9_000_000
        assert MARKER not in log
        assert large_message[6:70] not in log
        assert "the ingest stopped" not in log
        # Its offset was committed in order with the others: the stream moved past it.
        wait_for(
            "the ingest's commit past every record",
            lambda: _committed(west, f"{app_id}-ingest", dlq) == later_offset + 1,
        )
        # The internal topic was created with the raised limit.
        assert _message_limit(admin, f"{app_id}-events") == EVENTS_MAX_MESSAGE_BYTES
        time.sleep(1)
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()


def _message_limit(admin: AdminClient, topic: str) -> int:
    resource = _ConfigResource(_ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return int(entries["max.message.bytes"].value)


def test_ensure_events_topic_raises_the_limit_of_a_topic_created_without_it(west: str) -> None:
    """An internal topic from before (or created by faust without its config) gets the limit."""
    conf = {"bootstrap.servers": west}
    admin = AdminClient({"bootstrap.servers": west})
    topic = unique("offsetd-old-events")
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30)[topic].result(timeout=30)
    assert _message_limit(admin, topic) < EVENTS_MAX_MESSAGE_BYTES
    assert ensure_events_topic(conf, topic, 2, 1) == EVENTS_MAX_MESSAGE_BYTES
    assert _message_limit(admin, topic) == EVENTS_MAX_MESSAGE_BYTES
    assert ensure_events_topic(conf, topic, 2, 1) == EVENTS_MAX_MESSAGE_BYTES  # idempotent
    with pytest.raises(IngestError, match="has 2 partitions, the config says 3"):
        ensure_events_topic(conf, topic, 3, 1)
    fresh = unique("offsetd-new-events")
    assert ensure_events_topic(conf, fresh, 2, 1) == EVENTS_MAX_MESSAGE_BYTES
    assert _message_limit(admin, fresh) == EVENTS_MAX_MESSAGE_BYTES
