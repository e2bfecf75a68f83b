"""How a snapshot is stored: canonical JSON, a checksummed header, and zlib chunks for Kafka.

Both stores write the same header (`header_json`: metadata, summary, payload size and SHA-256)
and check it the same way (`read_header`, `images_from_payload`). The Kafka store splits the
compressed images into chunks (`pack_snapshot` / `unpack_snapshot`); the chunk set name is
derived from the compressed bytes, so a rewrite with other images never overwrites in place.
Pure: no I/O, so the format is tested without a broker.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from offsetd.offsets.snapshots.errors import Malformed, SnapshotCorrupt
from offsetd.offsets.snapshots.records import (
    Snapshot,
    images_json,
    info_of,
    metadata_json,
    snapshot_of,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "FORMAT_VERSION",
    "check_header",
    "chunk_key",
    "dumps",
    "header_json",
    "images_from_payload",
    "int_field",
    "join_chunks",
    "loads",
    "pack_snapshot",
    "read_header",
    "split_chunks",
    "unpack_snapshot",
]

# 10k MirrorSource partitions (before + after) compress to ~180 KB: two chunks. Small enough to
# stay far below the broker's message.max.bytes (~1 MB) even a few to a produce batch.
DEFAULT_CHUNK_SIZE = 128 * 1024
FORMAT_VERSION = 1
_ENCODING = "zlib"
_HEADER_KIND = "offsetd.snapshot"


def dumps(value: Any, snapshot_id: str) -> bytes:
    """Canonical compact JSON (ASCII, sorted keys): same content, same bytes, same checksum."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ValueError(
            f"snapshot {snapshot_id}: offsets hold NaN or infinity, which JSON cannot represent"
        ) from None
    return text.encode("ascii")


def loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise Malformed(f"{what} is not JSON") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def header_json(snapshot: Snapshot, payload: bytes) -> dict[str, Any]:
    return {
        "kind": _HEADER_KIND,
        "format": FORMAT_VERSION,
        **metadata_json(snapshot.info),
        "summary": snapshot.summary.as_json(),
        "payload_size": len(payload),
        "payload_sha256": _sha256(payload),
    }


def check_header(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or raw.get("kind") != _HEADER_KIND:
        raise Malformed("not an offsetd snapshot header")
    version = raw.get("format")
    if version != FORMAT_VERSION:
        raise Malformed(f"format {version!r} is not {FORMAT_VERSION} (written by another offsetd?)")
    return raw


def read_header(raw: bytes) -> dict[str, Any]:
    """A stored header record or line, parsed and checked (raises `Malformed`)."""
    return check_header(loads(raw, "the header"))


def int_field(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Malformed(f"{name} is not a count")
    return value


def images_from_payload(
    header: Mapping[str, Any], payload: bytes, where: Callable[[], str]
) -> Snapshot:
    if len(payload) != header.get("payload_size") or _sha256(payload) != header.get(
        "payload_sha256"
    ):
        raise SnapshotCorrupt(f"{where()}: checksum mismatch of the offset images")
    try:
        images = loads(payload, "the images")
        if not isinstance(images, dict):
            raise Malformed("the images are not an object")
        return snapshot_of(info_of(header), images)
    except Malformed as exc:
        raise SnapshotCorrupt(f"{where()}: {exc}") from None


def split_chunks(data: bytes, size: int) -> list[bytes]:
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
) -> tuple[dict[str, Any], list[bytes]]:
    """The header (JSON object) and chunk values a snapshot is stored as in Kafka."""
    payload = dumps(images_json(snapshot), snapshot.id)
    compressed = zlib.compress(payload, 6)
    chunks = split_chunks(compressed, chunk_size)
    # The set name changes whenever the chunk bytes would: rewrites never overwrite in place.
    chunk_set = _sha256(f"{chunk_size}\n".encode() + compressed)[:16]
    header = {
        **header_json(snapshot, payload),
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
        check_header(header)
        if header.get("encoding") != _ENCODING:
            raise Malformed(f"unknown encoding {header.get('encoding')!r}")
        size = int_field(header, "payload_size")
        compressed = join_chunks(chunks)
    except (Malformed, ValueError) as exc:
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
    return images_from_payload(header, payload, at)
