"""MirrorCheckpointConnector's checkpoints, decoded, and the failover math (pure, no I/O).

Checkpoints live in `<source>.checkpoints.internal` on the target cluster, one partition
(`Checkpoint.java`): key = group STRING, topic STRING (the *renamed* downstream topic),
partition INT32; value = version INT16 (0), upstreamOffset INT64, offset INT64 (downstream),
metadata STRING. STRING is an INT16 length then UTF-8; all integers big-endian.

The record timestamp is when MM2 computed the checkpoint. MM2 does not re-emit a checkpoint
whose offsets did not change, so an idle group's checkpoint simply grows old: its age means
something only while the group's committed offset on the source is past the checkpoint's
upstream offset (the group moved, the checkpoint did not follow). A group failing over now
would restart at the checkpoint's downstream offset, which maps to at most its upstream
offset, so it re-consumes at least `committed - upstreamOffset` records: a lower bound
(translation rounds down to the previous offset sync, so the true number can be larger).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "checkpoint_age_seconds",
    "decode_checkpoint",
    "read_string",
    "reconsume_lower_bound",
    "upstream_topic",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE = struct.Struct(">hqq")


class CheckpointError(ValueError):
    """A record that is not a checkpoint in MM2's format."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    group: str
    topic: str  # downstream (renamed) topic, as in the key
    partition: int
    upstream_offset: int
    downstream_offset: int
    timestamp_ms: int


def read_string(raw: bytes, at: int) -> tuple[str, int]:
    """A Kafka protocol STRING (INT16 length, UTF-8) at `at`, and where the next field begins."""
    if at + 2 > len(raw):
        raise CheckpointError("truncated string length")
    (length,) = _I16.unpack_from(raw, at)
    at += 2
    if length < 0 or at + length > len(raw):
        raise CheckpointError("bad string length")
    try:
        return raw[at : at + length].decode("utf-8"), at + length
    except UnicodeDecodeError:
        raise CheckpointError("string is not UTF-8") from None


def decode_checkpoint(key: bytes | None, value: bytes | None, timestamp_ms: int) -> Checkpoint:
    """One checkpoints-topic record, or `CheckpointError`."""
    if key is None or value is None:
        raise CheckpointError("no key or no value")
    group, at = read_string(key, 0)
    topic, at = read_string(key, at)
    if at + 4 != len(key):
        raise CheckpointError("key has the wrong length")
    (partition,) = _I32.unpack_from(key, at)
    if len(value) < _VALUE.size:
        raise CheckpointError("value too short")
    version, upstream, downstream = _VALUE.unpack_from(value, 0)
    if version != 0:
        raise CheckpointError(f"unknown checkpoint version {version}")
    return Checkpoint(group, topic, partition, upstream, downstream, timestamp_ms)


def upstream_topic(downstream: str, source_alias: str, separator: str = ".") -> str:
    """The source topic of a renamed one (DefaultReplicationPolicy: `<source><sep><topic>`).

    A topic without the prefix is returned as is (IdentityReplicationPolicy keeps names).
    """
    prefix = f"{source_alias}{separator}"
    return downstream[len(prefix) :] if downstream.startswith(prefix) else downstream


def reconsume_lower_bound(group_offset: int, checkpoint: Checkpoint) -> int:
    """Records the group would consume again if it failed over now (at least this many)."""
    return max(0, group_offset - checkpoint.upstream_offset)


def checkpoint_age_seconds(
    group_offset: int | None, checkpoint: Checkpoint, now_ms: int
) -> float | None:
    """Checkpoint age, or None while the group has not moved past it (nothing to alarm on)."""
    if group_offset is None or group_offset <= checkpoint.upstream_offset:
        return None
    return max(0.0, (now_ms - checkpoint.timestamp_ms) / 1000.0)
