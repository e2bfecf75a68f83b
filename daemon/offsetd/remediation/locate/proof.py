"""Whether a sink's current configuration is known to handle records, beside the record
located: records delivered while locating it, else the last record delivered before the
incident with this configuration (`offsetd.remediation.config_proof`).

A run of poison records with no such proof is likely a configuration that fails every record
(`offsetd.remediation.poison_run`), so the skip asks for it; what proves it is read before
locating changes the connector's config.
"""

from __future__ import annotations

import asyncio
from typing import Any

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.engine.decision import Decision
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, connector_kind
from offsetd.remediation.config_proof import ConfigHistory, config_history, delivered_with_config
from offsetd.remediation.locate.model import LocateAnswer, committed_by_partition
from offsetd.remediation.locate.source import source_config
from offsetd.remediation.sink_start import pinned_partitions

__all__ = ["config_history_of", "delivered_before", "proven_answer"]


async def delivered_before(
    settings: Settings, client: ConnectClient, decision: Decision
) -> dict[tuple[str, int], int]:
    """The sink's committed offsets, but for those offsetd pinned itself (a start, nothing
    delivered: `sink_start`)."""
    committed = committed_by_partition(await client.offsets(decision.connector))
    info = await client.info(decision.connector)
    if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
        return committed
    conf = source_config(settings, decision.connect_cluster, decision.connector, info.config)
    group = (
        resolve_location(
            decision.connector,
            info.config,
            ConnectorKind.SINK,
            worker_view(settings, decision.connect_cluster),
        ).sink_group
        or f"connect-{decision.connector}"
    )
    pinned = await asyncio.to_thread(pinned_partitions, conf, group)
    return {tp: offset for tp, offset in committed.items() if tp not in pinned}


async def config_history_of(settings: Settings, decision: Decision) -> ConfigHistory | None:
    """The connector's configurations over time, from its Connect cluster's configs topic."""
    connect = settings.connect_clusters.get(decision.connect_cluster)
    if connect is None:
        return None
    internal = settings.kafka_clusters[connect.kafka_cluster].client_config()
    return await asyncio.to_thread(
        config_history, internal, connect.configs_topic, decision.connector
    )


async def proven_answer(
    settings: Settings,
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
    data_conf = source_config(settings, decision.connect_cluster, decision.connector, info.config)
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
