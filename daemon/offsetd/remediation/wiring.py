"""Builds the remediation layer of one worker from the settings (used by `offsetd run`).

The skip's locator (`SagaLocator`) lives beside the skip, in `offsetd.remediation.skip_locator`.
"""

from __future__ import annotations

import getpass
import os
import socket
from typing import Any

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, Settings
from offsetd.engine import ConnectorMeta
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.snapshots import KafkaSnapshotStore, SnapshotStore
from offsetd.remediation.control import ControlStore
from offsetd.remediation.executor import Remediator
from offsetd.remediation.failure_window import read_status_since
from offsetd.remediation.guards import StatusSample
from offsetd.remediation.kube_events.publisher import KubeEvents
from offsetd.remediation.quarantine import SagaQuarantine
from offsetd.remediation.rewind import RewindRunner
from offsetd.remediation.sagas import SagaStore, hold_beacon
from offsetd.remediation.skip_locator import SagaLocator

__all__ = ["build_remediator", "worker_identity"]


def worker_identity() -> str:
    """Who acts, for the audit and the saga records: `user@host/pid#nonce on <boot>/net:[n]`.

    One identity per process, never reused: a restarted container keeps its hostname and often
    PID 1. The tag names this process's liveness beacon (`sagas.hold_beacon`), by which a
    restarted daemon proves the owner of an unfinished saga dead and resumes it at once.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}/{os.getpid()}{hold_beacon()}"


def build_remediator(
    settings: Settings,
    alias: str,
    connect: dict[str, ConnectCluster],
    audit: AuditLog,
    metrics: RemediationMetrics,
    meta: Any,
) -> Remediator:
    """Everything the executor needs; the topics are created and read before the app starts."""
    kafka = settings.kafka_clusters[alias]
    conf = kafka.client_config()
    remediation = settings.remediation
    sagas = SagaStore(conf, remediation.sagas_topic)
    sagas.start()
    control = ControlStore(conf, remediation.control_topic)
    state = control.load()
    metrics.paused.set(1 if state.paused else 0)
    for breaker in state.open_breakers():
        metrics.breaker_open.labels(breaker.connect_cluster, breaker.connector).set(1)
    quarantine = SagaQuarantine(settings, alias)
    owner = worker_identity()

    stores: dict[str, SnapshotStore] = {}

    def snapshots(connect_cluster: str) -> SnapshotStore:
        """One store per Kafka cluster for the process: its topic check and producer are paid
        once, not on every remediation (~0.1 s each)."""
        store_alias = settings.offsets.snapshots_kafka_cluster or (
            connect[connect_cluster].kafka_cluster if connect_cluster in connect else alias
        )
        if store_alias not in stores:
            stores[store_alias] = KafkaSnapshotStore(
                settings.kafka_clusters[store_alias].client_config(),
                settings.offsets.snapshots_topic,
            )
        return stores[store_alias]

    def meta_of(connect_cluster: str, connector: str) -> ConnectorMeta | None:
        result: ConnectorMeta | None = meta.get(connect_cluster, connector)
        return result

    def failures(connect_cluster: str, since_ms: int) -> list[StatusSample]:
        """The Connect cluster's status records since `since_ms` (the blast radius's window)."""
        cluster = connect[connect_cluster]
        conf = settings.kafka_clusters[cluster.kafka_cluster].client_config()
        return read_status_since(conf, cluster.status_topic, since_ms)

    events = KubeEvents(connect, owner, metrics)  # Strimzi-managed connectors' Events
    return Remediator(
        settings=remediation,
        connect=connect,
        metrics=metrics,
        audit=audit,
        sagas=sagas,
        snapshots=snapshots,
        quarantine=quarantine,
        control=control,
        locator=SagaLocator(settings, owner),
        meta=meta_of,
        owner=owner,
        rewind=RewindRunner(settings, owner=owner),
        failures=failures,
        events=events if events.active else None,
    )
