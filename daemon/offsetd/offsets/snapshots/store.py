"""The `SnapshotStore` protocol, and the listing both stores share.

A store says how to read its catalogue once (`SnapshotListing._catalogue`): every readable
`SnapshotInfo`, and how to load the images of one of them. Selecting (by connector and Connect
cluster, newest first, at most `limit`) and skipping unreadable snapshots is the same for both.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from offsetd.offsets.snapshots.errors import SnapshotCorrupt, SnapshotNotFound
from offsetd.offsets.snapshots.records import Snapshot, SnapshotInfo

__all__ = ["Catalogue", "SnapshotListing", "SnapshotStore", "select"]

log = logging.getLogger(__name__)


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


def select(
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


Catalogue = tuple[Iterable[SnapshotInfo], Callable[[SnapshotInfo], Snapshot]]
"""Every readable snapshot's info, and how to load one of them with its images."""


class SnapshotListing:
    """`list` and `list_info` of a `SnapshotStore`, over the store's `_catalogue`."""

    def _catalogue(self, *, images: bool) -> Catalogue:
        """Read the catalogue; with `images`, loading may use what this read kept."""
        raise NotImplementedError

    def list(
        self,
        *,
        connector: str | None = None,
        connect_cluster: str | None = None,
        limit: int | None = 50,
    ) -> builtins.list[Snapshot]:
        infos, load = self._catalogue(images=True)
        snapshots = []
        for info in select(infos, connector, connect_cluster, limit):
            try:
                snapshots.append(load(info))
            except SnapshotNotFound:
                continue  # removed meanwhile
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
        infos, _ = self._catalogue(images=False)
        return select(infos, connector, connect_cluster, limit)
