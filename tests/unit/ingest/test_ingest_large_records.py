"""The ingest's size decision: a record no frame can carry is skipped, counted, never fatal.

`framed_size` / `plan_frames` (pure) decide which records fit the internal topic; `Ingest._handle`
skips the rest as malformed ("too large"), with coordinates and size but no content, and still
commits their offsets with the batch. The Kafka clients are stand-ins here (pure logic only);
tests/integration/test_daemon_large_records.py runs the same on the real stack.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import DLQ_HEADER_PREFIX
from offsetd.events.frames import (
    decode_frame,
    encode_frame,
    frame_head_size,
    framed_size,
    plan_frames,
    route_dlq,
    route_status,
)
from offsetd.events_topic import EVENTS_MAX_MESSAGE_BYTES, KAFKA_DEFAULT_MAX_MESSAGE_BYTES
from offsetd.ingest import Ingest, Source, producer_message_limit

STATUS, DLQ = "connect-status", "dlq-orders"
CONNECTOR_HEADER = DLQ_HEADER_PREFIX + "connector.name"
TRACE_HEADER = DLQ_HEADER_PREFIX + "exception.stacktrace"
MARKER = b"PAYLOAD-MARKER-"


def status(offset: int, connector: str = "orders-sink", trace_bytes: int = 0) -> RawRecord:
    value = json.dumps(
        {"state": "FAILED", "trace": "x" * trace_bytes, "worker_id": "w", "generation": 1}
    ).encode()
    return RawRecord(
        STATUS, 0, offset, 1_700_000_000_000, f"status-task-{connector}-0".encode(), value
    )


def dlq(
    offset: int,
    connector: str = "orders-sink",
    trace: bytes = b"",
    value: bytes = b"v",
    message: bytes = b"boom",
) -> RawRecord:
    headers = (
        (CONNECTOR_HEADER, connector.encode()),
        (TRACE_HEADER, trace),
        (DLQ_HEADER_PREFIX + "exception.message", message),
        ("not-ours", MARKER * 10),
    )
    return RawRecord(DLQ, 0, offset, 1_700_000_000_000, b"k", value, headers)


# -- framed_size: exact -------------------------------------------------------------------------

headers = st.lists(
    st.tuples(
        st.sampled_from(
            [CONNECTOR_HEADER, TRACE_HEADER, "other", "ünïcode", DLQ_HEADER_PREFIX + "é"]
        ),
        st.none() | st.binary(max_size=50),
    ),
    max_size=6,
)
records = st.builds(
    RawRecord,
    st.sampled_from([STATUS, DLQ, "tøpic"]),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**62),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    headers.map(tuple),
)


@given(st.lists(records, min_size=1, max_size=8), st.booleans())
def test_framed_size_is_exactly_what_encode_frame_writes(
    batch: list[RawRecord], dlq_on: bool
) -> None:
    dlq_topics = frozenset({DLQ}) if dlq_on else frozenset()
    frame = encode_frame(batch, dlq_topics=dlq_topics)
    sizes = sum(framed_size(r, dlq=r.topic in dlq_topics) for r in batch)
    assert len(frame) == frame_head_size(r.topic for r in batch) + sizes
    assert len(decode_frame(frame)) == len(batch)


def test_a_dlq_record_is_sized_by_its_error_headers_only() -> None:
    """Its payload is not framed, so a huge failing record is no reason to drop it."""
    big_payload = dlq(1, value=b"v" * (5 << 20))
    assert framed_size(big_payload, dlq=True) < 200
    assert framed_size(big_payload) > 5 << 20


# -- plan_frames: which records travel, and how ------------------------------------------------


def test_a_record_over_the_limit_is_left_out_and_the_others_keep_their_order() -> None:
    small = [status(0, "a"), status(1, "b"), status(3, "a"), status(4, "b")]
    huge = status(2, "a", trace_bytes=2000)
    batch = [small[0], small[1], huge, small[2], small[3]]
    routed = [(route_status("w", r), r) for r in batch]
    plan = plan_frames(routed, max_frame_bytes=500, max_record_bytes=1000)
    assert plan.too_large == [(huge, framed_size(huge))]
    assert plan.frames == [("w/a", [small[0], small[2]]), ("w/b", [small[1], small[3]])]


def test_a_record_over_the_frame_size_but_within_the_limit_travels_alone() -> None:
    big = status(1, "a", trace_bytes=800)
    before, after = status(0, "a"), status(2, "a")
    plan = plan_frames(
        [("w/a", before), ("w/a", big), ("w/a", after)], max_frame_bytes=500, max_record_bytes=1000
    )
    assert plan.too_large == []
    assert plan.frames == [("w/a", [before]), ("w/a", [big]), ("w/a", [after])]


def test_frames_of_several_records_stay_under_the_frame_size() -> None:
    batch = [status(i, "a", trace_bytes=i * 7 % 300) for i in range(200)]
    plan = plan_frames([("w/a", r) for r in batch], max_frame_bytes=2000, max_record_bytes=4000)
    assert [r for _, rs in plan.frames for r in rs] == batch
    for _owner, rs in plan.frames:
        assert sum(framed_size(r) for r in rs) <= 2000 or len(rs) == 1


@pytest.mark.parametrize("topic_limit", [KAFKA_DEFAULT_MAX_MESSAGE_BYTES, EVENTS_MAX_MESSAGE_BYTES])
def test_the_largest_record_allowed_fits_the_producer_and_the_topic(topic_limit: int) -> None:
    ingest = Ingest(
        {}, {STATUS: Source("w", route_status)}, "events", "g", max_message_bytes=topic_limit
    )
    limit = ingest.max_record_bytes
    owner = "w/" + "c" * 200
    empty = RawRecord(STATUS, 0, 0, 0, b"status-task-" + b"c" * 200 + b"-0", b"")
    fits = RawRecord(STATUS, 0, 0, 0, empty.key, b"x" * (limit - framed_size(empty)))
    assert framed_size(fits) == limit
    frame = encode_frame([fits])
    # the producer's check: value, key and at most ~64 bytes of record overhead
    assert len(frame) + len(owner) + 64 <= producer_message_limit(topic_limit)
    # the broker's (compressed batch, at worst incompressible): still under the topic's limit
    assert producer_message_limit(topic_limit) * (1 + 1 / 255) + 100 < topic_limit  # lz4
    plan = plan_frames([(owner, fits)], max_frame_bytes=1 << 18, max_record_bytes=limit)
    assert plan.too_large == []
    over = RawRecord(fits.topic, 0, 1, 0, fits.key, (fits.value or b"") + b"x")
    plan = plan_frames([(owner, over)], max_frame_bytes=1 << 18, max_record_bytes=limit)
    assert plan.too_large == [(over, limit + 1)]


def test_the_internal_topic_takes_what_the_old_producer_limit_refused() -> None:
    """A 1.5 MB status record (a long trace) used to exceed the producer's 1 MB default."""
    ingest = Ingest(
        {},
        {STATUS: Source("w", route_status)},
        "events",
        "g",
        max_message_bytes=EVENTS_MAX_MESSAGE_BYTES,
    )
    assert framed_size(status(0, trace_bytes=1_500_000)) < ingest.max_record_bytes
    assert ingest.max_record_bytes > 8_000_000


# -- Ingest._handle: skip, count, log, commit ---------------------------------------------------


class Msg:
    """The parts of a consumed confluent-kafka Message the ingest reads."""

    def __init__(self, raw: RawRecord) -> None:
        self.raw = raw

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self.raw.topic

    def partition(self) -> int:
        return self.raw.partition

    def offset(self) -> int:
        return self.raw.offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self.raw.timestamp_ms)

    def key(self) -> bytes | None:
        return self.raw.key

    def value(self) -> bytes | None:
        return self.raw.value

    def headers(self) -> list[tuple[str, bytes | None]]:
        return list(self.raw.headers)


class Producer:
    """Acknowledges at once; refuses (as librdkafka does, synchronously) values over `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sent: list[tuple[str, bytes]] = []

    def produce(self, topic: str, *, key: bytes, value: bytes, on_delivery: Any) -> None:
        if len(value) > self.limit:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.sent.append((key.decode(), value))
        on_delivery(None, None)

    def poll(self, _timeout: float) -> int:
        return 0


class Consumer:
    def __init__(self) -> None:
        self.commits: list[list[TopicPartition]] = []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.commits.append(offsets)


def handle(ingest: Ingest, batch: list[RawRecord], consumer: Consumer, producer: Producer) -> None:
    ingest._handle(cast(Any, [Msg(r) for r in batch]), cast(Any, consumer), cast(Any, producer))


def make_ingest(max_message_bytes: int) -> tuple[Ingest, list[tuple[RawRecord, Malformed]]]:
    skipped: list[tuple[RawRecord, Malformed]] = []
    ingest = Ingest(
        {},
        {STATUS: Source("w", route_status), DLQ: Source("w", route_dlq, dlq=True)},
        "events",
        "g",
        max_message_bytes=max_message_bytes,
        on_malformed=lambda raw, bad: skipped.append((raw, bad)),
    )
    return ingest, skipped


def test_a_record_too_large_is_skipped_counted_and_committed_with_its_batch() -> None:
    ingest, skipped = make_ingest(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
    too_large = dlq(7, "big-sink", message=MARKER * 80_000)  # 1.2 MB of error headers
    large_payload = dlq(8, "payload-sink", value=MARKER * 200_000)  # 3 MB, but not framed
    batch = [status(5, "a"), dlq(6, "b"), too_large, large_payload, status(9, "a")]
    producer, consumer = (
        Producer(producer_message_limit(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)),
        Consumer(),
    )
    handle(ingest, batch, consumer, producer)
    assert [(raw.offset, bad.reason.split(":")[0]) for raw, bad in skipped] == [(7, "too large")]
    bad = skipped[0][1]
    assert (bad.topic, bad.partition, bad.offset) == (DLQ, 0, 7)
    assert str(framed_size(too_large, dlq=True)) in str(bad)
    assert MARKER.decode() not in str(bad)
    assert ingest.too_large == 1
    delivered = [r for _key, value in producer.sent for r in decode_frame(value)]
    assert sorted(r.offset for r in delivered) == [5, 6, 8, 9]
    assert {key for key, _ in producer.sent} == {"w/a", "w/b", "w/payload-sink"}
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.commits[-1]}
    assert committed == {(STATUS, 0): 10, (DLQ, 0): 9}  # past the skipped record


def test_a_frame_the_producer_refuses_is_skipped_not_fatal() -> None:
    """The safety net: the producer refuses a frame the size check let through (e.g. a limit
    lowered behind our back): a lone record is skipped; a frame of several is sent one by one."""
    ingest, skipped = make_ingest(EVENTS_MAX_MESSAGE_BYTES)
    ingest.max_frame_bytes = 100_000
    batch = [
        status(0, "a", trace_bytes=30_000),
        status(1, "a", trace_bytes=30_000),
        status(2, "a", trace_bytes=90_000),
        status(3, "b"),
    ]
    producer, consumer = Producer(limit=60_000), Consumer()
    handle(ingest, batch, consumer, producer)
    assert [raw.offset for raw, _ in skipped] == [2]
    assert "too large" in skipped[0][1].reason
    delivered = [(key, [r.offset for r in decode_frame(value)]) for key, value in producer.sent]
    assert delivered == [("w/a", [0]), ("w/a", [1]), ("w/b", [3])]
    assert len(ingest._pending) == 0  # all acknowledged and committed
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.commits[-1]}
    assert committed == {(STATUS, 0): 4}
    assert ingest.frames == 3
