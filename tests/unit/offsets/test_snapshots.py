"""Snapshots without a network: ids, the JSON and chunk formats, and FileSnapshotStore."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import tempfile
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.errors import OffsetdError
from offsetd.offsets.model import JsonScalar, OffsetEntry, mirror_partition, sink_partition
from offsetd.offsets.snapshots import (
    DEFAULT_CHUNK_SIZE,
    FileSnapshotStore,
    Snapshot,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotStore,
    SnapshotSummary,
    default_snapshot_dir,
    is_snapshot_id,
    join_chunks,
    new_snapshot_id,
    pack_snapshot,
    split_chunks,
    unpack_snapshot,
)

T0 = datetime(2026, 11, 21, 8, 30, 0, 123456, tzinfo=UTC)


def canonical(snapshot: Snapshot) -> str:
    """Type-exact identity: 1, 1.0 and true differ here although Python calls them equal."""
    return json.dumps(snapshot.as_json(), sort_keys=True)


def assert_identical(got: Snapshot, want: Snapshot) -> None:
    assert got == want
    assert canonical(got) == canonical(want)


def snap(
    snapshot_id: str | None = None,
    *,
    at: datetime = T0,
    connector: str = "sink-a",
    cluster: str = "local",
    status: str = "planned",
    operation: str = "alter",
    before: tuple[OffsetEntry, ...] | None = None,
    after: tuple[OffsetEntry, ...] | None = None,
    **kw: Any,
) -> Snapshot:
    if before is None:
        before = (OffsetEntry(sink_partition("orders", 0), {"kafka_offset": 10}),)
    if after is None:
        after = (OffsetEntry(sink_partition("orders", 0), {"kafka_offset": 0}),)
    return Snapshot(
        id=new_snapshot_id(at) if snapshot_id is None else snapshot_id,
        created_at=at,
        connect_cluster=cluster,
        connector=connector,
        operation=operation,
        status=status,
        before=before,
        after=after,
        **kw,
    )


def mirror_image(n: int, base: int, seed: int | None = None) -> tuple[OffsetEntry, ...]:
    """MirrorSource offsets; with a seed they are random (and compress like real ones)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    return tuple(
        OffsetEntry(
            mirror_partition("east", f"t-{i // 100}", i % 100),
            {"offset": base + (rng.randrange(10**9) if seed is not None else i * 7)},
        )
        for i in range(n)
    )


# -- ids ----------------------------------------------------------------------------------------


def test_id_format_is_utc_milliseconds_and_random_hex() -> None:
    local = T0.astimezone(timezone(timedelta(hours=-5)))
    snapshot_id = new_snapshot_id(local)
    assert re.fullmatch(r"20261121T083000\.123Z-[0-9a-f]{6}", snapshot_id), snapshot_id
    assert is_snapshot_id(snapshot_id)


def test_ids_sort_by_time_and_are_unique() -> None:
    times = [T0 + timedelta(milliseconds=ms) for ms in (0, 1, 999, 1000, 60_000, 86_400_000)]
    ids = [new_snapshot_id(t) for t in times]
    assert ids == sorted(ids)
    same_ms = {new_snapshot_id(T0) for _ in range(500)}
    assert len(same_ms) == 500


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        new_snapshot_id(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        snap("x", at=datetime(2026, 1, 1))


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "a/b", ".hidden", "a b", "x" * 201])
def test_unsafe_ids_are_refused(bad: str) -> None:
    assert not is_snapshot_id(bad)
    with pytest.raises(ValueError, match="invalid snapshot id"):
        snap(bad)


def test_created_at_is_normalised_to_utc_and_images_to_tuples() -> None:
    entries = [OffsetEntry(sink_partition("t", 0), {"kafka_offset": 1})]
    s = Snapshot(
        id="a",
        created_at=T0.astimezone(timezone(timedelta(hours=2))),
        connect_cluster="c",
        connector="k",
        operation="alter",
        status="planned",
        before=entries,  # type: ignore[arg-type]
        after=iter(entries),  # type: ignore[arg-type]
    )
    assert s.created_at.tzinfo is UTC
    assert s.created_at == T0
    assert s.before == s.after == tuple(entries)


# -- summary ------------------------------------------------------------------------------------


def test_summary_counts_changed_added_removed() -> None:
    p = [sink_partition("t", i) for i in range(4)]
    before = (
        OffsetEntry(p[0], {"kafka_offset": 1}),
        OffsetEntry(p[1], {"kafka_offset": 2}),
        OffsetEntry(p[2], {"kafka_offset": 3}),
    )
    after = (
        OffsetEntry(p[0], {"kafka_offset": 1}),
        OffsetEntry(p[1], {"kafka_offset": 5}),
        OffsetEntry(p[3], {"kafka_offset": 0}),
    )
    assert snap(before=before, after=after).summary == SnapshotSummary(
        partitions_before=3, partitions_after=3, changed=1, added=1, removed=1, unchanged=1
    )


# -- chunks -------------------------------------------------------------------------------------


@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=700))
def test_split_then_join_is_identity(data: bytes, size: int) -> None:
    chunks = split_chunks(data, size)
    assert all(len(c) <= size for c in chunks)
    assert len(chunks) == max(1, -(-len(data) // size))
    assert join_chunks(chunks) == data


def test_join_names_the_missing_chunk() -> None:
    with pytest.raises(ValueError, match="chunk 1 of 3 is missing"):
        join_chunks([b"a", None, b"c"])
    with pytest.raises(ValueError, match="positive"):
        split_chunks(b"abc", 0)


def test_ten_thousand_partitions_pack_into_several_default_chunks() -> None:
    s = snap(before=mirror_image(10_000, 5_000_000, seed=1), after=mirror_image(10_000, 0, seed=2))
    header, chunks = pack_snapshot(s)
    assert header["chunks"] == len(chunks) > 1
    assert all(len(c) <= DEFAULT_CHUNK_SIZE for c in chunks)
    assert header["summary"]["changed"] == 10_000
    assert_identical(unpack_snapshot(header, chunks), s)


def test_pack_is_deterministic_and_chunk_set_follows_content() -> None:
    s = snap("fixed")
    h1, c1 = pack_snapshot(s, 16)
    h2, c2 = pack_snapshot(s, 16)
    assert (h1, c1) == (h2, c2)
    assert len(c1) > 1
    status_only, _ = pack_snapshot(snap("fixed", status="applied"), 16)
    assert status_only["chunk_set"] == h1["chunk_set"]  # images unchanged: same chunks
    other, _ = pack_snapshot(snap("fixed", after=()), 16)
    assert other["chunk_set"] != h1["chunk_set"]
    resized, _ = pack_snapshot(s, 17)
    assert resized["chunk_set"] != h1["chunk_set"]


def test_tampered_chunk_fails_the_checksum() -> None:
    s = snap("t1", before=mirror_image(500, 0), after=mirror_image(500, 9))
    header, chunks = pack_snapshot(s, 512)
    bad = list(chunks)
    bad[1] = bytes([bad[1][0] ^ 0xFF]) + bad[1][1:]
    with pytest.raises(SnapshotCorrupt, match=r"snapshot x is corrupt: checksum mismatch"):
        unpack_snapshot(header, bad, "snapshot x")
    with pytest.raises(SnapshotCorrupt, match="chunk 2 of"):
        unpack_snapshot(header, [*chunks[:2], None, *chunks[3:]], "snapshot x")
    with pytest.raises(SnapshotCorrupt, match="checksum mismatch"):
        unpack_snapshot(header, chunks[:-1], "snapshot x")
    with pytest.raises(SnapshotCorrupt, match="format"):
        unpack_snapshot({**header, "format": 99}, chunks, "snapshot x")


def test_non_finite_floats_are_refused() -> None:
    s = snap(after=(OffsetEntry({"p": 1}, {"x": float("nan")}),))
    with pytest.raises(ValueError, match="NaN"):
        pack_snapshot(s)


# -- JSON round trip (property) -----------------------------------------------------------------

scalars: st.SearchStrategy[JsonScalar] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
maps = st.dictionaries(st.text(max_size=8), scalars, max_size=4)
entries = st.builds(OffsetEntry, maps, st.one_of(st.none(), maps))
snapshots = st.builds(
    Snapshot,
    id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True),
    created_at=st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9999, 1, 1),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
    ),
    connect_cluster=st.text(max_size=20),
    connector=st.text(max_size=20),
    operation=st.text(max_size=10),
    status=st.text(max_size=10),
    before=st.lists(entries, max_size=6).map(tuple),
    after=st.lists(entries, max_size=6).map(tuple),
    message=st.text(max_size=40),
    undo_of=st.one_of(st.none(), st.text(max_size=20)),
)


@given(snapshots)
def test_as_json_then_from_json_is_identity(s: Snapshot) -> None:
    assert_identical(Snapshot.from_json(json.loads(json.dumps(s.as_json()))), s)


@given(snapshots, st.integers(min_value=1, max_value=64))
def test_pack_then_unpack_is_identity(s: Snapshot, chunk_size: int) -> None:
    header, chunks = pack_snapshot(s, chunk_size)
    header = json.loads(json.dumps(header))  # as the header record carries it
    assert_identical(unpack_snapshot(header, chunks), s)


@settings(max_examples=60, deadline=None)
@given(snapshots)
def test_file_store_put_then_get_is_identity(s: Snapshot) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = FileSnapshotStore(Path(tmp) / "snaps")
        store.put(s)
        assert_identical(store.get(s.id), s)
        assert_identical(store.list(limit=None)[0], s)
        assert store.list_info()[0] == s.info


# -- FileSnapshotStore --------------------------------------------------------------------------


def test_file_store_is_a_snapshot_store(tmp_path: Path) -> None:
    store: SnapshotStore = FileSnapshotStore(tmp_path)
    assert store.list() == []


def test_missing_snapshot_names_the_id(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path / "none-yet")
    with pytest.raises(SnapshotNotFound, match=r"20261121T083000\.123Z-abcdef") as info:
        store.get("20261121T083000.123Z-abcdef")
    assert info.value.exit_code == 16
    assert isinstance(info.value, OffsetdError)
    with pytest.raises(SnapshotNotFound):
        store.get("../../etc/passwd")
    assert store.list() == []
    assert store.list_info() == []


def test_overwrite_keeps_one_file_and_the_latest_status(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    s = snap()
    store.put(s)
    store.put(snap(s.id, status="applied", message="done"))
    got = store.get(s.id)
    assert (got.status, got.message) == ("applied", "done")
    assert [p.name for p in tmp_path.iterdir()] == [f"{s.id}.json.gz"]
    assert (tmp_path / f"{s.id}.json.gz").stat().st_mode & 0o777 == 0o600


def test_list_is_newest_first_filtered_and_limited(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    made = []
    for i in range(6):
        s = snap(
            at=T0 + timedelta(minutes=i),
            connector="sink-a" if i % 2 else "sink-b",
            cluster="c1" if i < 3 else "c2",
        )
        made.append(s)
        store.put(s)
    newest_first = [s.id for s in reversed(made)]
    assert [s.id for s in store.list()] == newest_first
    assert [i.id for i in store.list_info()] == newest_first
    assert [s.id for s in store.list(limit=2)] == newest_first[:2]
    assert [s.id for s in store.list(connector="sink-a")] == [made[5].id, made[3].id, made[1].id]
    assert [s.id for s in store.list(connector="sink-a", connect_cluster="c1")] == [made[1].id]
    assert store.list(connector="nope") == []
    assert store.list_info(limit=1)[0].summary.changed == 1


def test_list_reads_only_headers_and_skips_broken_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileSnapshotStore(tmp_path)
    big = snap(before=mirror_image(10_000, 100), after=mirror_image(10_000, 0))
    store.put(big)
    (tmp_path / "junk.json.gz").write_bytes(b"not gzip")
    (tmp_path / ".tmp-leftover.json.gz").write_bytes(b"ignored")
    started = time.perf_counter()
    infos = store.list_info()
    elapsed = time.perf_counter() - started
    assert [i.id for i in infos] == [big.id]
    assert infos[0].summary.partitions_before == 10_000
    assert elapsed < 0.5, elapsed
    assert "junk.json.gz" in caplog.text


def test_damaged_file_is_reported_as_corrupt(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    s = snap()
    store.put(s)
    path = store.path_of(s.id)
    header, payload, _ = gzip.decompress(path.read_bytes()).split(b"\n")
    tampered = payload.replace(b'"kafka_offset":0', b'"kafka_offset":7')
    assert tampered != payload
    path.write_bytes(gzip.compress(header + b"\n" + tampered + b"\n"))
    with pytest.raises(SnapshotCorrupt, match=f"{re.escape(str(path))} is corrupt: checksum"):
        store.get(s.id)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(SnapshotCorrupt, match="truncated"):
        store.get(s.id)
    path.write_bytes(b"plain")
    with pytest.raises(SnapshotCorrupt, match="not gzip"):
        store.get(s.id)


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    store = FileSnapshotStore(tmp_path)
    s = snap(after=(OffsetEntry({"p": 1}, {"x": float("inf")}),))
    with pytest.raises(ValueError, match="NaN or infinity"):
        store.put(s)
    assert list(tmp_path.iterdir()) == []


def test_default_dir_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/srv/state")
    assert default_snapshot_dir() == Path("/srv/state/offsetd/snapshots")
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/op")
    assert default_snapshot_dir() == Path("/home/op/.local/state/offsetd/snapshots")
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_snapshot_dir() == Path("/home/op/.local/state/offsetd/snapshots")
    assert os.environ["HOME"] == "/home/op"
