"""Offline mode: read and write connector offsets straight from and to Kafka (KIP-199's tool).

For Connect older than 3.6 (no PATCH/DELETE offsets), or when the workers are down, offsetd does
what the worker would do itself, byte for byte:

- `read_offsets`: consume every partition of the offsets topic from the beginning to the end
  offsets taken at the start (assigned, no group membership, no commits), and fold it into an
  `OffsetsView`: the latest offset of every logical partition, the key bytes and topic
  partition it lives in, conflicts, malformed records, optionally the whole history;
- `write_source_offsets`: one record per partition to the offsets topic, with the exact key
  bytes Connect already wrote (or, for a known key layout, the bytes Connect would write), in
  the partition Java's default partitioner picks (murmur2, computed here and checked);
- `write_sink_offsets`: the sink connector's consumer group, which must be empty, through the
  Admin API (alter, and OffsetDelete for null offsets);
- `check_offline_allowed`: the safety gate run before any write.

New source keys need the order of the partition map's keys, which the connector's task decides.
offsetd knows it for MirrorSource/Checkpoint/Heartbeat (Java HashMap order) and
FileStreamSource; for any other class the caller gives a *key template* (`--key-template`): a
key in the topic's format, `["<any name>", {"<key 1>": <any>, "<key 2>": <any>}]`, of which only
the order of the object's keys counts. The easiest correct template is a key Connect itself wrote
for another partition of the same connector. Without one, new keys are refused (keys already in
the topic are always reused byte for byte).

Every function takes a confluent-kafka client configuration (`KafkaCluster.client_config()`),
so TLS and SASL apply unchanged. Modules: `reader`, `writer`, `gate` (the I/O); `view`
(decoding, conflicts), `plan` (key layouts, planning) and `javahash` (the JVM's arithmetic),
all pure; `rdkafka` (librdkafka's OffsetDelete through ctypes); `ops` (one offline change as a
command: plan, gate, write, read back, snapshot); `backend` (the offsets backend `offline`).

Not covered: connector-specific offsets topics (KIP-618 `offsets.storage.topic`; pass that
topic explicitly) and transactional writes for exactly-once source workers (offline records are
plain, non-transactional ones, which read_committed readers see as well).
"""

from offsetd.offsets.offline.gate import LIVE_TASK_STATES, OfflineRefused, check_offline_allowed
from offsetd.offsets.offline.plan import (
    BUILTIN_LAYOUTS,
    FILE_STREAM_SOURCE_CLASS,
    KeyLayout,
    OfflineWriteIncomplete,
    WriteReport,
    WrittenOffset,
    parse_key_template,
)
from offsetd.offsets.offline.reader import FETCH_TUNING, read_offsets
from offsetd.offsets.offline.view import (
    HistoryRecord,
    KeyForm,
    LogicalPartition,
    Malformed,
    OfflineError,
    OffsetsView,
)
from offsetd.offsets.offline.writer import write_sink_offsets, write_source_offsets

__all__ = [
    "BUILTIN_LAYOUTS",
    "FETCH_TUNING",
    "FILE_STREAM_SOURCE_CLASS",
    "LIVE_TASK_STATES",
    "HistoryRecord",
    "KeyForm",
    "KeyLayout",
    "LogicalPartition",
    "Malformed",
    "OfflineError",
    "OfflineRefused",
    "OfflineWriteIncomplete",
    "OffsetsView",
    "WriteReport",
    "WrittenOffset",
    "check_offline_allowed",
    "parse_key_template",
    "read_offsets",
    "write_sink_offsets",
    "write_source_offsets",
]
