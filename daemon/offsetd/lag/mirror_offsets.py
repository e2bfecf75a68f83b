"""MirrorSourceConnector positions folded from Connect offsets-topic records (pure, no I/O).

Keys and values are decoded with the offline reader's parsers (`offline_view.decode_key` /
`decode_value`), the same that `offsetd offsets --offline` uses. A MirrorSourceConnector key is
`["<connector>", {"cluster": <source alias>, "partition": p, "topic": t}]` and its value
`{"offset": N}`, N = the last replicated source offset. Other connectors' records are skipped
(their keys are remembered, so each distinct key is decoded once). A tombstone removes the
partition. `changed_ms` is the timestamp of the record that last *changed* N: Connect only
writes offsets that moved, so it is also when N was last written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass

from offsetd.offsets.offline.view import decode_key, decode_value

__all__ = ["MirrorKey", "MirrorOffsets", "Position"]

#: (connector, source cluster alias, topic, partition)
MirrorKey = tuple[str, str, str, int]


@dataclass(slots=True)
class Position:
    n: int
    changed_ms: int


def _mirror_key(raw: bytes | None) -> MirrorKey | None:
    try:
        connector, partition = decode_key(raw)
    except Exception:  # offline_view's private "not Connect's format": not ours to read
        return None
    cluster, topic, number = (partition.get(k) for k in ("cluster", "topic", "partition"))
    if len(partition) != 3 or not isinstance(cluster, str) or not isinstance(topic, str):
        return None
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        return None
    # interned: every partition of a topic (and every key of a connector) shares one string
    return sys.intern(connector), sys.intern(cluster), sys.intern(topic), number


class MirrorOffsets:
    """Latest N per MirrorSourceConnector partition, updated record by record.

    `positions` is also indexed per (connector, source alias) (`of_flow`): a lag cycle takes a
    connector's partitions from it as they are, without a pass over every position, and asks
    which of them changed since its last look (`drain`), so an idle partition costs nothing.
    """

    def __init__(self) -> None:
        self.positions: dict[MirrorKey, Position] = {}
        self._by_flow: dict[tuple[str, str], dict[tuple[str, int], Position]] = {}
        self._dirty: dict[tuple[str, str], set[tuple[str, int]]] = {}
        self._keys: dict[bytes, MirrorKey | None] = {}
        self.malformed = 0

    def _touch(self, key: MirrorKey) -> None:
        connector, cluster, topic, partition = key
        self._dirty.setdefault((connector, cluster), set()).add((topic, partition))

    def put(self, key: MirrorKey, position: Position) -> None:
        """Record a new position object for `key`."""
        connector, cluster, topic, partition = key
        self.positions[key] = position
        self._by_flow.setdefault((connector, cluster), {})[(topic, partition)] = position
        self._touch(key)

    def move(self, key: MirrorKey, n: int, changed_ms: int) -> None:
        """N of `key` is now `n` (written at `changed_ms`); an unchanged N changes nothing."""
        current = self.positions.get(key)
        if current is None:
            self.put(key, Position(n, changed_ms))
        elif current.n != n:
            current.n = n
            current.changed_ms = changed_ms
            self._touch(key)

    def remove(self, key: MirrorKey) -> None:
        connector, cluster, topic, partition = key
        self.positions.pop(key, None)
        self._by_flow.get((connector, cluster), {}).pop((topic, partition), None)
        self._touch(key)

    def drain(self, connector: str, source: str) -> set[tuple[str, int]]:
        """The (topic, partition)s of a flow set, moved or removed since the last `drain`."""
        return self._dirty.pop((connector, source), set())

    def of_flow(self, connector: str, source: str) -> dict[tuple[str, int], Position]:
        """(topic, partition) -> position of one connector and source alias (live: do not change).

        The positions are the ones `apply` keeps updating in place.
        """
        return self._by_flow.get((connector, source), {})

    def apply(self, records: Iterable[tuple[bytes | None, bytes | None, int]]) -> int:
        """Fold (key, value, timestamp ms) records in log order; returns how many were MM2's."""
        applied = 0
        for key, value, ts in records:
            if key is None:
                continue
            mirror = self._keys.get(key, ...)
            if mirror is ...:
                mirror = self._keys[key] = _mirror_key(key)
            if mirror is None:
                continue
            applied += 1
            try:
                offset = decode_value(value)
            except Exception:  # a malformed value: Connect would skip it too
                self.malformed += 1
                continue
            if offset is None:
                self.remove(mirror)
                continue
            n = offset.get("offset")
            if not isinstance(n, int) or isinstance(n, bool):
                self.malformed += 1
                continue
            self.move(mirror, n, ts)
        return applied

    def of_connector(self, connector: str) -> dict[tuple[str, int], tuple[str, Position]]:
        """(topic, partition) -> (source alias, position) for one connector."""
        return {
            (topic, part): (cluster, pos)
            for (name, cluster, topic, part), pos in self.positions.items()
            if name == connector
        }
