"""Where a sink reads its records: the client settings of its data cluster.

Shared by every reader of a sink's records (locating, the quarantine copy, the proof that its
configuration handles records), so the cluster is resolved one way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from offsetd.config import Settings
from offsetd.errors import ConfigError
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind

__all__ = ["source_config"]


def source_config(
    settings: Settings, connect_cluster: str, connector: str, config: Mapping[str, str]
) -> dict[str, str]:
    """Client settings for the cluster a sink reads: `consumer.override.bootstrap.servers`
    (matched to a configured alias for its TLS/SASL), else the Connect cluster's Kafka cluster."""
    worker = worker_view(settings, connect_cluster)
    where = resolve_location(connector, config, ConnectorKind.SINK, worker, settings)
    if where.data_cluster is None:
        raise ConfigError(
            f"the Kafka cluster {connector} reads is unknown: add Connect cluster "
            f"{connect_cluster!r} to offsetd.yaml"
        )
    return where.data_cluster.client_config(settings)
