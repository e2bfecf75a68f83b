"""The lag arithmetic: the +1, empty, caught-up, not-started and deleted partitions."""

from __future__ import annotations

import pytest

from offsetd.lag.arithmetic import first_unreplicated, records_lag, seconds_lag, visible_lag


@pytest.mark.parametrize(
    ("end", "n", "start", "expected"),
    [
        (10, 9, None, 0),  # caught up: N is the last record, 9 = 10 - 1
        (10, 8, None, 1),  # the +1: one record (offset 9) not replicated
        (10, 4, None, 5),
        (0, None, 0, 0),  # empty, never started
        (0, None, None, 0),
        (7, None, 0, 7),  # not started: everything retained is lag
        (107, None, 100, 7),  # not started, log start moved by retention
        (10, 12, None, 0),  # N ahead of a stale LEO read: never negative
    ],
)
def test_records_lag(end: int, n: int | None, start: int | None, expected: int) -> None:
    assert records_lag(end, n, start) == expected


def test_first_unreplicated_is_n_plus_one_or_the_log_start() -> None:
    assert first_unreplicated(41, 0) == 42
    assert first_unreplicated(None, 17) == 17
    assert first_unreplicated(41, 100) == 100  # N + 1 deleted by retention


def test_seconds_lag() -> None:
    assert seconds_lag(0, None, 5_000) == 0.0
    assert seconds_lag(0, 1_000, 5_000) == 0.0  # caught up: 0 whatever was cached
    assert seconds_lag(3, 1_000, 5_500) == 4.5
    assert seconds_lag(3, None, 5_500) is None  # lagging, timestamp not fetched yet
    assert seconds_lag(3, 9_000, 5_000) == 0.0  # producer clock ahead: never negative


@pytest.mark.parametrize(
    ("lag", "end", "first_visible", "expected"),
    [
        (1, 11, None, 0),  # N = 9, a commit marker at 10: nothing a consumer sees is left
        (4, 14, 11, 3),  # marker at 10 before the first record: not counted
        (4, 14, 10, 4),  # the first unreplicated offset holds a record
        (0, 10, None, 0),  # caught up stays caught up
        (2, 12, 30, 0),  # never negative
    ],
)
def test_visible_lag(lag: int, end: int, first_visible: int | None, expected: int) -> None:
    assert visible_lag(lag, end, first_visible) == expected
