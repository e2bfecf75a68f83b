"""Builds the remediation layer of one worker from the settings (used by `offsetd run`)."""

from __future__ import annotations

import asyncio
import getpass
import os
import socket
from typing import Any

from pydantic import TypeAdapter

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, Settings
from offsetd.connect.client import ConnectClient
from offsetd.engine import ConnectorMeta, Decision
from offsetd.events.models import RecordRef
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, connector_kind, next_offset_of
from offsetd.offsets.snapshots import KafkaSnapshotStore, SnapshotStore
from offsetd.recordchecks import RecordCheck
from offsetd.remediation.config_proof import ConfigHistory, config_history, delivered_with_config
from offsetd.remediation.control import ControlStore
from offsetd.remediation.executor import Remediator
from offsetd.remediation.failure_window import read_status_since
from offsetd.remediation.guards import StatusSample
from offsetd.remediation.locate import (
    LocateAnswer,
    Located,
    committed_by_partition,
    locate,
    pin_latest_start,
    source_config,
)
from offsetd.remediation.quarantine import SagaQuarantine
from offsetd.remediation.rewind import RewindRunner
from offsetd.remediation.sagas import SagaRecord, SagaStore, hold_beacon, locate_key
from offsetd.remediation.sink_start import pinned_partitions

__all__ = ["CHECK", "SagaLocator", "build_remediator", "worker_identity"]

CHECK = TypeAdapter[Any](RecordCheck)


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


class SagaLocator:
    """`locate` with its one-record-batch override made durable, so a crash can undo it."""

    def __init__(self, settings: Settings, owner: str) -> None:
        self.settings = settings
        self.owner = owner

    async def locate(
        self, client: ConnectClient, decision: Decision, sagas: SagaStore, *, prove: bool = True
    ) -> LocateAnswer:
        """Locate `decision`'s record. `prove`: also say whether the connector's current
        configuration is known to handle records (read before locating changes its config)."""
        params = next((a.params for a in decision.actions if a.type == "skip-record"), {})
        check = CHECK.validate_python(params["check"]) if params.get("check") else None
        key = locate_key(decision.connect_cluster, decision.connector)
        written: list[SagaRecord] = []
        before: dict[tuple[str, int], int] = {}
        history = None
        if prove:  # what proves the configuration, read before locating changes it
            before = await self._delivered_before(client, decision)
            history = await self._config_history(decision)

        async def on_override(original: str | None) -> None:
            record = SagaRecord(
                key=key,
                kind="locate",
                connect_cluster=decision.connect_cluster,
                connector=decision.connector,
                decision_id=decision.id,
                rule=decision.rule,
                epoch=1,
                owner=self.owner,
                override={"original": original},
            )
            written.append(await sagas.put(record))

        target = decision
        if decision.record_status == "exact" and decision.record is not None:
            exact = decision.record
            committed = await _committed_next(client, decision.connector, exact)
            # No committed offset: the sink starts from auto.offset.reset, so records before N
            # may be undelivered too. Past N: the recheck in the saga says "already moved on".
            if committed is not None and committed >= exact.offset:
                named = {"topic": exact.topic, "partition": exact.partition, "offset": exact.offset}
                return await self._answer(
                    client, decision, named, "dlq", "named by the DLQ record's context headers",
                    0, before, history, prove,
                )  # fmt: skip
            # Records committed..N-1 were in the failed batch and never delivered: skipping to
            # N+1 now would lose them. One-record batches deliver them first (and must stop at N).
            target = decision.model_copy(update={"record_status": "to_locate", "record": None})
        try:
            result = await locate(
                client,
                target,
                self.settings,
                check=check,
                single_record_batches=bool(params.get("single_record_batches", True)),
                on_override=on_override,
            )
        finally:
            if written:  # locate restored the override itself (or raised ConfigNotRestored)
                await sagas.put(written[-1].ended("done", written[-1].updated_at_ms))
        if isinstance(result, Located):
            ref = result.record
            wanted = decision.record if target is not decision else None
            if wanted is not None and (ref.topic, ref.partition, ref.offset) != (
                wanted.topic,
                wanted.partition,
                wanted.offset,
            ):
                return LocateAnswer(
                    None,
                    "undelivered_prefix",
                    f"the DLQ named {wanted.topic}-{wanted.partition}@{wanted.offset}, but with "
                    f"one-record batches the connector stopped at {ref.offset}: not skipping",
                )
            named = {"topic": ref.topic, "partition": ref.partition, "offset": ref.offset}
            return await self._answer(
                client, decision, named, result.how, result.detail, result.delivered, before,
                history, prove,
            )  # fmt: skip
        return LocateAnswer(None, result.reason, result.describe())

    async def _delivered_before(
        self, client: ConnectClient, decision: Decision
    ) -> dict[tuple[str, int], int]:
        """The sink's committed offsets, but for those offsetd pinned itself (a start, nothing
        delivered: `sink_start`)."""
        committed = committed_by_partition(await client.offsets(decision.connector))
        info = await client.info(decision.connector)
        if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
            return committed
        conf = source_config(
            self.settings, decision.connect_cluster, decision.connector, info.config
        )
        group = (
            resolve_location(
                decision.connector,
                info.config,
                ConnectorKind.SINK,
                worker_view(self.settings, decision.connect_cluster),
            ).sink_group
            or f"connect-{decision.connector}"
        )
        pinned = await asyncio.to_thread(pinned_partitions, conf, group)
        return {tp: offset for tp, offset in committed.items() if tp not in pinned}

    async def _config_history(self, decision: Decision) -> ConfigHistory | None:
        connect = self.settings.connect_clusters.get(decision.connect_cluster)
        if connect is None:
            return None
        internal = self.settings.kafka_clusters[connect.kafka_cluster].client_config()
        return await asyncio.to_thread(
            config_history, internal, connect.configs_topic, decision.connector
        )

    async def _answer(
        self,
        client: ConnectClient,
        decision: Decision,
        record: dict[str, Any],
        how: str,
        why: str,
        delivered: int,
        before: dict[tuple[str, int], int],
        history: ConfigHistory | None,
        prove: bool,
    ) -> LocateAnswer:
        """The located record with the proof that the configuration handles records: records
        delivered while locating it, else the last record delivered before the incident."""
        topic, partition = str(record["topic"]), int(record["partition"])
        if delivered > 0:
            proof: str | None = f"{delivered} records before it were delivered while locating it"
            return LocateAnswer(record, how, why, delivered, proof)
        if not prove:
            return LocateAnswer(record, how, why, delivered, None, "not asked")
        info = await client.info(decision.connector)
        data_conf = source_config(
            self.settings, decision.connect_cluster, decision.connector, info.config
        )
        found = await asyncio.to_thread(
            delivered_with_config,
            data_conf,
            history,
            topic,
            partition,
            before.get((topic, partition)),
        )
        if found.proven:
            return LocateAnswer(record, how, why, delivered, found.why)
        return LocateAnswer(record, how, why, delivered, None, found.why)

    async def pin_unstarted(self, client: ConnectClient, decision: Decision) -> str | None:
        """Before a restart of a sink whose consumer starts at `latest` and has committed
        nothing: its start committed, so the restart does not jump past the failed records
        (`offsetd.remediation.sink_start`). The sentence for the audit, or None."""
        return await pin_latest_start(client, decision, self.settings)


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
    )


async def _committed_next(client: ConnectClient, connector: str, record: RecordRef) -> int | None:
    """The sink's committed offset (next to read) on the record's partition, if any."""
    for entry in await client.offsets(connector):
        part = entry.partition
        if (part.get("kafka_topic"), part.get("kafka_partition")) == (
            record.topic,
            record.partition,
        ):
            return next_offset_of(ConnectorKind.SINK, entry.offset)
    return None
