"""Snapshots: the before- and after-image of every offset change, kept so it can be undone.

`offsetd offsets undo` and `offsetd offsets history` read them. Each change is stored under an
id (`new_snapshot_id`), first as "planned", then overwritten with the outcome ("applied",
"failed", ...). Two stores implement the `SnapshotStore` protocol:

- `KafkaSnapshotStore`: one compacted, single-partition topic. A snapshot is written as chunk
  records (the zlib-compressed images, split into pieces of at most `chunk_size` bytes), then a
  small header record keyed by the id (metadata, a summary for history listings, the chunk count
  and checksums). Chunk keys are `<id>/chunk/<set>/<n>`, where `<set>` is derived from the
  compressed bytes: a rewrite with different images writes a *new* set, so the previous header
  and its chunks stay readable until the new header is acknowledged; only then is the old set
  tombstoned. Every prefix of the topic is therefore consistent: a reader (or a writer that
  crashed half-way) never pairs a header with chunks of another version.
- `FileSnapshotStore`: one gzip file per id (`<id>.json.gz`) holding two JSON lines, the header
  and the images; listings decompress only the first line. Writes are temp file + fsync + rename.

`get` and `list` return `Snapshot`s; `list_info` returns `SnapshotInfo`s (metadata and summary,
no images) without decompressing anything, which is what a history table needs.
Client configurations are never put into errors or logs.
"""

from __future__ import annotations

import builtins
import contextlib
import gzip
import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from offsetd.errors import OffsetdError
from offsetd.offsets.model import Change, JsonScalar, OffsetEntry, diff

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

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "offsetd.snapshots"
# 10k MirrorSource partitions (before + after) compress to ~180 KB: two chunks. Small enough to
# stay far below the broker's message.max.bytes (~1 MB) even a few to a produce batch.
DEFAULT_CHUNK_SIZE = 128 * 1024
FORMAT_VERSION = 1
_ENCODING = "zlib"
_HEADER_KIND = "offsetd.snapshot"

# Ids end up in file names and record keys: no '/', no leading dot.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


# -- errors -------------------------------------------------------------------------------------


class SnapshotStoreError(OffsetdError):
    """The snapshot store cannot be used (unreachable, refused, misconfigured, I/O error)."""

    exit_code = 18


class SnapshotNotFound(SnapshotStoreError):
    """No snapshot with the given id."""

    exit_code = 16

    def __init__(self, snapshot_id: str, where: str) -> None:
        super().__init__(f"no snapshot {snapshot_id!r} in {where}")
        self.snapshot_id = snapshot_id


class SnapshotCorrupt(SnapshotStoreError):
    """A stored snapshot exists but cannot be read back intact (checksum, missing chunk, ...)."""


class _Malformed(ValueError):
    """A JSON document does not have the snapshot shape (becomes SnapshotCorrupt in stores)."""


# -- ids ----------------------------------------------------------------------------------------


def new_snapshot_id(now: datetime) -> str:
    """A unique id that sorts by time: `20261121T083000.123Z-3f2a9c` (UTC, ms, 24 random bits)."""
    if now.tzinfo is None:
        raise ValueError("new_snapshot_id needs an aware datetime (e.g. datetime.now(UTC))")
    utc = now.astimezone(UTC)
    return f"{utc:%Y%m%dT%H%M%S}.{utc.microsecond // 1000:03d}Z-{secrets.token_hex(3)}"


def is_snapshot_id(value: str) -> bool:
    """Whether `value` can be a snapshot id (letters, digits, '.', '_', '-'; no '/')."""
    return _ID_RE.fullmatch(value) is not None


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotSummary:
    """Partition counts of one change, small enough for every history line."""

    partitions_before: int
    partitions_after: int
    changed: int
    added: int
    removed: int
    unchanged: int

    @classmethod
    def of(cls, before: Iterable[OffsetEntry], after: Iterable[OffsetEntry]) -> SnapshotSummary:
        before, after = list(before), list(after)
        counts = dict.fromkeys(Change, 0)
        for line in diff(before, after):
            counts[line.change] += 1
        return cls(
            partitions_before=len(before),
            partitions_after=len(after),
            changed=counts[Change.CHANGED],
            added=counts[Change.ADDED],
            removed=counts[Change.REMOVED],
            unchanged=counts[Change.UNCHANGED],
        )

    def as_json(self) -> dict[str, int]:
        return {
            "partitions_before": self.partitions_before,
            "partitions_after": self.partitions_after,
            "changed": self.changed,
            "added": self.added,
            "removed": self.removed,
            "unchanged": self.unchanged,
        }

    @classmethod
    def from_json(cls, raw: Any) -> SnapshotSummary:
        if not isinstance(raw, dict):
            raise _Malformed("summary is not an object")
        values = {}
        for name in cls.__dataclass_fields__:
            value = raw.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise _Malformed(f"summary.{name} is not an integer")
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot without its images: what `list_info` returns, enough for `history`."""

    id: str
    created_at: datetime
    connect_cluster: str
    connector: str
    operation: str
    status: str
    message: str
    undo_of: str | None
    summary: SnapshotSummary


@dataclass(frozen=True)
class Snapshot:
    """The before- and after-image of one offset change on one connector.

    `created_at` must be aware; it is normalised to UTC. `before`/`after` accept any iterable
    of entries and are kept as tuples, in the given order.
    """

    id: str
    created_at: datetime
    connect_cluster: str  # name from config, or the URL when given by --connect-url
    connector: str
    operation: str  # "alter" | "reset" | "undo" | "offline-alter" | ...
    status: str  # "planned" | "applied" | "failed" | "left-stopped" | "undone" | ...
    before: tuple[OffsetEntry, ...]
    after: tuple[OffsetEntry, ...]
    message: str = ""
    undo_of: str | None = None

    def __post_init__(self) -> None:
        if not is_snapshot_id(self.id):
            raise ValueError(
                f"invalid snapshot id {self.id!r}: use up to 200 letters, digits, '.', '_', '-'"
            )
        if self.created_at.tzinfo is None or self.created_at.utcoffset() is None:
            raise ValueError("Snapshot.created_at must be an aware datetime")
        object.__setattr__(self, "created_at", self.created_at.astimezone(UTC))
        object.__setattr__(self, "before", tuple(self.before))
        object.__setattr__(self, "after", tuple(self.after))

    @cached_property
    def summary(self) -> SnapshotSummary:
        return SnapshotSummary.of(self.before, self.after)

    @property
    def info(self) -> SnapshotInfo:
        return SnapshotInfo(
            id=self.id,
            created_at=self.created_at,
            connect_cluster=self.connect_cluster,
            connector=self.connector,
            operation=self.operation,
            status=self.status,
            message=self.message,
            undo_of=self.undo_of,
            summary=self.summary,
        )

    def as_json(self) -> dict[str, Any]:
        """Metadata and both images as plain JSON values (`from_json` reverses it exactly)."""
        return {**_metadata_json(self.info), **_images_json(self)}

    @classmethod
    def from_json(cls, raw: Any) -> Snapshot:
        """The inverse of `as_json`; raises ValueError if `raw` does not have its shape."""
        if not isinstance(raw, dict):
            raise _Malformed("a snapshot is a JSON object")
        return _snapshot_of(_info_of(raw, summary=False), raw)


def _metadata_json(info: SnapshotInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "created_at": info.created_at.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "connect_cluster": info.connect_cluster,
        "connector": info.connector,
        "operation": info.operation,
        "status": info.status,
        "message": info.message,
        "undo_of": info.undo_of,
    }


def _images_json(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "before": [entry.as_json() for entry in snapshot.before],
        "after": [entry.as_json() for entry in snapshot.after],
    }


def _str_field(raw: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    value = raw.get(name)
    if isinstance(value, str) or (optional and value is None):
        return value
    raise _Malformed(f"{name} is not a string")


def _info_of(raw: Mapping[str, Any], *, summary: bool = True) -> SnapshotInfo:
    snapshot_id = _str_field(raw, "id")
    if not is_snapshot_id(snapshot_id):
        raise _Malformed("id is not a snapshot id")
    try:
        created_at = datetime.fromisoformat(_str_field(raw, "created_at"))
    except ValueError:
        raise _Malformed("created_at is not an ISO 8601 time") from None
    if created_at.tzinfo is None:
        raise _Malformed("created_at has no time zone")
    return SnapshotInfo(
        id=snapshot_id,
        created_at=created_at.astimezone(UTC),
        connect_cluster=_str_field(raw, "connect_cluster"),
        connector=_str_field(raw, "connector"),
        operation=_str_field(raw, "operation"),
        status=_str_field(raw, "status"),
        message=_str_field(raw, "message"),
        undo_of=_str_field(raw, "undo_of", optional=True),
        summary=SnapshotSummary.from_json(raw.get("summary")) if summary else _NO_SUMMARY,
    )


_NO_SUMMARY = SnapshotSummary(0, 0, 0, 0, 0, 0)


def _scalar_map(raw: Any, what: str) -> dict[str, JsonScalar]:
    if not isinstance(raw, dict):
        raise _Malformed(f"{what} is not an object")
    for value in raw.values():
        if isinstance(value, dict | list):
            raise _Malformed(f"{what} holds a nested value")
    return raw


def _entries_of(raw: Any, name: str) -> tuple[OffsetEntry, ...]:
    if not isinstance(raw, list):
        raise _Malformed(f"{name} is not a list")
    entries = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _Malformed(f"{name}[{i}] is not an object")
        partition = _scalar_map(item.get("partition"), f"{name}[{i}].partition")
        offset = item.get("offset")
        entries.append(
            OffsetEntry(
                partition, None if offset is None else _scalar_map(offset, f"{name}[{i}].offset")
            )
        )
    return tuple(entries)


def _snapshot_of(info: SnapshotInfo, images: Mapping[str, Any]) -> Snapshot:
    return Snapshot(
        id=info.id,
        created_at=info.created_at,
        connect_cluster=info.connect_cluster,
        connector=info.connector,
        operation=info.operation,
        status=info.status,
        before=_entries_of(images.get("before"), "before"),
        after=_entries_of(images.get("after"), "after"),
        message=info.message,
        undo_of=info.undo_of,
    )


def _dumps(value: Any, snapshot_id: str) -> bytes:
    """Canonical compact JSON (ASCII, sorted keys): same content, same bytes, same checksum."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ValueError(
            f"snapshot {snapshot_id}: offsets hold NaN or infinity, which JSON cannot represent"
        ) from None
    return text.encode("ascii")


def _loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise _Malformed(f"{what} is not JSON") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _header_json(snapshot: Snapshot, payload: bytes) -> dict[str, Any]:
    return {
        "kind": _HEADER_KIND,
        "format": FORMAT_VERSION,
        **_metadata_json(snapshot.info),
        "summary": snapshot.summary.as_json(),
        "payload_size": len(payload),
        "payload_sha256": _sha256(payload),
    }


def _check_header(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or raw.get("kind") != _HEADER_KIND:
        raise _Malformed("not an offsetd snapshot header")
    version = raw.get("format")
    if version != FORMAT_VERSION:
        raise _Malformed(
            f"format {version!r} is not {FORMAT_VERSION} (written by another offsetd?)"
        )
    return raw


def _int_field(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Malformed(f"{name} is not a count")
    return value


def _images_from_payload(
    header: Mapping[str, Any], payload: bytes, where: Callable[[], str]
) -> Snapshot:
    if len(payload) != header.get("payload_size") or _sha256(payload) != header.get(
        "payload_sha256"
    ):
        raise SnapshotCorrupt(f"{where()}: checksum mismatch of the offset images")
    try:
        images = _loads(payload, "the images")
        if not isinstance(images, dict):
            raise _Malformed("the images are not an object")
        return _snapshot_of(_info_of(header), images)
    except _Malformed as exc:
        raise SnapshotCorrupt(f"{where()}: {exc}") from None


# -- chunks (the Kafka format, kept pure for tests) ---------------------------------------------


def split_chunks(data: bytes, size: int) -> builtins.list[bytes]:
    """`data` in pieces of at most `size` bytes (at least one piece, maybe empty)."""
    if size < 1:
        raise ValueError(f"chunk size must be positive ({size})")
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


def join_chunks(chunks: Sequence[bytes | None]) -> bytes:
    """The inverse of `split_chunks`; raises ValueError naming the first missing piece."""
    for i, chunk in enumerate(chunks):
        if chunk is None:
            raise ValueError(f"chunk {i} of {len(chunks)} is missing")
    return b"".join(c for c in chunks if c is not None)


def chunk_key(snapshot_id: str, chunk_set: str, index: int) -> str:
    """Record key of one chunk: `<id>/chunk/<set>/<index>`."""
    return f"{snapshot_id}/chunk/{chunk_set}/{index}"


def pack_snapshot(
    snapshot: Snapshot, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[dict[str, Any], builtins.list[bytes]]:
    """The header (JSON object) and chunk values a snapshot is stored as in Kafka."""
    payload = _dumps(_images_json(snapshot), snapshot.id)
    compressed = zlib.compress(payload, 6)
    chunks = split_chunks(compressed, chunk_size)
    # The set name changes whenever the chunk bytes would: rewrites never overwrite in place.
    chunk_set = _sha256(f"{chunk_size}\n".encode() + compressed)[:16]
    header = {
        **_header_json(snapshot, payload),
        "encoding": _ENCODING,
        "compressed_size": len(compressed),
        "compressed_sha256": _sha256(compressed),
        "chunk_set": chunk_set,
        "chunks": len(chunks),
    }
    return header, chunks


def unpack_snapshot(
    header: Mapping[str, Any], chunks: Sequence[bytes | None], where: str = "snapshot"
) -> Snapshot:
    """The inverse of `pack_snapshot`; raises SnapshotCorrupt naming `where` on any damage."""

    def at() -> str:
        return f"{where} is corrupt"

    try:
        _check_header(header)
        if header.get("encoding") != _ENCODING:
            raise _Malformed(f"unknown encoding {header.get('encoding')!r}")
        size = _int_field(header, "payload_size")
        compressed = join_chunks(chunks)
    except (_Malformed, ValueError) as exc:
        raise SnapshotCorrupt(f"{at()}: {exc}") from None
    if len(compressed) != header.get("compressed_size") or _sha256(compressed) != header.get(
        "compressed_sha256"
    ):
        raise SnapshotCorrupt(f"{at()}: checksum mismatch of its chunks")
    decompressor = zlib.decompressobj()
    try:
        payload = decompressor.decompress(compressed, size + 1)  # bounded: no zip bombs
    except zlib.error:
        raise SnapshotCorrupt(f"{at()}: the chunks do not decompress") from None
    if not decompressor.eof:
        raise SnapshotCorrupt(f"{at()}: the images do not match their recorded size")
    return _images_from_payload(header, payload, at)


# -- the protocol -------------------------------------------------------------------------------


class SnapshotStore(Protocol):
    """Where snapshots live. `put` returns only once the write is durable."""

    def put(self, snapshot: Snapshot) -> None:
        """Write, or overwrite by id (e.g. a new status)."""

    def get(self, snapshot_id: str) -> Snapshot:
        """The snapshot, or SnapshotNotFound."""

    def list(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[Snapshot]:
        """Newest first (by created_at, then id), with images; `limit=None` for all.

        Only the selected snapshots are decompressed; unreadable ones are skipped (logged).
        """

    def list_info(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[SnapshotInfo]:
        """Like `list` but metadata and summary only: never decompresses images."""


def _select(
    infos: Iterable[SnapshotInfo],
    connector: str | None,
    connect_cluster: str | None,
    limit: int | None,
) -> builtins.list[SnapshotInfo]:
    chosen = [
        info
        for info in infos
        if (connector is None or info.connector == connector)
        and (connect_cluster is None or info.connect_cluster == connect_cluster)
    ]
    chosen.sort(key=lambda info: (info.created_at, info.id), reverse=True)
    return chosen if limit is None else chosen[: max(limit, 0)]


# -- files --------------------------------------------------------------------------------------


def default_snapshot_dir() -> Path:
    """`$XDG_STATE_HOME/offsetd/snapshots`, or `~/.local/state/offsetd/snapshots`."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "offsetd" / "snapshots"


def default_file_store() -> FileSnapshotStore:
    return FileSnapshotStore(default_snapshot_dir())


class FileSnapshotStore:
    """One gzip file per snapshot: line 1 the header, line 2 the images (both JSON)."""

    SUFFIX = ".json.gz"

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"FileSnapshotStore({str(self.directory)!r})"

    def path_of(self, snapshot_id: str) -> Path:
        if not is_snapshot_id(snapshot_id):
            raise ValueError(f"invalid snapshot id {snapshot_id!r}")
        return self.directory / f"{snapshot_id}{self.SUFFIX}"

    def put(self, snapshot: Snapshot) -> None:
        payload = _dumps(_images_json(snapshot), snapshot.id)
        header = _dumps(_header_json(snapshot, payload), snapshot.id)
        data = gzip.compress(header + b"\n" + payload + b"\n", compresslevel=6, mtime=0)
        target = self.path_of(snapshot.id)
        tmp: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{snapshot.id}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
            tmp = None
            _fsync_dir(self.directory)
        except OSError as exc:
            raise SnapshotStoreError(
                f"cannot write snapshot {snapshot.id} to {self.directory}: {exc.strerror or exc}"
            ) from None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def get(self, snapshot_id: str) -> Snapshot:
        if not is_snapshot_id(snapshot_id):
            raise SnapshotNotFound(snapshot_id, str(self.directory))
        path = self.path_of(snapshot_id)
        try:
            data = gzip.decompress(path.read_bytes())
        except FileNotFoundError:
            raise SnapshotNotFound(snapshot_id, str(self.directory)) from None
        except OSError as exc:  # gzip.BadGzipFile is an OSError
            if isinstance(exc, gzip.BadGzipFile):
                raise SnapshotCorrupt(f"snapshot file {path} is corrupt: not gzip") from None
            raise SnapshotStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (EOFError, zlib.error):
            raise SnapshotCorrupt(f"snapshot file {path} is corrupt: truncated") from None

        def where() -> str:
            return f"snapshot file {path} is corrupt"

        header_line, _, rest = data.partition(b"\n")
        payload, newline, tail = rest.partition(b"\n")
        if not newline or tail:
            raise SnapshotCorrupt(f"{where()}: expected two JSON lines")
        try:
            header = _check_header(_loads(header_line, "the header"))
            if header.get("id") != snapshot_id:
                raise _Malformed(f"it holds snapshot {header.get('id')!r}")
        except _Malformed as exc:
            raise SnapshotCorrupt(f"{where()}: {exc}") from None
        return _images_from_payload(header, payload, where)

    def list(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[Snapshot]:
        snapshots = []
        for info in self.list_info(
            connector=connector, connect_cluster=connect_cluster, limit=limit
        ):
            try:
                snapshot = self.get(info.id)
            except SnapshotNotFound:
                continue  # removed meanwhile
            except SnapshotCorrupt as exc:
                log.warning("skipping snapshot %s: %s", info.id, exc)
                continue
            snapshots.append(snapshot)
        return snapshots

    def list_info(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[SnapshotInfo]:
        try:
            paths = [p for p in self.directory.iterdir() if p.name.endswith(self.SUFFIX)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SnapshotStoreError(
                f"cannot list snapshots in {self.directory}: {exc.strerror or exc}"
            ) from None
        infos = []
        for path in paths:
            if path.name.startswith("."):
                continue
            info = self._read_info(path)
            if info is not None:
                infos.append(info)
        return _select(infos, connector, connect_cluster, limit)

    @staticmethod
    def _read_info(path: Path) -> SnapshotInfo | None:
        """The header only: gzip decompresses just the start of the file."""
        try:
            with gzip.open(path, "rb") as src:
                line = src.readline(1 << 20)
            return _info_of(_check_header(_loads(line, "the header")))
        except FileNotFoundError:
            return None  # removed meanwhile
        except (OSError, EOFError, zlib.error, _Malformed) as exc:
            log.warning("skipping unreadable snapshot file %s: %s", path, exc)
            return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- Kafka --------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """A librdkafka error's own text (never the client configuration)."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return str(err.str())
    return str(exc)


class _Scan:
    """What a read of the topic keeps: the latest value per key; chunk values only if wanted."""

    def __init__(self, keep_chunk: Callable[[str], bool]) -> None:
        self.keep_chunk = keep_chunk
        self.headers: dict[str, bytes] = {}  # id -> latest header (tombstoned ids dropped)
        self.chunks: dict[str, bytes | None] = {}  # chunk key -> latest value (kept ones)

    def add(self, key: str, value: bytes | None) -> None:
        if "/" not in key:
            if value is None:
                self.headers.pop(key, None)
            else:
                self.headers[key] = value
        elif self.keep_chunk(key):
            self.chunks[key] = value


class KafkaSnapshotStore:
    """Snapshots in a compacted single-partition topic, chunked and zlib-compressed.

    `conf` is a librdkafka configuration (e.g. `KafkaCluster.client_config()`); it is only
    handed to clients, never shown. The topic is created on the first `put` if missing
    (1 partition, `cleanup.policy=compact`, replication factor min(3, brokers) unless given);
    an existing topic that is not compacted or has several partitions is refused.
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str = DEFAULT_TOPIC,
        *,
        replication_factor: int | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        timeout_s: float = 30.0,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive ({chunk_size})")
        self._conf = dict(conf)
        self.topic = topic
        self.replication_factor = replication_factor
        self.chunk_size = chunk_size
        self.timeout_s = timeout_s
        self._producer: Producer | None = None
        self._put_lock = threading.Lock()
        self._topic_ok = False
        # id -> (chunk set, count) of the latest header this store read or wrote: the set to
        # tombstone once a rewrite with other chunks is acknowledged. Only sets a header
        # referenced: chunks without a header may be another writer's put in progress.
        self._referenced: dict[str, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f"KafkaSnapshotStore(topic={self.topic!r})"

    def __enter__(self) -> KafkaSnapshotStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.timeout_s)

    @property
    def _where(self) -> str:
        return f"Kafka topic {self.topic}"

    # -- topic --------------------------------------------------------------------------------

    def ensure_topic(self, *, create: bool = True) -> bool:
        """Check (and with `create`, create) the topic; False if it is missing. Cached."""
        if self._topic_ok:
            return True
        admin = AdminClient({**self._conf, "allow.auto.create.topics": "false"})
        try:
            # All topics, not just ours: a metadata request naming a topic can auto-create it
            # (with the broker's defaults, i.e. not compacted).
            metadata = admin.list_topics(timeout=self.timeout_s)
            found = metadata.topics.get(self.topic)
            if found is None or (
                found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):
                if not create:
                    return False
                self._create_topic(admin, len(metadata.brokers))
                return True
            if found.error is not None:
                raise SnapshotStoreError(f"cannot use {self._where}: {found.error.str()}")
            self._check_topic(admin, len(found.partitions))
        except KafkaException as exc:
            raise SnapshotStoreError(f"cannot check {self._where}: {_reason(exc)}") from None
        self._topic_ok = True
        return True

    def _create_topic(self, admin: AdminClient, brokers: int) -> None:
        replicas = self.replication_factor or max(1, min(3, brokers))
        config = {"cleanup.policy": "compact", "min.insync.replicas": "2" if replicas >= 3 else "1"}
        future = admin.create_topics(
            [NewTopic(self.topic, 1, replicas, config=config)], operation_timeout=self.timeout_s
        )[self.topic]
        try:
            future.result(timeout=self.timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise SnapshotStoreError(
                    f"cannot create {self._where} (compacted, replication factor {replicas}): "
                    f"{_reason(exc)}"
                ) from None
            # Someone else created it meanwhile: check theirs like any existing topic.
            metadata = admin.list_topics(timeout=self.timeout_s)
            found = metadata.topics.get(self.topic)
            self._check_topic(admin, len(found.partitions) if found is not None else 0)
        else:
            log.info("created snapshot topic %s (replication factor %d)", self.topic, replicas)
        self._topic_ok = True

    def _check_topic(self, admin: AdminClient, partitions: int) -> None:
        resource = _ConfigResource(_ResourceType.TOPIC, self.topic)
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=self.timeout_s)
        except KafkaException as exc:
            raise SnapshotStoreError(
                f"cannot read the configuration of {self._where}: {_reason(exc)}"
            ) from None
        entry = entries.get("cleanup.policy")
        policy = str(entry.value) if entry is not None and entry.value is not None else "delete"
        if "compact" not in [p.strip() for p in policy.split(",")]:
            raise SnapshotStoreError(
                f"refusing to use {self._where} for snapshots: its cleanup.policy is {policy!r}, "
                "so old snapshots would be deleted; set cleanup.policy=compact or choose another "
                "topic"
            )
        if partitions != 1:
            raise SnapshotStoreError(
                f"refusing to use {self._where} for snapshots: it has {partitions} partitions, "
                "it needs exactly 1 (chunks and their header must stay in order)"
            )

    # -- writing ------------------------------------------------------------------------------

    def put(self, snapshot: Snapshot) -> None:
        # One put at a time: a store is shared by the daemon's concurrent sagas (in threads).
        with self._put_lock:
            self._put(snapshot)

    def _put(self, snapshot: Snapshot) -> None:
        self.ensure_topic(create=True)
        header, chunks = pack_snapshot(snapshot, self.chunk_size)
        chunk_set = str(header["chunk_set"])
        # Chunks first and acknowledged, then the header: a header never precedes its chunks.
        self._produce(
            [(chunk_key(snapshot.id, chunk_set, i), chunk) for i, chunk in enumerate(chunks)],
            f"snapshot {snapshot.id}",
        )
        self._produce([(snapshot.id, _dumps(header, snapshot.id))], f"snapshot {snapshot.id}")
        previous = self._referenced.get(snapshot.id)
        self._referenced[snapshot.id] = (chunk_set, len(chunks))
        stale = []
        if previous is not None and previous[0] != chunk_set:
            stale = [chunk_key(snapshot.id, previous[0], i) for i in range(previous[1])]
        if stale:
            try:
                self._produce([(key, None) for key in stale], f"old chunks of {snapshot.id}")
            except SnapshotStoreError as exc:  # the snapshot is stored; only garbage is left
                log.warning("%s (they are unused and harmless)", exc)

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                {
                    **self._conf,
                    "acks": "all",
                    # Order comes from waiting for every batch (chunks, then header, then
                    # tombstones), and a duplicated record is harmless (same key and value):
                    # idempotence adds nothing but ~0.5 s of producer-id setup per process.
                    "enable.idempotence": "false",
                    "compression.type": "none",  # chunks are compressed already
                    "linger.ms": "5",
                    "message.timeout.ms": str(max(1000, int(self.timeout_s * 1000))),
                    "allow.auto.create.topics": "false",
                }
            )
        return self._producer

    def _produce(self, records: Sequence[tuple[str, bytes | None]], what: str) -> None:
        """Produce to partition 0 and wait until every record is acknowledged by all ISRs."""
        producer = self._get_producer()
        errors: builtins.list[str] = []
        acked = 0

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal acked
            if err is not None:
                errors.append(str(err.str()))
            else:
                acked += 1

        deadline = time.monotonic() + self.timeout_s
        try:
            for key, value in records:
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            key=key.encode(),
                            value=value,
                            partition=0,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        if time.monotonic() > deadline:
                            raise
                        producer.poll(0.1)
            remaining = producer.flush(self.timeout_s + 5)
        except (KafkaException, BufferError) as exc:
            self._drop_producer()
            raise SnapshotStoreError(
                f"cannot write {what} to {self._where}: {_reason(exc)}"
            ) from None
        if remaining or errors or acked != len(records):
            self._drop_producer()
            detail = errors[0] if errors else f"{len(records) - acked} not acknowledged in time"
            raise SnapshotStoreError(
                f"cannot write {what} to {self._where}: {len(records) - acked} of "
                f"{len(records)} records failed ({detail})"
            )

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                producer.purge()
                producer.flush(0)

    # -- reading ------------------------------------------------------------------------------

    def get(self, snapshot_id: str) -> Snapshot:
        if not is_snapshot_id(snapshot_id) or not self.ensure_topic(create=False):
            raise SnapshotNotFound(snapshot_id, self._where)
        prefix = f"{snapshot_id}/chunk/"
        scan = self._scan(lambda key: key.startswith(prefix))
        raw = scan.headers.get(snapshot_id)
        if raw is None:
            raise SnapshotNotFound(snapshot_id, self._where)
        where = f"snapshot {snapshot_id} in {self._where}"
        try:
            header = _check_header(_loads(raw, "the header"))
        except _Malformed as exc:
            raise SnapshotCorrupt(f"{where} is corrupt: {exc}") from None
        return self._assemble(snapshot_id, header, scan)

    def list(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[Snapshot]:
        if not self.ensure_topic(create=False):
            return []
        # One read keeps the chunks of every snapshot; only the selected ones are decompressed.
        scan = self._scan(lambda _key: True)
        headers = self._headers(scan)
        snapshots = []
        for info in _select(
            (info for info, _ in headers.values()), connector, connect_cluster, limit
        ):
            try:
                snapshots.append(self._assemble(info.id, headers[info.id][1], scan))
            except SnapshotCorrupt as exc:
                log.warning("skipping snapshot %s: %s", info.id, exc)
        return snapshots

    def list_info(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[SnapshotInfo]:
        if not self.ensure_topic(create=False):
            return []
        headers = self._headers(self._scan(lambda _key: False))
        return _select((info for info, _ in headers.values()), connector, connect_cluster, limit)

    def _headers(self, scan: _Scan) -> dict[str, tuple[SnapshotInfo, dict[str, Any]]]:
        """The readable headers of a scan; unreadable ones are logged and left out."""
        out = {}
        for snapshot_id, raw in scan.headers.items():
            try:
                header = _check_header(_loads(raw, "the header"))
                info = _info_of(header)
                if info.id != snapshot_id:
                    raise _Malformed(f"it holds snapshot {info.id!r}")
            except _Malformed as exc:
                log.warning(
                    "skipping unreadable snapshot header %r in %s: %s",
                    snapshot_id,
                    self._where,
                    exc,
                )
                continue
            out[snapshot_id] = (info, header)
        return out

    def _assemble(self, snapshot_id: str, header: dict[str, Any], scan: _Scan) -> Snapshot:
        where = f"snapshot {snapshot_id} in {self._where}"
        try:
            chunk_set = _str_field(header, "chunk_set")
            count = _int_field(header, "chunks")
        except _Malformed as exc:
            raise SnapshotCorrupt(f"{where} is corrupt: {exc}") from None
        self._referenced[snapshot_id] = (chunk_set, count)
        chunks = [scan.chunks.get(chunk_key(snapshot_id, chunk_set, i)) for i in range(count)]
        return unpack_snapshot(header, chunks, where)

    def _scan(self, keep_chunk: Callable[[str], bool]) -> _Scan:
        """Read the partition from its start to the high watermark (no group, no commits)."""
        scan = _Scan(keep_chunk)
        consumer = Consumer(
            {
                **self._conf,
                "group.id": "offsetd-snapshot-reader",  # never joined: partitions are assigned
                "enable.auto.commit": "false",
                "enable.auto.offset.store": "false",
                "enable.partition.eof": "true",
                "auto.offset.reset": "earliest",
                "allow.auto.create.topics": "false",
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=self.timeout_s
            )
            if high > low:
                consumer.assign([TopicPartition(self.topic, 0, low)])
                self._read_until(consumer, high, scan)
        except KafkaException as exc:
            raise SnapshotStoreError(f"cannot read {self._where}: {_reason(exc)}") from None
        finally:
            consumer.close()
        return scan

    def _read_until(self, consumer: Consumer, high: int, scan: _Scan) -> None:
        deadline = time.monotonic() + self.timeout_s
        position = -1
        while position < high - 1:
            msg = consumer.poll(0.5)  # returns as soon as a record is there (consume() waits)
            if msg is None:
                if time.monotonic() > deadline:
                    raise SnapshotStoreError(
                        f"timed out reading {self._where} (at offset {position + 1} of {high})"
                    )
                continue
            deadline = time.monotonic() + self.timeout_s  # a deadline without progress
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return
                raise SnapshotStoreError(f"cannot read {self._where}: {err.str()}")
            position = max(position, msg.offset() or 0)
            key, value = msg.key(), msg.value()
            if key:
                scan.add(
                    key.decode("utf-8", "replace") if isinstance(key, bytes) else key,
                    value.encode() if isinstance(value, str) else value,
                )
