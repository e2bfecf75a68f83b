"""Offline mode against real Kafka and real Connect: what the worker reads back is what we wrote.

The writes happen on a Connect worker of the module's own (tests/integration/extra_worker.py),
stopped and started at will; the shared worker is only read and asked for status.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from offsetd.devstack import mm2
from offsetd.devstack.stack import StackInfo
from offsetd.offsets.model import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
    OffsetEntry,
    PartitionMap,
    mirror_partition,
    sink_partition,
)
from offsetd.offsets.offline import (
    FILE_STREAM_SOURCE_CLASS,
    OfflineError,
    OfflineRefused,
    check_offline_allowed,
    javahash,
    read_offsets,
    write_sink_offsets,
    write_source_offsets,
)
from offsetd.offsets.offline.plan import builtin_layout
from tests.integration.extra_worker import ExtraWorker, extra_worker
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


@pytest.fixture(scope="module")
def worker(stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtraWorker]:
    with extra_worker(stack, tmp_path_factory.mktemp("offline-worker")) as own:
        yield own


@pytest.fixture
def rest(worker: ExtraWorker) -> Iterator[ConnectClient]:
    worker.start()  # a failed test may have left it stopped
    client = ConnectClient(worker.url)
    yield client
    client.http.close()


def conf_of(bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap}


def stop_connector(rest: ConnectClient, name: str) -> None:
    response = rest.http.put(rest.path(name, "/stop"))
    assert response.status_code == 204, response.text

    def stopped() -> bool:
        status = rest.status(name)
        return bool(status and status["connector"]["state"] == "STOPPED" and not status["tasks"])

    wait_for(f"{name} STOPPED with no tasks", stopped, 60)


def rest_offsets(rest: ConnectClient, name: str) -> list[dict[str, Any]]:
    offsets: list[dict[str, Any]] = rest.offsets(name)["offsets"]
    return offsets


def reachable_offsets(rest: ConnectClient, name: str) -> bool:
    return rest.http.get(rest.path(name, "/offsets")).status_code == 200


# -- reading the shared worker's topic ----------------------------------------------------------


def test_connects_own_mm2_keys_are_what_offsetd_would_write(stack: StackInfo, west: str) -> None:
    """The real bytes of the MM2 keys: Java HashMap order, murmur2 placement, nothing malformed."""
    classes = {
        mm2.SOURCE_CONNECTOR: MIRROR_SOURCE_CLASS,
        mm2.CHECKPOINT_CONNECTOR: MIRROR_CHECKPOINT_CLASS,
        mm2.HEARTBEAT_CONNECTOR: MIRROR_HEARTBEAT_CLASS,
    }

    def all_three() -> Any:
        view = read_offsets(conf_of(west), stack.connect["offset.storage.topic"])
        return view if set(classes) <= set(view.connectors) else None

    view = wait_for("offsets of all three MM2 connectors", all_three, 120)
    assert view.partition_count == 25
    assert view.malformed == ()
    assert view.conflicts() == []
    for name, connector_class in classes.items():
        layout = builtin_layout(connector_class)
        assert layout is not None
        for lp in view.connectors[name].values():
            (form,) = lp.forms
            assert form.key == javahash.encode_offset_key(name, layout.ordered(lp.partition))
            assert form.kafka_partition == javahash.java_partition(form.key, 25)
    source = next(iter(view.connectors[mm2.SOURCE_CONNECTOR].values()))
    assert list(source.partition) == ["cluster", "partition", "topic"]
    checkpoint = next(iter(view.connectors[mm2.CHECKPOINT_CONNECTOR].values()))
    assert list(checkpoint.partition) == ["partition", "topic", "group"]


def test_history_keeps_every_record_in_log_order(stack: StackInfo, west: str) -> None:
    topic = stack.connect["offset.storage.topic"]
    view = read_offsets(conf_of(west), topic, connectors={mm2.HEARTBEAT_CONNECTOR}, history=True)
    assert view.history is not None
    assert len(view.history) >= 2
    assert {h.connector for h in view.history} == {mm2.HEARTBEAT_CONNECTOR}
    positions = [(h.kafka_partition, h.kafka_offset) for h in view.history]
    assert positions == sorted(positions)
    assert view.records_read >= len(view.history)
    assert set(view.connectors) == {mm2.HEARTBEAT_CONNECTOR}


# -- the safety gate ----------------------------------------------------------------------------


def test_gate_refuses_while_the_shared_worker_runs_the_connector(stack: StackInfo) -> None:
    url = stack.connect["url"]
    with pytest.raises(OfflineRefused, match="live tasks") as refused:
        check_offline_allowed(url, mm2.SOURCE_CONNECTOR, force=False, assume_workers_down=False)
    assert refused.value.exit_code == 14
    assert "task 0 RUNNING" in str(refused.value)
    check_offline_allowed(url, mm2.SOURCE_CONNECTOR, force=True, assume_workers_down=False)
    check_offline_allowed(url, unique("no-such"), force=False, assume_workers_down=False)


def test_gate_needs_the_operators_word_when_nothing_answers() -> None:
    with httpx.Client(timeout=5) as http:
        closed = "http://127.0.0.1:9"  # discard port: nothing listens
        with pytest.raises(OfflineRefused, match="assume-workers-down"):
            check_offline_allowed(closed, "c", force=False, assume_workers_down=False, http=http)
        check_offline_allowed(closed, "c", force=False, assume_workers_down=True, http=http)
    with pytest.raises(OfflineRefused, match="no Connect REST URL"):
        check_offline_allowed(None, "c", force=True, assume_workers_down=False)
    check_offline_allowed(None, "c", force=False, assume_workers_down=True)


# -- partitioning -------------------------------------------------------------------------------


def test_librdkafka_murmur2_random_places_keys_like_java(west: str) -> None:
    """`partitioner=murmur2_random` agrees with our murmur2; librdkafka's default does not."""
    topic = unique("offline-partitioner")
    create_topic(west, topic, partitions=25)
    rng = random.Random(7)  # noqa: S311 - test data, not secrets
    keys = [
        javahash.encode_offset_key(
            f"conn-{rng.randrange(1000)}", {"topic": f"t{rng.randrange(99)}", "p": i}
        )
        for i in range(300)
    ]

    def landed(partitioner: str) -> list[int]:
        producer = Producer({"bootstrap.servers": west, "partitioner": partitioner})
        got: dict[bytes, int] = {}

        def done(err: KafkaError | None, msg: Message) -> None:
            assert err is None, err
            key, partition = msg.key(), msg.partition()
            assert key is not None
            assert partition is not None
            got[key] = partition

        for key in keys:
            producer.produce(topic, key=key, value=b"{}", on_delivery=done)
        assert producer.flush(30) == 0
        return [got[k] for k in keys]

    java = [javahash.java_partition(k, 25) for k in keys]
    assert landed("murmur2_random") == java
    assert landed("consistent_random") != java


# -- source writes on the module's own worker ---------------------------------------------------


def test_offline_source_write_is_what_connect_reads_after_restart(
    worker: ExtraWorker, rest: ConnectClient, west: str, east: str, tmp_path: Path
) -> None:
    lines = [f"line-{i:02d}\n" for i in range(30)]  # 8 bytes each
    source_file = tmp_path / "input.txt"
    source_file.write_text("".join(lines), encoding="ascii")
    size = source_file.stat().st_size
    file_conn, data_topic = unique("offline-fs"), unique("offline-fs-data")
    create_topic(west, data_topic)
    rest.create(
        file_conn,
        {
            "connector.class": FILE_STREAM_SOURCE_CLASS,
            "tasks.max": "1",
            "file": str(source_file),
            "topic": data_topic,
            "value.converter": STRING_CONVERTER,
            "key.converter": STRING_CONVERTER,
        },
    )
    file_partition: PartitionMap = {"filename": str(source_file)}
    wait_for(
        f"{file_conn} to commit position {size}",
        lambda: (
            rest_offsets(rest, file_conn)
            == [{"partition": file_partition, "offset": {"position": size}}]
        ),
        90,
    )
    # A MirrorSourceConnector created STOPPED: it never runs, so only offsetd writes its key.
    mm2_conn = unique("offline-mm2")
    response = rest.http.post(
        "/connectors",
        json={
            "name": mm2_conn,
            "initial_state": "STOPPED",
            "config": {
                "connector.class": MIRROR_SOURCE_CLASS,
                "source.cluster.alias": "east",
                "target.cluster.alias": "west",
                "source.cluster.bootstrap.servers": east,
                "target.cluster.bootstrap.servers": west,
                "topics": "offline-nothing-matches",
                "tasks.max": "1",
            },
        },
    )
    assert response.status_code == 201, response.text
    stop_connector(rest, file_conn)

    conf = conf_of(west)
    before = read_offsets(conf, worker.offsets_topic, connectors={file_conn})
    assert before.partition_count == 25
    connects_form = before.lookup(file_conn, file_partition)
    assert connects_form is not None
    (form,) = connects_form.forms
    # Connect's own key, byte for byte, where Java's partitioner put it
    assert form.key == f'["{file_conn}",{{"filename":"{source_file}"}}]'.encode()
    assert form.key == javahash.encode_offset_key(file_conn, file_partition)
    assert form.kafka_partition == javahash.java_partition(form.key, 25)

    worker.stop()
    with pytest.raises(OfflineRefused):
        check_offline_allowed(worker.url, file_conn, force=False, assume_workers_down=False)
    check_offline_allowed(worker.url, file_conn, force=False, assume_workers_down=True)

    view = read_offsets(conf, worker.offsets_topic)
    position = 8 * 10  # after line 10: the task re-reads lines 10..29
    report = write_source_offsets(
        conf,
        worker.offsets_topic,
        file_conn,
        [OffsetEntry(file_partition, {"position": position})],
        view,
        connector_class=FILE_STREAM_SOURCE_CLASS,
    )
    (written,) = report.written
    assert (written.key, written.kafka_partition, written.key_source) == (
        form.key,
        form.kafka_partition,
        "existing key",
    )
    mm2_partition = mirror_partition("east", "orders-offline", 3)
    mm2_entries = [OffsetEntry(mm2_partition, {"offset": 41})]
    # The view is stale for file_conn now (its own record was written since): refused.
    with pytest.raises(OfflineError, match="changed since they were read"):
        write_source_offsets(
            conf,
            worker.offsets_topic,
            file_conn,
            [OffsetEntry(file_partition, {"position": 0})],
            view,
            connector_class=FILE_STREAM_SOURCE_CLASS,
        )
    mm2_report = write_source_offsets(
        conf,
        worker.offsets_topic,
        mm2_conn,
        mm2_entries,
        read_offsets(conf, worker.offsets_topic),
        connector_class=MIRROR_SOURCE_CLASS,
    )
    (new_key,) = mm2_report.written
    assert new_key.key_source == "MirrorSourceConnector (Java HashMap order)"
    assert new_key.key == (
        f'["{mm2_conn}",{{"cluster":"east","partition":3,"topic":"orders-offline"}}]'.encode()
    )
    assert new_key.kafka_partition == javahash.java_partition(new_key.key, 25)

    worker.start()
    expected = {
        file_conn: [{"partition": file_partition, "offset": {"position": position}}],
        mm2_conn: [{"partition": mm2_partition, "offset": {"offset": 41}}],
    }
    for name, offsets in expected.items():  # wait_for: the restarted herder may still be joining
        wait_for(f"{name}'s offsets via REST", partial(reachable_offsets, rest, name), 60)
        assert rest_offsets(rest, name) == offsets

    # Connect's own write of the same MM2 partition (REST PATCH) lands on our key, same
    # bytes, same topic partition: one form, no conflict.
    patched = rest.http.patch(
        rest.path(mm2_conn, "/offsets"),
        json={"offsets": [{"partition": mm2_partition, "offset": {"offset": 50}}]},
    )
    assert patched.status_code == 200, patched.text
    after = read_offsets(conf, worker.offsets_topic, connectors={mm2_conn})
    lp = after.lookup(mm2_conn, mm2_partition)
    assert lp is not None
    (only,) = {(f.key, f.kafka_partition) for f in lp.forms}
    assert only == (new_key.key, new_key.kafka_partition)
    assert lp.offset == {"offset": 50}
    assert lp.current.kafka_offset > (new_key.kafka_offset or 0)

    # The task itself reads our offset: resumed, it re-emits lines 10..29 and commits the end
    # of the file again, under the same key in the same topic partition.
    resumed = rest.http.put(rest.path(file_conn, "/resume"))
    assert resumed.status_code == 202, resumed.text
    wait_for(
        f"{file_conn} to re-read from position {position}",
        lambda: len(consume_all(west, data_topic)) == 30 + 20,
        90,
    )
    values = [m.value() for m in consume_all(west, data_topic)]
    assert values[30:] == [line.strip().encode() for line in lines[10:]]

    def committed_again() -> Any:
        found = read_offsets(conf, worker.offsets_topic, connectors={file_conn})
        lp = found.lookup(file_conn, file_partition)
        return lp if lp is not None and lp.offset == {"position": size} else None

    final = wait_for("the task's own commit after resuming", committed_again, 60)
    assert {(f.key, f.kafka_partition) for f in final.forms} == {(form.key, form.kafka_partition)}
    rest.delete(file_conn)
    rest.delete(mm2_conn)


# -- conflicts and malformed records through the real read path ---------------------------------


def test_conflicts_and_malformed_records_are_reported_and_conflicts_can_be_cleared(
    west: str,
) -> None:
    topic = unique("offline-scratch")
    create_topic(west, topic, partitions=25)
    conn = "scratch"
    good = javahash.encode_offset_key(conn, {"filename": "a"})
    good_p = javahash.java_partition(good, 25)
    spaced = b'["scratch", {"filename": "a"}]'  # same logical partition, other bytes
    spaced_p = javahash.java_partition(spaced, 25)
    misplaced = javahash.encode_offset_key(conn, {"filename": "b"})
    produce(west, topic, [(good, b'{"position":1}')], partition=good_p)
    produce(west, topic, [(spaced, b'{"position":2}')], partition=spaced_p)
    wrong_p = (javahash.java_partition(misplaced, 25) + 1) % 25
    produce(west, topic, [(misplaced, b'{"position":3}')], partition=wrong_p)
    produce(
        west,
        topic,
        [
            (b"not json", b"{}"),
            (b'["a", {}, 3]', b"{}"),
            (b'["a", {"x": {"nested": 1}}]', b"{}"),
            (b'["a", {"x": 1}]', b"[1]"),
            (None, b"{}"),
        ],
        partition=0,
    )
    conf = conf_of(west)
    view = read_offsets(conf, topic)
    assert {m.kafka_partition for m in view.malformed} == {0}
    assert len({m.kafka_offset for m in view.malformed}) == 5
    assert sorted(m.reason for m in view.malformed) == sorted(
        [
            "the key is not JSON",
            "the key is not a JSON array of two elements",
            "the partition object holds a nested value, not only primitives",
            "the value is not a JSON object or null",
            "the record has no key",
        ]
    )
    (conflict,) = view.conflicts()
    assert conflict.partition == {"filename": "a"}
    assert {f.key for f in conflict.forms} == {good, spaced}

    with pytest.raises(OfflineError, match="more than one key form"):
        write_source_offsets(
            conf,
            topic,
            conn,
            [OffsetEntry({"filename": "a"}, {"position": 5})],
            view,
            connector_class=FILE_STREAM_SOURCE_CLASS,
        )
    with pytest.raises(OfflineError, match="Java's partitioner puts it in"):
        write_source_offsets(
            conf,
            topic,
            conn,
            [OffsetEntry({"filename": "b"}, {"position": 5})],
            view,
            connector_class=FILE_STREAM_SOURCE_CLASS,
        )
    cleared = write_source_offsets(
        conf,
        topic,
        conn,
        [OffsetEntry({"filename": "a"}, None)],
        view,
        connector_class=FILE_STREAM_SOURCE_CLASS,
    )
    assert {(w.key, w.kafka_partition, w.offset) for w in cleared.written} == {
        (good, good_p, None),
        (spaced, spaced_p, None),
    }
    again = read_offsets(conf, topic, connectors={conn})
    lp = again.lookup(conn, {"filename": "a"})
    assert lp is not None
    assert lp.offset is None
    assert not lp.conflict
    rewritten = write_source_offsets(
        conf,
        topic,
        conn,
        [OffsetEntry({"filename": "a"}, {"position": 9})],
        again,
        connector_class=FILE_STREAM_SOURCE_CLASS,
    )
    assert [(w.key, w.kafka_partition) for w in rewritten.written] == [(good, good_p)]


# -- sink writes --------------------------------------------------------------------------------


def group_of(admin: AdminClient, group: str) -> tuple[ConsumerGroupState, int]:
    description = admin.describe_consumer_groups([group])[group].result()
    return description.state, len(description.members)


def test_offline_sink_write_on_a_stopped_connectors_empty_group(
    rest: ConnectClient, west: str, tmp_path: Path
) -> None:
    name, topic = unique("offline-sink"), unique("offline-sink-data")
    create_topic(west, topic, partitions=2)
    for partition in (0, 1):
        produce(west, topic, [(None, f"r{i}".encode()) for i in range(5)], partition=partition)
    rest.create(
        name,
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(tmp_path / "out.txt"),
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
        },
    )
    expected = sorted(
        [{"partition": sink_partition(topic, p), "offset": {"kafka_offset": 5}} for p in (0, 1)],
        key=str,
    )
    wait_for(
        f"{name} to commit both partitions",
        lambda: sorted(rest_offsets(rest, name), key=str) == expected,
        90,
    )
    group = f"connect-{name}"
    conf = conf_of(west)
    entries = [
        OffsetEntry(sink_partition(topic, 0), {"kafka_offset": 2}),
        OffsetEntry(sink_partition(topic, 1), None),
    ]
    with pytest.raises(OfflineRefused, match=rf"consumer group {group} is not empty \(1 member"):
        write_sink_offsets(conf, group, entries)

    stop_connector(rest, name)
    admin = AdminClient(dict(conf))
    wait_for(f"{group} empty", lambda: group_of(admin, group) == (ConsumerGroupState.EMPTY, 0))
    report = write_sink_offsets(conf, group, entries)
    assert [(w.partition, w.offset) for w in report.written] == [
        (sink_partition(topic, 0), {"kafka_offset": 2}),
        (sink_partition(topic, 1), None),
    ]
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    )
    listed = admin.list_consumer_group_offsets([request])[group].result()
    committed = {tp.partition: tp.offset for tp in listed.topic_partitions}
    assert committed == {0: 2, 1: OFFSET_INVALID}
    assert rest_offsets(rest, name) == [
        {"partition": sink_partition(topic, 0), "offset": {"kafka_offset": 2}}
    ]
    rest.delete(name)


def test_extra_worker_is_its_own_cluster(worker: ExtraWorker, stack: StackInfo) -> None:
    assert worker.offsets_topic != stack.connect["offset.storage.topic"]
    assert worker.group.group_id != stack.connect["group.id"]
    assert worker.url not in stack.connect["urls"]
