"""The skip saga's quarantine: the topic of the daemon's Kafka cluster, and the cluster a sink
reads, found from its config in Connect (read by the saga), so the record is copied from where
it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offsetd.config import Settings
from offsetd.remediation.locate import source_config
from offsetd.remediation.quarantine.topic import Quarantine, QuarantineFailed
from offsetd.remediation.quarantine_format import (
    QuarantineRef,
)

__all__ = ["SagaQuarantine"]


class SagaQuarantine:
    """The skip saga's quarantine (`offsetd.remediation.skip.Quarantine`), built from settings.

    Copies go to `remediation.quarantine_topic` on the daemon's Kafka cluster `alias`. A record
    is read from the cluster its sink consumes: the connector's config is read from Connect
    (its `consumer.override.bootstrap.servers`, else the Connect cluster's Kafka cluster), named
    by the context's `connect.cluster` and `connector.name`. Blocking: run it in a thread.
    """

    def __init__(self, settings: Settings, alias: str, *, timeout_s: float = 30.0) -> None:
        self._settings = settings
        self.quarantine = Quarantine(
            settings.kafka_clusters[alias].client_config(),
            settings.remediation.quarantine_topic,
            timeout_s=timeout_s,
        )

    def mark(self, saga_key: str) -> dict[str, int]:
        return self.quarantine.mark(saga_key)

    def find_copy(self, saga_key: str, mark: Mapping[str, int]) -> QuarantineRef | None:
        return self.quarantine.find_copy(saga_key, mark)

    def copy_once(
        self,
        saga_key: str,
        mark: Mapping[str, int],
        record: Mapping[str, Any],
        context: Mapping[str, str],
        connector_config: Mapping[str, str],
    ) -> dict[str, Any]:
        """Copy the record once, from the cluster the sink reads: `connector_config` is its
        config as the saga read it (through a client that waits out Connect's rebalances)."""
        found = self.quarantine.find_copy(saga_key, mark)
        if found is not None:
            return found.as_dict()
        connect_cluster, connector = context.get("connect.cluster"), context.get("connector.name")
        if connect_cluster not in self._settings.connect_clusters or not connector:
            raise QuarantineFailed(
                f"cannot tell which Kafka cluster connector {connector!r} of Connect cluster "
                f"{connect_cluster!r} reads: nothing was copied"
            )
        source = source_config(self._settings, connect_cluster, connector, connector_config)
        return self.quarantine.copy_once(saga_key, mark, record, context, source_conf=source)
