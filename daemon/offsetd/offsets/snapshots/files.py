"""`FileSnapshotStore`: one gzip file per snapshot id (`<id>.json.gz`), for the CLI's local undo.

The file holds two JSON lines, the header and the images; listings decompress only the first
line. Writes are temp file + fsync + rename (and fsync of the directory), so a crash leaves the
old snapshot or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import tempfile
import zlib
from pathlib import Path

from offsetd.offsets.snapshots.errors import (
    Malformed,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotStoreError,
)
from offsetd.offsets.snapshots.format import dumps, header_json, images_from_payload, read_header
from offsetd.offsets.snapshots.records import (
    Snapshot,
    SnapshotInfo,
    images_json,
    info_of,
    is_snapshot_id,
)
from offsetd.offsets.snapshots.store import Catalogue, SnapshotListing

__all__ = ["FileSnapshotStore", "default_file_store", "default_snapshot_dir"]

log = logging.getLogger(__name__)


def default_snapshot_dir() -> Path:
    """`$XDG_STATE_HOME/offsetd/snapshots`, or `~/.local/state/offsetd/snapshots`."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "offsetd" / "snapshots"


def default_file_store() -> FileSnapshotStore:
    return FileSnapshotStore(default_snapshot_dir())


class FileSnapshotStore(SnapshotListing):
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
        payload = dumps(images_json(snapshot), snapshot.id)
        header = dumps(header_json(snapshot, payload), snapshot.id)
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
            header = read_header(header_line)
            if header.get("id") != snapshot_id:
                raise Malformed(f"it holds snapshot {header.get('id')!r}")
        except Malformed as exc:
            raise SnapshotCorrupt(f"{where()}: {exc}") from None
        return images_from_payload(header, payload, where)

    def _catalogue(self, *, images: bool) -> Catalogue:
        try:
            paths = [p for p in self.directory.iterdir() if p.name.endswith(self.SUFFIX)]
        except FileNotFoundError:
            return [], self._load
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
        return infos, self._load

    def _load(self, info: SnapshotInfo) -> Snapshot:
        return self.get(info.id)

    @staticmethod
    def _read_info(path: Path) -> SnapshotInfo | None:
        """The header only: gzip decompresses just the start of the file."""
        try:
            with gzip.open(path, "rb") as src:
                line = src.readline(1 << 20)
            return info_of(read_header(line))
        except FileNotFoundError:
            return None  # removed meanwhile
        except (OSError, EOFError, zlib.error, Malformed) as exc:
            log.warning("skipping unreadable snapshot file %s: %s", path, exc)
            return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
