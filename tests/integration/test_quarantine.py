"""The quarantine copy on the real stack: whole, acknowledged, and never made twice for one saga."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from offsetd.events.models import RecordRef
from offsetd.recordchecks import TIMESTAMP_CREATE_TIME
from offsetd.remediation.quarantine import Quarantine, QuarantineFailed, read_quarantined
from offsetd.remediation.quarantine_format import H_SAGA_KEY
from offsetd.remediation.records import read_record
from tests.integration.cliutil import offsetd_json
from tests.integration.kafkautil import consume_all, create_topic, unique

pytestmark = pytest.mark.integration

ORIGINAL_TS = 1_600_000_000_123  # years ago: a copy must keep it, and retention must not bite
HEADERS: list[tuple[str, str | bytes | None]] = [
    ("trace-id", b"\x00\x01binary"),
    ("empty", b""),
    ("trace-id", b"second value, same name"),
    ("__connect.errors.topic", b"an-older-dlq-context"),
]
CONTEXT = {
    "connector.name": "orders-sink",
    "task.id": "0",
    "stage": "VALUE_CONVERTER",
    "class.name": "org.apache.kafka.connect.json.JsonConverter",
    "exception.class.name": "org.apache.kafka.connect.errors.DataException",
    "exception.message": "Converting byte[] to Kafka Connect data failed",
    "exception.stacktrace": "x" * 100_000,
    "decision.id": "d-1",
    "connect.cluster": "local",
}


@pytest.fixture(scope="module")
def source(west: str) -> RecordRef:
    """One record with a binary key and value, repeated header names and an old timestamp."""
    topic = unique("quarantine-src")
    create_topic(west, topic)
    producer = Producer({"bootstrap.servers": west})
    producer.produce(topic, key=b"\xffkey", value=b"not json{\x00\xfe", headers=HEADERS)
    producer.produce(
        topic, key=b"k", value=b"poison", headers=HEADERS, timestamp=ORIGINAL_TS, partition=0
    )
    assert producer.flush(30) == 0
    return RecordRef(topic=topic, partition=0, offset=1)


@pytest.fixture
def quarantine(west: str) -> Iterator[Quarantine]:
    q = Quarantine({"bootstrap.servers": west}, unique("offsetd.quarantine"), timeout_s=20)
    yield q
    q.close()


def test_copy_keeps_the_record_byte_for_byte_with_its_coordinates(
    west: str, source: RecordRef, quarantine: Quarantine
) -> None:
    conf = {"bootstrap.servers": west}
    original = read_record(conf, source)
    assert original is not None
    assert (original.timestamp_type, original.timestamp_ms) == (TIMESTAMP_CREATE_TIME, ORIGINAL_TS)
    mark = quarantine.mark("saga-1")
    ref = quarantine.copy("saga-1", mark, original, CONTEXT)
    assert (ref.partition, ref.offset) == (mark["partition"], mark["offset"])

    copy = read_record(conf, RecordRef(topic=ref.topic, partition=ref.partition, offset=ref.offset))
    assert copy is not None
    assert (copy.key, copy.value) == (b"k", b"poison")
    assert (copy.timestamp_type, copy.timestamp_ms) == (TIMESTAMP_CREATE_TIME, ORIGINAL_TS)
    n = len(HEADERS)
    assert copy.headers[:n] == original.headers  # the record's own, in order, first
    added = dict(copy.headers[n:])
    assert added["__connect.errors.topic"] == source.topic.encode()
    assert added["__connect.errors.partition"] == b"0"
    assert added["__connect.errors.offset"] == b"1"
    assert added["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert added["__connect.errors.connector.name"] == b"orders-sink"
    assert added["offsetd.saga.key"] == b"saga-1"
    assert added["offsetd.decision.id"] == b"d-1"
    assert added["offsetd.connect.cluster"] == b"local"
    assert int(added["offsetd.quarantined.at"] or b"0") > ORIGINAL_TS
    trace = added["__connect.errors.exception.stacktrace"] or b""
    assert len(trace) <= 16_384
    assert trace.endswith(b"...[truncated]")

    (listed,) = read_quarantined(conf, quarantine.topic)
    assert listed.original == source
    assert listed.original_headers == original.headers
    assert listed.saga_key == "saga-1"
    assert listed.headers["__connect.errors.topic"] == source.topic  # ours is the last one


def test_copy_once_twice_gives_one_record(
    west: str, source: RecordRef, quarantine: Quarantine
) -> None:
    conf = {"bootstrap.servers": west}
    coordinates = {"topic": source.topic, "partition": 0, "offset": 1}
    mark = quarantine.mark("saga-2")
    first = quarantine.copy_once("saga-2", mark, coordinates, CONTEXT, source_conf=conf)
    # A restarted daemon with the stored mark: the copy is found, not made again.
    again = Quarantine(conf, quarantine.topic, timeout_s=20)
    second = again.copy_once("saga-2", mark, coordinates, CONTEXT, source_conf=conf)
    assert first == second
    records = consume_all(west, quarantine.topic, mark["partition"])
    assert [dict(m.headers() or [])[H_SAGA_KEY] for m in records] == [b"saga-2"]


def test_find_copy_looks_only_after_the_mark_of_its_partition(
    west: str, source: RecordRef, quarantine: Quarantine
) -> None:
    conf = {"bootstrap.servers": west}
    original = read_record(conf, source)
    assert original is not None
    mark = quarantine.mark("saga-3")
    assert quarantine.find_copy("saga-3", mark) is None
    ref = quarantine.copy("saga-3", mark, original, CONTEXT)
    assert quarantine.find_copy("saga-3", mark) == ref
    # A mark taken after the copy does not see it (same saga key, later mark).
    later = quarantine.mark("saga-3")
    assert later == {"partition": mark["partition"], "offset": mark["offset"] + 1}
    assert quarantine.find_copy("saga-3", later) is None
    assert quarantine.find_copy("another-saga", mark) is None


def test_a_copy_that_cannot_be_made_raises_naming_the_record(quarantine: Quarantine) -> None:
    with pytest.raises(QuarantineFailed, match=r"no-such-topic-.*-0@3"):
        quarantine.copy_once(
            "saga-4",
            quarantine.mark("saga-4"),
            {"topic": unique("no-such-topic"), "partition": 0, "offset": 3},
            CONTEXT,
            source_conf={"bootstrap.servers": quarantine._conf["bootstrap.servers"]},
        )


def test_quarantine_list_shows_the_copies(
    west: str, source: RecordRef, quarantine: Quarantine, offsetd_yaml: Path, tmp_path: Path
) -> None:
    conf = {"bootstrap.servers": west}
    original = read_record(conf, source)
    assert original is not None
    quarantine.copy("saga-5", quarantine.mark("saga-5"), original, CONTEXT)
    config = tmp_path / "offsetd.yaml"
    config.write_text(
        offsetd_yaml.read_text() + f"remediation:\n  quarantine_topic: {quarantine.topic}\n"
    )
    (listed,) = offsetd_json(config, "quarantine", "list")
    assert listed["record"] == {"topic": source.topic, "partition": 0, "offset": 1}
    assert listed["saga_key"] == "saga-5"
    assert listed["value_base64"] == "cG9pc29u"  # b"poison"
    assert listed["connector"] == "orders-sink"
