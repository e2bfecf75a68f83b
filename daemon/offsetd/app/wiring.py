"""Everything the daemon's agents need, built before the app starts (`offsetd run` builds it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, KafkaCluster, Settings
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.events.decode import RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.frames import route_dlq, route_offsets, route_status
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status
from offsetd.ingest import Source
from offsetd.metrics.instruments import DaemonMetrics
from offsetd.remediation.executor import Remediator
from offsetd.rules import RuleSet

__all__ = ["Decoder", "Wiring"]

Decoder = Callable[[str, RawRecord], Any]


@dataclass
class Wiring:
    """Everything the agents need, built before the app starts."""

    settings: Settings
    alias: str
    kafka: KafkaCluster
    connect: dict[str, ConnectCluster]
    rules: RuleSet
    audit: AuditLog
    meta: ConnectorMetaCache
    registry: CollectorRegistry
    metrics: DaemonMetrics
    clock: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    remediator: Remediator | None = None  # None: decide and audit only

    def source_topics(self) -> dict[str, tuple[str, Decoder]]:
        """topic -> (Connect cluster, decoder) for every topic this process reads."""
        topics: dict[str, tuple[str, Decoder]] = {}
        for name, cluster in self.connect.items():
            topics[cluster.status_topic] = (name, decode_status)
            topics[cluster.offsets_topic] = (name, decode_offsets)
            for dlq in cluster.dlq_topics:
                topics[dlq] = (name, decode_dlq)
        return topics

    def compiled_topics(self) -> dict[str, tuple[str, str]]:
        """topic -> (Connect cluster, decoder's name) for the compiled owner
        (`offsetd.engine.compiled`): the same decoders as `source_topics`, by name."""
        kinds = {decode_status: "status", decode_dlq: "dlq", decode_offsets: "offsets"}
        return {
            topic: (cluster, kinds[decoder])
            for topic, (cluster, decoder) in self.source_topics().items()
        }

    def ingest_sources(self) -> dict[str, Source]:
        """topic -> how the ingest finds each record's owner, for every topic this process reads."""
        routes = {decode_status: route_status, decode_offsets: route_offsets, decode_dlq: route_dlq}
        return {
            topic: Source(cluster, routes[decoder], dlq=decoder is decode_dlq)
            for topic, (cluster, decoder) in self.source_topics().items()
        }
