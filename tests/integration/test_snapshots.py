"""KafkaSnapshotStore against the real west cluster: one fresh topic per test."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from offsetd.offsets.snapshots import (
    DEFAULT_CHUNK_SIZE,
    KafkaSnapshotStore,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotStore,
    SnapshotStoreError,
    chunk_key,
)
from tests.integration.kafkautil import consume_all, create_topic, produce, unique
from tests.unit.offsets.test_snapshots import T0, assert_identical, mirror_image, snap

pytestmark = pytest.mark.integration


def raw_records(bootstrap: str, topic: str) -> list[tuple[str, bytes | None]]:
    def pair(msg: Message) -> tuple[str, bytes | None]:
        key, value = msg.key(), msg.value()
        assert isinstance(key, bytes)
        assert value is None or isinstance(value, bytes)
        return key.decode(), value

    return [pair(m) for m in consume_all(bootstrap, topic)]


def latest(records: list[tuple[str, bytes | None]]) -> dict[str, bytes | None]:
    return dict(records)


def header_of(records: list[tuple[str, bytes | None]], snapshot_id: str) -> dict[str, object]:
    value = latest(records)[snapshot_id]
    assert value is not None
    header: dict[str, object] = json.loads(value)
    return header


def store_for(west: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> KafkaSnapshotStore:
    return KafkaSnapshotStore({"bootstrap.servers": west}, unique("snaps"), chunk_size=chunk_size)


def test_put_get_list_on_a_new_compacted_topic(west: str) -> None:
    with store_for(west) as store:
        assert store.list() == []  # a missing topic reads as empty ...
        with pytest.raises(SnapshotNotFound, match="no snapshot 'nope'"):
            store.get("nope")
        admin = AdminClient({"bootstrap.servers": west})
        assert store.topic not in admin.list_topics(timeout=10).topics  # ... and is not created

        s = snap()
        store.put(s)
        assert_identical(store.get(s.id), s)
        assert [x.id for x in store.list()] == [s.id]
        assert_identical(store.list()[0], s)
        assert store.list_info() == [s.info]

        topic = admin.list_topics(timeout=10).topics[store.topic]
        assert len(topic.partitions) == 1
        resource = _ConfigResource(_ResourceType.TOPIC, store.topic)
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        assert configs["cleanup.policy"].value == "compact"

    # A second store (another process) reads what the first wrote.
    other: SnapshotStore = KafkaSnapshotStore({"bootstrap.servers": west}, store.topic)
    assert_identical(other.get(s.id), s)


def test_ten_thousand_partitions_round_trip_in_several_chunks(
    west: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_for(west)
    s = snap(
        operation="reset",
        before=mirror_image(10_000, 5_000_000, seed=1),
        after=mirror_image(10_000, 0, seed=2),
    )
    store.ensure_topic()  # topic creation is not part of the timing

    started = time.perf_counter()
    store.put(s)
    put_s = time.perf_counter() - started
    started = time.perf_counter()
    got = KafkaSnapshotStore({"bootstrap.servers": west}, store.topic).get(s.id)
    get_s = time.perf_counter() - started
    started = time.perf_counter()
    infos = store.list_info()
    list_info_s = time.perf_counter() - started

    assert_identical(got, s)
    assert infos[0].summary.partitions_before == infos[0].summary.changed == 10_000

    records = raw_records(west, store.topic)
    header = header_of(records, s.id)
    chunks = int(str(header["chunks"]))
    assert chunks > 1
    keys = [key for key, _ in records]
    expected = [chunk_key(s.id, str(header["chunk_set"]), i) for i in range(chunks)]
    assert keys == [*expected, s.id]  # chunks first, header last
    assert all(value is not None and len(value) <= store.chunk_size for _, value in records)
    with capsys.disabled():
        print(
            f"\n10k-partition snapshot: {header['payload_size']} B JSON -> "
            f"{header['compressed_size']} B zlib in {chunks} chunks; put {put_s * 1000:.0f} ms, "
            f"get {get_s * 1000:.0f} ms, list_info {list_info_s * 1000:.0f} ms"
        )


def test_overwrite_with_a_new_status(west: str) -> None:
    store = store_for(west)
    s = snap(before=mirror_image(2000, 10, seed=3), after=mirror_image(2000, 0, seed=4))
    store.put(s)
    applied = snap(s.id, status="applied", message="read back", before=s.before, after=s.after)
    store.put(applied)

    assert_identical(store.get(s.id), applied)
    assert [(x.id, x.status) for x in store.list()] == [(s.id, "applied")]
    records = raw_records(west, store.topic)
    assert [key for key, _ in records].count(s.id) == 2
    # Same images, same chunk set: the rewrite reused the chunk keys.
    assert len(latest(records)) == 1 + int(str(header_of(records, s.id)["chunks"]))


def test_overwrite_with_other_images_tombstones_the_old_chunks(west: str) -> None:
    store = store_for(west, chunk_size=4096)
    planned = snap(before=mirror_image(3000, 10, seed=5), after=mirror_image(3000, 0, seed=6))
    store.put(planned)
    old = header_of(raw_records(west, store.topic), planned.id)

    # The after-image read back differs from the plan, and is much smaller.
    applied = snap(planned.id, status="applied", before=planned.before, after=planned.after[:10])
    KafkaSnapshotStore({"bootstrap.servers": west}, store.topic).put(applied)  # unknown old set
    assert_identical(store.get(planned.id), applied)
    # A store that has read the snapshot knows its chunk set and tombstones it on rewrite.
    failed = snap(planned.id, status="failed", before=planned.before, after=())
    store.put(failed)

    records = raw_records(west, store.topic)
    new = header_of(records, planned.id)
    assert int(str(new["chunks"])) < int(str(old["chunks"]))
    now = latest(records)
    applied_set = next(
        key.split("/")[2]
        for key in now
        if "/chunk/" in key and key.split("/")[2] not in (old["chunk_set"], new["chunk_set"])
    )
    for i in range(int(str(old["chunks"]))):
        assert now[chunk_key(planned.id, str(old["chunk_set"]), i)] is not None  # never read
    assert now[chunk_key(planned.id, applied_set, 0)] is None  # superseded: tombstoned
    assert now[chunk_key(planned.id, str(new["chunk_set"]), 0)] is not None
    assert_identical(store.get(planned.id), failed)


def test_list_is_newest_first_and_filtered(west: str) -> None:
    store = store_for(west)
    made = [
        snap(at=T0 + timedelta(seconds=i), connector="sink-a" if i % 2 else "mm2", cluster="c")
        for i in range(5)
    ]
    for s in (made[3], made[0], made[4], made[1], made[2]):  # not in time order
        store.put(s)
    newest_first = [s.id for s in reversed(made)]
    assert [s.id for s in store.list()] == newest_first
    assert [i.id for i in store.list_info()] == newest_first
    assert [s.id for s in store.list(connector="sink-a")] == [made[3].id, made[1].id]
    assert [s.id for s in store.list(connector="mm2", limit=2)] == [made[4].id, made[2].id]
    assert store.list(connect_cluster="other") == []


def test_an_existing_topic_that_is_not_compacted_is_refused(west: str) -> None:
    topic = unique("plain")
    create_topic(west, topic)
    store = KafkaSnapshotStore({"bootstrap.servers": west}, topic)
    message = "refusing to use Kafka topic .* cleanup.policy is 'delete'"
    with pytest.raises(SnapshotStoreError, match=message):
        store.put(snap())
    with pytest.raises(SnapshotStoreError, match=message):
        store.list()
    with pytest.raises(SnapshotStoreError, match=message):
        store.get("x")
    assert consume_all(west, topic, timeout_s=1) == []


def test_several_partitions_are_refused(west: str) -> None:
    topic = unique("wide")
    admin = AdminClient({"bootstrap.servers": west})
    future = admin.create_topics(
        [NewTopic(topic, 3, 1, config={"cleanup.policy": "compact"})], operation_timeout=30
    )[topic]
    future.result(timeout=30)
    with pytest.raises(SnapshotStoreError, match="3 partitions, it needs exactly 1"):
        KafkaSnapshotStore({"bootstrap.servers": west}, topic).put(snap())


def test_a_tampered_chunk_gives_the_checksum_error(
    west: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = store_for(west)
    s = snap(before=mirror_image(10_000, 5_000_000, seed=1), after=mirror_image(10_000, 0, seed=2))
    good = snap(at=T0 - timedelta(days=1))
    store.put(good)
    store.put(s)
    records = raw_records(west, store.topic)
    header = header_of(records, s.id)
    key = chunk_key(s.id, str(header["chunk_set"]), 1)
    value = latest(records)[key]
    assert value is not None
    produce(west, store.topic, [(key.encode(), value[:100] + b"\x00" + value[101:])])

    with pytest.raises(SnapshotCorrupt, match=f"snapshot {s.id} in Kafka topic .* checksum"):
        store.get(s.id)
    assert [i.id for i in store.list_info()] == [s.id, good.id]  # headers are intact
    with caplog.at_level(logging.WARNING):
        assert [x.id for x in store.list()] == [good.id]
    assert f"skipping snapshot {s.id}" in caplog.text

    # A missing chunk is named too.
    produce(west, store.topic, [(key.encode(), None)])
    with pytest.raises(SnapshotCorrupt, match="chunk 1 of"):
        store.get(s.id)


def test_errors_never_show_the_client_configuration() -> None:
    conf = {
        "bootstrap.servers": "127.0.0.1:1",
        "sasl.username": "operator",
        "sasl.password": "hunter2-secret",
    }
    store = KafkaSnapshotStore(conf, unique("snaps"), timeout_s=2)
    with pytest.raises(SnapshotStoreError) as info:
        store.put(snap())
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(store)
    assert info.value.exit_code == 18


def test_snapshot_ids_from_now_are_accepted(west: str) -> None:
    store = store_for(west)
    s = snap(at=datetime.now(UTC), undo_of="20261121T083000.123Z-3f2a9c")
    store.put(s)
    assert store.get(s.id).undo_of == "20261121T083000.123Z-3f2a9c"
