"""The quarantine copy: a skipped record, whole, kept on the daemon's Kafka cluster.

Before offsetd moves a sink past a poison record it copies that record (key, value, headers and
timestamp, byte for byte) to the quarantine topic, with its original coordinates and the error as
headers. Connect's own `__connect.errors.*` names are used for those (a DLQ consumer or replay
tool understands them), plus `offsetd.*` headers that tie the copy to its saga and decision. The
skip goes on only once the copy is acknowledged by all in-sync replicas.

Exactly one copy per saga, even across crashes: before copying, the caller stores a *mark*, the
partition chosen from the saga key (deterministic) and that partition's end offset. After a
crash, `find_copy` scans only from the mark to the end of that one partition for the saga key:
found, the copy is done; not found, it was never acknowledged, so copying again cannot duplicate.

The topic is created with retention.ms=-1 and no compaction: records keep their original
timestamps, which may be old, and time-based retention would then delete a fresh copy at once.

One module a concern: `topic` (the topic, its marks and the one copy), `saga` (the skip saga's
quarantine, which finds the cluster a sink reads), `reading` (`offsetd quarantine list`).
"""

from offsetd.remediation.quarantine.reading import read_quarantined
from offsetd.remediation.quarantine.saga import SagaQuarantine
from offsetd.remediation.quarantine.topic import (
    DEFAULT_PARTITIONS,
    DEFAULT_TOPIC,
    Quarantine,
    QuarantineFailed,
    durable_producer,
)

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_TOPIC",
    "Quarantine",
    "QuarantineFailed",
    "SagaQuarantine",
    "durable_producer",
    "read_quarantined",
]
