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

from collections.abc import Iterable
from dataclasses import dataclass

from offsetd.offsets.offline_view import decode_key, decode_value

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
    return connector, cluster, topic, number


class MirrorOffsets:
    """Latest N per MirrorSourceConnector partition, updated record by record."""

    def __init__(self) -> None:
        self.positions: dict[MirrorKey, Position] = {}
        self._keys: dict[bytes, MirrorKey | None] = {}
        self.malformed = 0

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
                self.positions.pop(mirror, None)
                continue
            n = offset.get("offset")
            if not isinstance(n, int) or isinstance(n, bool):
                self.malformed += 1
                continue
            current = self.positions.get(mirror)
            if current is None:
                self.positions[mirror] = Position(n, ts)
            elif current.n != n:
                current.n = n
                current.changed_ms = ts
        return applied

    def of_connector(self, connector: str) -> dict[tuple[str, int], tuple[str, Position]]:
        """(topic, partition) -> (source alias, position) for one connector."""
        return {
            (topic, part): (cluster, pos)
            for (name, cluster, topic, part), pos in self.positions.items()
            if name == connector
        }
