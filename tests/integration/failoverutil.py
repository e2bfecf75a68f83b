"""What the failover tests share: records with numbered keys, real consumers of a group
(joined, or reading from its commit), MM2's checkpoints looked for, connectors made while
Connect rebalances, and the config of an outage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.lag.checkpoints import CheckpointError, decode_checkpoint
from tests.integration.kafkautil import ConnectClient, consume_all, wait_for

__all__ = [
    "CHECKPOINTS",
    "IDENTITY",
    "checkpointed",
    "config_of",
    "consume_all_safe",
    "consume_and_commit",
    "create_connector",
    "delete_connectors",
    "group_commits",
    "member",
    "mirrored_count",
    "read_as_group",
    "records",
    "reverse_flow",
    "with_dead_source",
]


CHECKPOINTS = f"{mm2.SOURCE}.checkpoints.internal"


def records(start: int, stop: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, stop)]


def group_commits(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    result = future.result(timeout=30)
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or []
        if tp.offset >= 0
    }


@contextmanager
def member(bootstrap: str, group: str, topic: str) -> Iterator[Consumer]:
    """A consumer of `group` that joined and holds its partitions until the block ends."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "client.id": "live-member",
        }
    )
    consumer.subscribe([topic])
    try:

        def joined() -> bool:
            consumer.poll(0.5)  # errors (no offset: "error" reset) are fine, the join is not
            return bool(consumer.assignment())

        wait_for(f"{group} joined on {bootstrap}", joined)
        yield consumer
    finally:
        consumer.close()


def read_as_group(
    bootstrap: str, group: str, topic: str, until_key: int, commit: bool = False
) -> list[int]:
    """The keys a real consumer of `group` reads from its committed offset up to `k<until_key>`
    ("error" when there is no commit: the group must resume where it was put). Assigned, not
    subscribed: the committed offset is fetched all the same, without a rebalance's wait."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    consumer.assign([TopicPartition(topic, 0)])  # no offset: the group's committed one
    keys: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while not keys or keys[-1] < until_key:
            assert time.monotonic() < deadline, f"{group} read only {keys[-3:]} of {topic}"
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                keys.append(int((msg.key() or b"k-1")[1:]))
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return keys


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    """A real consumer of `group` reads `count` records from the start and commits after them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    try:
        while seen < count:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen += 1
        consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
    finally:
        consumer.close()


def mirrored_count(west: str, topic: str, count: int) -> bool:
    try:
        return len(consume_all(west, topic)) >= count
    except Exception:  # MM2 creates it at its next topic refresh
        return False


def checkpointed(west: str, group: str, topic: str, upstream: int) -> bool:
    try:
        records = consume_all(west, CHECKPOINTS)
    except Exception:  # a loaded broker may not know it at the first metadata request
        return False
    for msg in records:
        try:
            c = decode_checkpoint(msg.key(), msg.value(), 0)
        except CheckpointError:
            continue
        if (c.group, c.topic, c.upstream_offset) == (group, topic, upstream):
            return True
    return False


def config_of(connect: ConnectClient, name: str) -> dict[str, str]:
    """A connector's config, asked again while Connect rebalances (another test's connectors
    coming and going answer 409 or 500 for a moment)."""

    def probe() -> dict[str, str] | None:
        response = connect.http.get(connect.path(name, "/config"))
        return response.json() if response.status_code == 200 else None

    return wait_for(f"the config of {name}", probe, 60)


def create_connector(connect: ConnectClient, name: str, config: dict[str, str]) -> None:
    """`connect.create`, asked again while Connect rebalances."""

    def probe() -> bool:
        response = connect.http.put(connect.path(name, "/config"), json=config)
        assert response.status_code in (200, 201, 409, 500), response.text
        return response.status_code in (200, 201)

    wait_for(f"{name} created", probe, 60)


IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def with_dead_source(config: Path, folder: Path) -> Path:
    """The config with east's bootstrap and Connect's URL at a port nothing listens on: east
    gone, and the Connect cluster that ran MM2 with it."""
    yaml = YAML()
    doc = yaml.load(config.read_text())
    doc["kafka_clusters"]["east"]["bootstrap_servers"] = "127.0.0.1:9"  # discard: refused
    for cluster in doc["connect_clusters"].values():  # Connect went down with it
        cluster["url"] = "http://127.0.0.1:9"
    out_path = folder / "east-gone.yaml"
    with out_path.open("w") as out:
        yaml.dump(doc, out)
    return out_path


def reverse_flow(connect: ConnectClient, names: list[str], topics: str, group: str) -> None:
    """A west -> east flow (source and checkpoint connectors, `names`) for `topics` and
    `group`: the reverse flow a DR cluster runs while it takes writes."""
    for name, forward in zip(names, (mm2.SOURCE_CONNECTOR, mm2.CHECKPOINT_CONNECTOR), strict=True):
        config = config_of(connect, forward)
        east_bootstrap = config["source.cluster.bootstrap.servers"]
        west_bootstrap = config["target.cluster.bootstrap.servers"]
        config.update(
            {
                "name": name,
                "source.cluster.alias": mm2.TARGET,
                "target.cluster.alias": mm2.SOURCE,
                "source.cluster.bootstrap.servers": west_bootstrap,
                "target.cluster.bootstrap.servers": east_bootstrap,
                # the worker's producer writes to west: the replicas and checkpoints go to east
                "producer.override.bootstrap.servers": east_bootstrap,
                "topics": topics,
                "groups": group,
            }
        )
        create_connector(connect, name, config)


def consume_all_safe(bootstrap: str, topic: str) -> list[Any]:
    try:
        return consume_all(bootstrap, topic)
    except Exception:  # not there yet, or not known at the first metadata request
        return []


def delete_connectors(connect: ConnectClient, names: list[str]) -> None:
    """Delete a test's connectors and wait until Connect has settled: gone from its list, and
    the stack's own MirrorSourceConnector answering again (the rebalance a delete starts makes
    Connect answer 409 or 500 for a moment, to the next test in this stack too)."""
    for name in names:
        connect.delete(name)

    def settled() -> bool:
        listed = connect.http.get("/connectors")
        tasks = connect.http.get(connect.path(mm2.SOURCE_CONNECTOR, "/tasks"))
        return (
            listed.status_code == 200
            and not set(names) & set(listed.json())
            and tasks.status_code == 200
        )

    wait_for(f"Connect settled after deleting {names}", settled, 60)
