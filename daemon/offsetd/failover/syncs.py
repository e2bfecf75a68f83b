"""MM2's offset syncs, decoded and searched (pure).

An offset sync (`OffsetSync.java`, `mm2-offset-syncs.<alias>.internal`, one partition,
compacted) says: the upstream record at `upstream` was written downstream at `downstream`.
Key = upstream topic STRING + partition INT32; value = upstream INT64 + downstream INT64, no
version. A sync is an exact pair, so it translates both ways:
- forward (failover), like MM2's `OffsetSyncStore.translateDownstream`: a group at upstream
  `s` goes to the downstream of the newest sync at or below `s`, plus one when `s` is past it
  (the records in between are re-read, none skipped);
- inverse (failback): a group at downstream `s` goes back to the upstream of the newest sync
  at or below `s`, plus one when past it.
Compaction keeps only the newest sync of a partition; whatever history is still in the topic is
used.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from offsetd.lag.checkpoints import CheckpointError, read_string

__all__ = ["OffsetSync", "SyncIndex", "decode_offset_sync"]

_I32 = struct.Struct(">i")
_VALUE = struct.Struct(">qq")

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetSync:
    topic: str  # upstream topic
    partition: int
    upstream: int
    downstream: int


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync:
    """One offset-syncs record, or `CheckpointError` (a record not in MM2's format)."""
    if key is None or value is None:
        raise CheckpointError("no key or no value")
    topic, at = read_string(key, 0)
    if at + 4 != len(key):
        raise CheckpointError("key has the wrong length")
    (partition,) = _I32.unpack_from(key, at)
    if len(value) != _VALUE.size:
        raise CheckpointError("value is not two offsets")
    upstream, downstream = _VALUE.unpack(value)
    if upstream < 0 or downstream < 0:
        raise CheckpointError("negative offset")
    return OffsetSync(topic, partition, upstream, downstream)


class SyncIndex:
    """Every sync read, per upstream partition, searchable in both directions."""

    def __init__(self, syncs: Iterable[OffsetSync] = ()) -> None:
        pairs: dict[TP, set[tuple[int, int]]] = {}
        for sync in syncs:
            pairs.setdefault((sync.topic, sync.partition), set()).add(
                (sync.upstream, sync.downstream)
            )
        # Both orders agree for a sane flow; kept apart so a bad pair cannot mislead a search.
        self._by_up = {tp: sorted(p) for tp, p in pairs.items()}
        self._by_down = {tp: sorted((d, u) for u, d in p) for tp, p in pairs.items()}
        self._topics = frozenset(topic for topic, _p in pairs)

    def __len__(self) -> int:
        return sum(len(pairs) for pairs in self._by_up.values())

    def partitions(self) -> set[TP]:
        return set(self._by_up)

    def has_topic(self, topic: str) -> bool:
        """Whether any sync is of `topic` (asked per partition while planning: no set built)."""
        return topic in self._topics

    def count(self, tp: TP) -> int:
        return len(self._by_up.get(tp, ()))

    def forward(self, tp: TP, upstream: int) -> tuple[int, int, int] | None:
        """(downstream offset, sync upstream, sync downstream) for a group at `upstream` on
        the source, or None when no sync is at or below it."""
        pairs = self._by_up.get(tp)
        if not pairs:
            return None
        at = bisect.bisect_right(pairs, (upstream, 2**63)) - 1
        if at < 0:
            return None
        up, down = pairs[at]
        return down + (1 if upstream > up else 0), up, down

    def inverse(self, tp: TP, downstream: int) -> tuple[int, int, int] | None:
        """(upstream offset, sync upstream, sync downstream) for a group at `downstream` on the
        flow's target, or None when no sync is at or below it."""
        pairs = self._by_down.get(tp)
        if not pairs:
            return None
        at = bisect.bisect_right(pairs, (downstream, 2**63)) - 1
        if at < 0:
            return None
        down, up = pairs[at]
        return up + (1 if downstream > down else 0), up, down

    def next_upstream_after(self, tp: TP, downstream: int) -> int | None:
        """The upstream offset of the first sync whose downstream is past `downstream`."""
        pairs = self._by_down.get(tp)
        if not pairs:
            return None
        at = bisect.bisect_right(pairs, (downstream, 2**63))
        return pairs[at][1] if at < len(pairs) else None
