"""Offline changes as one command: the connector's config from the configs topic, the before-image
from where its offsets live, the write, a read-back, and a snapshot for undo.

Used by `offsetd offsets ... --offline` when the workers are down or older than 3.6. The write
itself is `write_source_offsets` / `write_sink_offsets`; the gate that refuses while
workers run the connector is `offline.check_offline_allowed`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from offsetd.config import Settings
from offsetd.errors import ChangeIncomplete, ConfigError, ConnectorNotFound
from offsetd.kafkaaccess import raise_if_denied
from offsetd.kafkalogin import check_login
from offsetd.offsets import documents
from offsetd.offsets.location import OffsetsLocation, WorkerView, resolve_location
from offsetd.offsets.model import (
    ConnectorKind,
    OffsetEntry,
    apply_patch,
    connector_kind,
    diff,
    same_offsets,
    sink_partition,
)
from offsetd.offsets.offline.plan import WriteReport
from offsetd.offsets.offline.reader import read_offsets
from offsetd.offsets.offline.view import OffsetsView
from offsetd.offsets.offline.writer import write_sink_offsets, write_source_offsets
from offsetd.offsets.snapshots import Snapshot, SnapshotStore, new_snapshot_id

__all__ = ["OfflinePlan", "OfflineTarget", "connector_config", "execute", "plan"]


@dataclass(frozen=True)
class OfflineTarget:
    settings: Settings | None
    worker: WorkerView
    connect_cluster: str

    def worker_conf(self) -> dict[str, str]:
        if self.worker.cluster is None:
            raise ConfigError(
                "offline mode needs the workers' Kafka cluster: set kafka_cluster for the Connect "
                "cluster in offsetd.yaml, or bootstrap.servers in --worker-config"
            )
        conf = self.worker.cluster.client_config(self.settings)
        # A refused login or certificate: one line and its exit code, not a metadata timeout
        # and a traceback (the check is made once per process and cluster).
        check_login(conf)
        return conf


@dataclass(frozen=True)
class OfflinePlan:
    connector: str
    kind: ConnectorKind
    connector_class: str
    location: OffsetsLocation
    before: tuple[OffsetEntry, ...]
    patch: tuple[OffsetEntry, ...]
    after: tuple[OffsetEntry, ...]
    view: OffsetsView | None  # sources: the fresh read the write must reuse keys from

    def as_json(self) -> dict[str, object]:
        return {
            "connector": self.connector,
            "operation": "offline-alter",
            "connector_type": str(self.kind),
            "where": self.location.describe(),
            "diff": [line.as_json() for line in diff(self.before, self.after)],
        }


def connector_config(target: OfflineTarget, name: str, timeout_s: float = 60.0) -> dict[str, str]:
    """The connector's latest config record in the configs topic (what the workers would load)."""
    consumer = Consumer(
        {
            **target.worker_conf(),
            "group.id": "offsetd-offline-configs",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    try:
        tp = TopicPartition(target.worker.configs_topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
        consumer.assign([TopicPartition(tp.topic, 0, low)])
        key = f"connector-{name}".encode()
        latest: bytes | None = None
        found = False
        deadline = time.monotonic() + timeout_s
        position = low
        while position < high and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    continue
                position = (msg.offset() or 0) + 1
                if msg.key() == key:
                    found, latest = True, msg.value()
    finally:
        consumer.close()
    if not found or latest is None:
        raise ConnectorNotFound(
            f"connector {name!r} has no config in {target.worker.configs_topic}"
            + (" (it was deleted)" if found else "")
        )
    properties: dict[str, str] = json.loads(latest).get("properties", {})
    return properties


def plan(
    target: OfflineTarget,
    name: str,
    patch: list[OffsetEntry] | None,
    *,
    raw: list[Any] | None = None,
    connector_type: str | None = None,
) -> OfflinePlan:
    """Before-image and patch (None: remove every partition) for one connector, offline.

    `raw` entries (from a document) are validated against the type found in the configs topic.
    """
    config = connector_config(target, name)
    connector_class = config.get("connector.class", "")
    ctype = connector_type or (
        "sink" if "topics" in config or "topics.regex" in config else "source"
    )
    kind = connector_kind(connector_class, ctype)
    location = resolve_location(name, config, kind, target.worker, target.settings)
    if raw is not None:
        patch = documents.validate_entries(name, kind, raw)
    view = None
    if kind is ConnectorKind.SINK:
        before = tuple(_group_offsets(location, target.settings))
    else:
        topic, cluster = location.offsets_topics[-1]
        conf = cluster.client_config(target.settings) if cluster else target.worker_conf()
        view = read_offsets(conf, topic, connectors={name})
        before = tuple(view.entries(name))
    changes = (
        tuple(OffsetEntry(e.partition, None) for e in before) if patch is None else tuple(patch)
    )
    return OfflinePlan(
        name,
        kind,
        connector_class,
        location,
        before,
        changes,
        tuple(apply_patch(before, changes)),
        view,
    )


def execute(
    target: OfflinePlan,
    settings: Settings | None,
    worker_conf: Mapping[str, str],
    store: SnapshotStore,
    connect_cluster: str,
    *,
    key_template: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[str, tuple[OffsetEntry, ...], WriteReport]:
    """Write, read back, and record the change; returns the snapshot id, the after-image, report."""
    snapshot = Snapshot(
        id=new_snapshot_id(now()),
        created_at=now(),
        connect_cluster=connect_cluster,
        connector=target.connector,
        operation="offline-alter",
        status="planned",
        before=target.before,
        after=target.after,
    )
    store.put(snapshot)
    location = target.location
    if target.kind is ConnectorKind.SINK:
        if location.sink_group is None or location.data_cluster is None:
            raise ConfigError(f"cannot tell where {location.connector}'s consumer group lives")
        conf = location.data_cluster.client_config(settings)
        report = write_sink_offsets(conf, location.sink_group, list(target.patch))
        actual = tuple(_group_offsets(location, settings))
    else:
        assert target.view is not None
        topic, cluster = location.offsets_topics[-1]
        conf = cluster.client_config(settings) if cluster else dict(worker_conf)
        report = write_source_offsets(
            conf,
            topic,
            target.connector,
            list(target.patch),
            target.view,
            connector_class=target.connector_class,
            key_template=key_template,
        )
        actual = tuple(
            read_offsets(conf, topic, connectors={target.connector}).entries(target.connector)
        )
    if not same_offsets(actual, target.after):
        text = (
            f"offline write to {location.describe()} read back differently; "
            f"undo with `offsetd offsets undo {snapshot.id} --offline`"
        )
        store.put(replace(snapshot, status="left-stopped", after=actual, message=text))
        raise ChangeIncomplete(text)
    message = f"wrote {len(report.written)} offsets offline"
    store.put(replace(snapshot, status="applied", after=actual, message=message))
    return snapshot.id, actual, report


def _group_offsets(location: OffsetsLocation, settings: Settings | None) -> list[OffsetEntry]:
    """A sink's committed offsets, read with the Admin API on its consumer's cluster."""
    if location.data_cluster is None or location.sink_group is None:
        raise ConfigError(f"cannot tell where {location.connector}'s consumer group lives")
    admin = AdminClient(
        dict[str, str | int | float | bool](location.data_cluster.client_config(settings))
    )
    request = [ConsumerGroupTopicPartitions(location.sink_group)]
    try:
        result = admin.list_consumer_group_offsets(request)[location.sink_group].result()
    except KafkaException as exc:
        conf = location.data_cluster.client_config(settings)
        raise_if_denied(exc, conf, group=("DESCRIBE", location.sink_group))
        raise
    return [
        OffsetEntry(sink_partition(tp.topic, tp.partition), {"kafka_offset": tp.offset})
        for tp in sorted(result.topic_partitions or [], key=lambda t: (t.topic, t.partition))
        if tp.offset >= 0
    ]
