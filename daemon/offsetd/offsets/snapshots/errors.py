"""What goes wrong with snapshot stores, as the CLI and the daemon see it (exit codes 16, 18)."""

from __future__ import annotations

from offsetd.errors import OffsetdError

__all__ = ["Malformed", "SnapshotCorrupt", "SnapshotNotFound", "SnapshotStoreError"]


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


class Malformed(ValueError):
    """A JSON document does not have the snapshot shape (becomes SnapshotCorrupt in stores)."""
