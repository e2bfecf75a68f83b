"""Snapshots: the before- and after-image of every offset change, kept so it can be undone.

`offsetd offsets undo` and `offsetd offsets history` read them. Each change is stored under an
id (`new_snapshot_id`), first as "planned", then overwritten with the outcome ("applied",
"failed", ...). Two stores implement the `SnapshotStore` protocol:

- `KafkaSnapshotStore` (`kafka`, with `kafka_topic` and `kafka_scan`): one compacted,
  single-partition topic; chunk records, then a header record per snapshot.
- `FileSnapshotStore` (`files`): one gzip file per id holding two JSON lines, the header and
  the images; listings decompress only the first line.

`records` is the snapshot in memory, `format` how both stores write it, `store` the protocol
and the listing both stores share. `get` and `list` return `Snapshot`s; `list_info` returns
`SnapshotInfo`s (metadata and summary, no images) without decompressing anything, which is what
a history table needs. Client configurations are never put into errors or logs.
"""

from offsetd.offsets.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreError
from offsetd.offsets.snapshots.files import (
    FileSnapshotStore,
    default_file_store,
    default_snapshot_dir,
)
from offsetd.offsets.snapshots.format import (
    DEFAULT_CHUNK_SIZE,
    FORMAT_VERSION,
    chunk_key,
    join_chunks,
    pack_snapshot,
    split_chunks,
    unpack_snapshot,
)
from offsetd.offsets.snapshots.kafka import DEFAULT_TOPIC, KafkaSnapshotStore
from offsetd.offsets.snapshots.records import (
    Snapshot,
    SnapshotInfo,
    SnapshotSummary,
    is_snapshot_id,
    new_snapshot_id,
)
from offsetd.offsets.snapshots.store import SnapshotStore

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_TOPIC",
    "FORMAT_VERSION",
    "FileSnapshotStore",
    "KafkaSnapshotStore",
    "Snapshot",
    "SnapshotCorrupt",
    "SnapshotInfo",
    "SnapshotNotFound",
    "SnapshotStore",
    "SnapshotStoreError",
    "SnapshotSummary",
    "chunk_key",
    "default_file_store",
    "default_snapshot_dir",
    "is_snapshot_id",
    "join_chunks",
    "new_snapshot_id",
    "pack_snapshot",
    "split_chunks",
    "unpack_snapshot",
]
