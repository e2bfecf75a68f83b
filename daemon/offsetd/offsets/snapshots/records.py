"""A snapshot in memory: ids, the before/after images, the summary, and their JSON form.

`Snapshot.as_json` / `Snapshot.from_json` are exact inverses (1, 1.0 and true stay apart); the
stores build on `metadata_json`, `images_json`, `info_of` and `snapshot_of`. A JSON document
without the snapshot shape raises `Malformed`, which the stores report as `SnapshotCorrupt`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from offsetd.offsets.model import Change, JsonScalar, OffsetEntry, diff
from offsetd.offsets.snapshots.errors import Malformed

__all__ = [
    "Snapshot",
    "SnapshotInfo",
    "SnapshotSummary",
    "images_json",
    "info_of",
    "is_snapshot_id",
    "metadata_json",
    "new_snapshot_id",
    "snapshot_of",
    "str_field",
]

# Ids end up in file names and record keys: no '/', no leading dot.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def new_snapshot_id(now: datetime) -> str:
    """A unique id that sorts by time: `20261121T083000.123Z-3f2a9c` (UTC, ms, 24 random bits)."""
    if now.tzinfo is None:
        raise ValueError("new_snapshot_id needs an aware datetime (e.g. datetime.now(UTC))")
    utc = now.astimezone(UTC)
    return f"{utc:%Y%m%dT%H%M%S}.{utc.microsecond // 1000:03d}Z-{secrets.token_hex(3)}"


def is_snapshot_id(value: str) -> bool:
    """Whether `value` can be a snapshot id (letters, digits, '.', '_', '-'; no '/')."""
    return _ID_RE.fullmatch(value) is not None


# The metadata a `Snapshot` and its `SnapshotInfo` share, in the order of their JSON form.
_METADATA = (
    "id",
    "created_at",
    "connect_cluster",
    "connector",
    "operation",
    "status",
    "message",
    "undo_of",
)


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
            raise Malformed("summary is not an object")
        values = {}
        for name in cls.__dataclass_fields__:
            value = raw.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise Malformed(f"summary.{name} is not an integer")
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
            **{name: getattr(self, name) for name in _METADATA}, summary=self.summary
        )

    def as_json(self) -> dict[str, Any]:
        """Metadata and both images as plain JSON values (`from_json` reverses it exactly)."""
        return {**metadata_json(self.info), **images_json(self)}

    @classmethod
    def from_json(cls, raw: Any) -> Snapshot:
        """The inverse of `as_json`; raises ValueError if `raw` does not have its shape."""
        if not isinstance(raw, dict):
            raise Malformed("a snapshot is a JSON object")
        return snapshot_of(info_of(raw, summary=False), raw)


def metadata_json(info: SnapshotInfo) -> dict[str, Any]:
    meta = {name: getattr(info, name) for name in _METADATA}
    meta["created_at"] = info.created_at.isoformat(timespec="microseconds").replace("+00:00", "Z")
    return meta


def images_json(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "before": [entry.as_json() for entry in snapshot.before],
        "after": [entry.as_json() for entry in snapshot.after],
    }


def str_field(raw: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    value = raw.get(name)
    if isinstance(value, str) or (optional and value is None):
        return value
    raise Malformed(f"{name} is not a string")


def info_of(raw: Mapping[str, Any], *, summary: bool = True) -> SnapshotInfo:
    snapshot_id = str_field(raw, "id")
    if not is_snapshot_id(snapshot_id):
        raise Malformed("id is not a snapshot id")
    try:
        created_at = datetime.fromisoformat(str_field(raw, "created_at"))
    except ValueError:
        raise Malformed("created_at is not an ISO 8601 time") from None
    if created_at.tzinfo is None:
        raise Malformed("created_at has no time zone")
    return SnapshotInfo(
        id=snapshot_id,
        created_at=created_at.astimezone(UTC),
        connect_cluster=str_field(raw, "connect_cluster"),
        connector=str_field(raw, "connector"),
        operation=str_field(raw, "operation"),
        status=str_field(raw, "status"),
        message=str_field(raw, "message"),
        undo_of=str_field(raw, "undo_of", optional=True),
        summary=SnapshotSummary.from_json(raw.get("summary")) if summary else _NO_SUMMARY,
    )


_NO_SUMMARY = SnapshotSummary(0, 0, 0, 0, 0, 0)


def _scalar_map(raw: Any, what: str) -> dict[str, JsonScalar]:
    if not isinstance(raw, dict):
        raise Malformed(f"{what} is not an object")
    for value in raw.values():
        if isinstance(value, dict | list):
            raise Malformed(f"{what} holds a nested value")
    return raw


def _entries_of(raw: Any, name: str) -> tuple[OffsetEntry, ...]:
    if not isinstance(raw, list):
        raise Malformed(f"{name} is not a list")
    entries = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise Malformed(f"{name}[{i}] is not an object")
        partition = _scalar_map(item.get("partition"), f"{name}[{i}].partition")
        offset = item.get("offset")
        entries.append(
            OffsetEntry(
                partition, None if offset is None else _scalar_map(offset, f"{name}[{i}].offset")
            )
        )
    return tuple(entries)


def snapshot_of(info: SnapshotInfo, images: Mapping[str, Any]) -> Snapshot:
    return Snapshot(
        **{name: getattr(info, name) for name in _METADATA},
        before=_entries_of(images.get("before"), "before"),
        after=_entries_of(images.get("after"), "after"),
    )
