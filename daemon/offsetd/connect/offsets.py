"""Offsets on the wire of Connect's REST API (KIP-875): (partition map, offset map) pairs.

`GET /connectors/{c}/offsets` answers `{"offsets": [{"partition": {...}, "offset": {...}}]}` and
PATCH takes the same shape (`"offset": null` removes a partition). This is the client's own
type; the offsets toolkit (`offsetd.offsets.model`) builds its arithmetic on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JsonScalar",
    "OffsetEntry",
    "OffsetMap",
    "PartitionMap",
    "entries_from_json",
    "partition_key",
]

JsonScalar = str | int | float | bool | None
PartitionMap = dict[str, JsonScalar]
OffsetMap = dict[str, JsonScalar]


@dataclass(frozen=True)
class OffsetEntry:
    """One partition and its offset; `offset=None` means "remove this partition"."""

    partition: PartitionMap
    offset: OffsetMap | None

    @property
    def key(self) -> str:
        return partition_key(self.partition)

    def as_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "offset": self.offset}


def partition_key(partition: Mapping[str, JsonScalar]) -> str:
    """A canonical, order-independent identity for a partition map (for diffs and lookups)."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def entries_from_json(raw: Iterable[Mapping[str, Any]]) -> list[OffsetEntry]:
    """Entries from Connect's JSON (already validated by the caller or by Connect itself)."""
    return [OffsetEntry(dict(e["partition"]), _offset_or_none(e.get("offset"))) for e in raw]


def _offset_or_none(value: Any) -> OffsetMap | None:
    return None if value is None else dict(value)
