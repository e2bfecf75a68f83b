"""The MirrorMaker 2 set on the Connect worker, named as Strimzi names its connectors.

- `east->west.MirrorSourceConnector` replicates every topic of east to west as `east.<topic>`;
- `east->west.MirrorCheckpointConnector` checkpoints east's consumer groups into west;
- `west->east.MirrorHeartbeatConnector` emits heartbeats *into east* (its producer is pointed at
  east), so `heartbeats` on east is replicated to west as `east.heartbeats`: a liveness signal that
  only moves while replication moves;
- `heartbeat-audit`, a FileStreamSink whose consumer group `heartbeat-audit` reads east's
  heartbeats and commits on east every second: a real group for MM2 to checkpoint and translate.
"""

from __future__ import annotations

from dataclasses import dataclass

from offsetd.devstack.security import StackSecurity

__all__ = [
    "AUDIT_CONNECTOR",
    "AUDIT_GROUP",
    "BYTES",
    "CHECKPOINT_CONNECTOR",
    "HEARTBEATS_TOPIC",
    "HEARTBEAT_CONNECTOR",
    "SOURCE",
    "SOURCE_CONNECTOR",
    "TARGET",
    "Mm2Set",
]

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
SOURCE = "east"
TARGET = "west"
SOURCE_CONNECTOR = f"{SOURCE}->{TARGET}.MirrorSourceConnector"
CHECKPOINT_CONNECTOR = f"{SOURCE}->{TARGET}.MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = f"{TARGET}->{SOURCE}.MirrorHeartbeatConnector"
AUDIT_CONNECTOR = "heartbeat-audit"
AUDIT_GROUP = "heartbeat-audit"
HEARTBEATS_TOPIC = "heartbeats"


@dataclass(frozen=True)
class Mm2Set:
    east_bootstrap: str
    west_bootstrap: str
    audit_file: str
    # Secure stack: MM2's own clients of both clusters authenticate as `mm2`; the records it
    # writes go through the worker's producer (`connect`).
    security: StackSecurity | None = None

    def _common(self, source: str, target: str) -> dict[str, str]:
        security = {}
        if self.security is not None:
            security = {
                **self.security.java_client_properties("mm2", "source.cluster."),
                **self.security.java_client_properties("mm2", "target.cluster."),
            }
        return {**self._plain_common(source, target), **security}

    def _plain_common(self, source: str, target: str) -> dict[str, str]:
        bootstraps = {SOURCE: self.east_bootstrap, TARGET: self.west_bootstrap}
        return {
            "source.cluster.alias": source,
            "target.cluster.alias": target,
            "source.cluster.bootstrap.servers": bootstraps[source],
            "target.cluster.bootstrap.servers": bootstraps[target],
            # On a Connect cluster the converters must be set by hand, on all three connectors.
            "key.converter": BYTES,
            "value.converter": BYTES,
            "header.converter": BYTES,
            "tasks.max": "1",
        }

    def heartbeat(self) -> dict[str, str]:
        return {
            **self._common(TARGET, SOURCE),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
            "heartbeats.topic.replication.factor": "1",
            "emit.heartbeats.interval.seconds": "1",
            # Source records go through the worker's producer (to west); send these to east.
            "producer.override.bootstrap.servers": self.east_bootstrap,
        }

    def source(self) -> dict[str, str]:
        return {
            **self._common(SOURCE, TARGET),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "topics": ".*",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "refresh.topics.interval.seconds": "5",
            "sync.topic.acls.enabled": "false",
        }

    def checkpoint(self) -> dict[str, str]:
        return {
            **self._common(SOURCE, TARGET),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
            "groups": ".*",
            "checkpoints.topic.replication.factor": "1",
            "emit.checkpoints.interval.seconds": "5",
            "refresh.groups.interval.seconds": "5",
            "sync.group.offsets.enabled": "false",
        }

    def audit_sink(self) -> dict[str, str]:
        return {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": HEARTBEATS_TOPIC,
            "file": self.audit_file,
            "key.converter": BYTES,
            "value.converter": BYTES,
            "consumer.override.bootstrap.servers": self.east_bootstrap,
            # Connect reads and alters a sink's group with its admin client: point it at east too,
            # or GET /offsets looks for the group on the worker's cluster and finds nothing.
            "admin.override.bootstrap.servers": self.east_bootstrap,
            "consumer.override.group.id": AUDIT_GROUP,
            "consumer.override.auto.offset.reset": "earliest",
        }
