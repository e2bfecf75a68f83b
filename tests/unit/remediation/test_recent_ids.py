"""RecentIds: the executor's once-per-process memory, bounded in time and size."""

from __future__ import annotations

import pytest

from offsetd.remediation.recent_ids import RecentIds


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def test_an_id_is_remembered_until_it_is_older_than_keep_ms() -> None:
    clock = Clock()
    ids = RecentIds(clock, keep_ms=1000, max_ids=10)
    ids.add("a")
    clock.ms += 600
    ids.add("b")
    clock.ms += 400  # "a" is exactly keep_ms old: still kept
    assert "a" in ids
    assert "b" in ids
    clock.ms += 1
    assert "a" not in ids
    assert "b" in ids
    assert len(ids) == 1
    clock.ms += 600
    assert "b" not in ids
    assert len(ids) == 0


def test_adding_again_renews_an_id() -> None:
    clock = Clock()
    ids = RecentIds(clock, keep_ms=1000, max_ids=10)
    ids.add("a")
    ids.add("b")
    clock.ms += 900
    ids.add("a")
    clock.ms += 200
    assert "a" in ids
    assert "b" not in ids


def test_the_oldest_ids_go_first_beyond_max_ids() -> None:
    clock = Clock()
    ids = RecentIds(clock, keep_ms=10_000, max_ids=3)
    for n in range(5):
        clock.ms += 1
        ids.add(f"id-{n}")
    assert len(ids) == 3
    assert [f"id-{n}" in ids for n in range(5)] == [False, False, True, True, True]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        RecentIds(Clock(), keep_ms=0)
    with pytest.raises(ValueError, match="must be positive"):
        RecentIds(Clock(), max_ids=0)
