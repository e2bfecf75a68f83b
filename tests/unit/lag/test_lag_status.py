"""Every status rule, with an injected clock (times are plain epoch milliseconds)."""

from __future__ import annotations

from offsetd.lag.status import MAX_SAMPLES, Sample, Status, add_sample, evaluate, worst

WINDOW = 60_000
FLUSH = 10_000


def window(*points: tuple[int, int, int]) -> list[Sample]:
    """(n, end, t_s) points, added one by one as the collector does."""
    out: list[Sample] = []
    for n, end, t_s in points:
        out = add_sample(out, Sample(n, end, t_s * 1000), WINDOW)
    return out


def status(
    samples: list[Sample],
    *,
    now_s: int,
    running: bool = True,
    written_s: int | None = None,
) -> Status:
    last = samples[-1]
    return evaluate(
        samples,
        lag=last.lag,
        now_ms=now_s * 1000,
        running=running,
        offset_written_ms=None if written_s is None else written_s * 1000,
        window_ms=WINDOW,
        flush_ms=FLUSH,
    )


def test_caught_up_is_ok_even_when_stopped() -> None:
    samples = window((9, 10, 0), (9, 10, 30), (9, 10, 70))
    assert status(samples, now_s=70, running=False, written_s=0) is Status.OK


def test_lag_while_not_running_is_stop() -> None:
    samples = window((9, 10, 0), (9, 15, 5))
    assert status(samples, now_s=5, running=False, written_s=0) is Status.STOP


def test_running_with_n_unchanged_for_the_window_is_stall() -> None:
    points = [(9, 11 + t, t) for t in range(0, 61, 10)]
    samples = window(*points)
    assert status(samples, now_s=60, written_s=0) is Status.STALL
    # 50 s is not the whole window yet: not a stall (lag growing with N still: not WARN)
    assert status(samples[:-1], now_s=50, written_s=0) is Status.OK


def test_an_idle_partition_that_gets_a_record_is_not_stalled_until_it_lags_a_window() -> None:
    """N and its offsets record are an hour old, but the lag began one cycle ago (Burrow: a
    partition stalls only if it lagged in every sample)."""
    idle = [(9, 10, t) for t in range(3600, 3661, 10)]  # caught up for an hour
    samples = window(*idle, (9, 11, 3670))
    assert status(samples, now_s=3670, written_s=0) is Status.OK
    # the same lag with N still unchanged, now for a whole window (and > 3 flush intervals)
    samples = window(*idle, *[(9, 11, t) for t in range(3670, 3731, 10)])
    assert status(samples, now_s=3730, written_s=0) is Status.STALL
    # stopped: not-RUNNING is STOP at once, lagging or not for long
    assert status(window(*idle, (9, 11, 3670)), now_s=3670, running=False) is Status.STOP


def test_silence_alone_is_not_stop_while_the_lag_is_new() -> None:
    """An old offsets record does not make a fresh lag STOP (window shorter than 3 flushes)."""
    samples = [Sample(9, 10, 0), Sample(9, 10, 10_000), Sample(9, 12, 20_000)]
    common = {"lag": 2, "running": True, "offset_written_ms": 0, "flush_ms": FLUSH}
    assert evaluate(samples, now_ms=20_000, window_ms=10_000, **common) is Status.OK  # type: ignore[arg-type]


def test_stall_needs_three_flush_intervals_even_with_a_short_window() -> None:
    samples = [Sample(9, 20, 0), Sample(9, 25, 20_000)]
    common = {"lag": 15, "running": True, "offset_written_ms": 0, "flush_ms": FLUSH}
    # window 10 s, N unchanged 20 s < 3 flushes (30 s): no STALL, but silent > window: STOP
    assert evaluate(samples, now_ms=20_000, window_ms=10_000, **common) is Status.STOP  # type: ignore[arg-type]
    assert evaluate(samples, now_ms=31_000, window_ms=10_000, **common) is Status.STALL  # type: ignore[arg-type]


def test_a_restarted_collector_sees_a_long_stall_from_the_offsets_record_age() -> None:
    samples = window((9, 30, 1000))  # one fresh sample only
    assert status(samples, now_s=1000, written_s=900) is Status.STALL
    assert status(samples, now_s=1000, written_s=990) is Status.OK


def test_n_going_backwards_is_rewind_until_it_recovers() -> None:
    samples = window((50, 60, 0), (20, 60, 10))
    assert status(samples, now_s=10, written_s=10) is Status.REWIND
    recovered = add_sample(samples, Sample(59, 60, 20_000), WINDOW)
    assert status(recovered, now_s=20, written_s=20) is Status.OK


def test_lag_growing_while_n_advances_is_warn() -> None:
    samples = window((10, 20, 0), (15, 30, 10), (20, 40, 20), (25, 50, 30))
    assert status(samples, now_s=30, written_s=30) is Status.WARN
    shrinking = add_sample(samples, Sample(45, 52, 40_000), WINDOW)
    assert status(shrinking, now_s=40, written_s=40) is Status.OK


def test_not_started_partition_silent_for_the_window_is_stop() -> None:
    samples = window((-1, 5, 0), (-1, 5, 30), (-1, 5, 70))
    # running: never replicated for the whole window is a stall
    assert status(samples, now_s=70, written_s=None) is Status.STALL
    # a window shorter than 3 flushes cannot call it a stall: no record for the window is STOP
    no_stall = evaluate(
        samples,
        lag=5,
        now_ms=70_000,
        running=True,
        offset_written_ms=None,
        window_ms=WINDOW,
        flush_ms=30_000,
    )
    assert no_stall is Status.STOP
    young = window((-1, 5, 0), (-1, 5, 30))
    assert status(young, now_s=30) is Status.OK


def test_window_is_compressed_trimmed_and_keeps_a_rewind() -> None:
    samples: list[Sample] = []
    for t in range(0, 600):  # one sample per second for 10 minutes
        samples = add_sample(samples, Sample(t, t + 5, t * 1000), WINDOW)
    assert len(samples) <= MAX_SAMPLES + 2
    assert samples[-1].t_ms == 599_000
    assert samples[0].t_ms <= 599_000 - WINDOW < samples[1].t_ms  # one left edge
    dropped = add_sample(samples, Sample(3, 700, 599_500), WINDOW)
    assert [s.n for s in dropped[-2:]] == [599, 3]


def test_worst_rolls_up() -> None:
    assert worst([Status.OK, Status.WARN, Status.STOP, Status.STALL]) is Status.STOP
    assert worst([Status.OK, Status.REWIND]) is Status.REWIND
    assert worst([]) is Status.OK


def test_the_caught_up_sample_before_a_new_lag_is_never_compressed_away() -> None:
    """A lag at t=100 caught up at t=102 (2 s later, inside the 5 s spacing) and a new lag an
    hour later: the caught-up sample must stay, or the new lag looks an hour old (STALL)."""
    samples = window((9, 10, 0), (9, 11, 100), (10, 11, 102))
    samples = add_sample(samples, Sample(10, 12, 3_700_000), WINDOW)
    assert [s.lag > 0 for s in samples] == [False, True]
    assert status(samples, now_s=3700, written_s=102) is Status.OK


def test_stall_after_shows_a_stuck_flow_long_before_the_window() -> None:
    """`stall_after` (not the 10-minute window) bounds how long a stuck RUNNING task reads OK,
    and it is never shorter than 3 flush intervals (a pending flush is not a stall)."""
    points = [(9, 11 + t, t) for t in range(0, 31, 5)]  # lag since 0 s, N never moves
    samples = window(*points)
    common = {"lag": samples[-1].lag, "running": True, "offset_written_ms": 0}

    def at(now_s: int, stall_s: int, running_for_s: int | None = None) -> Status:
        return evaluate(
            samples,
            now_ms=now_s * 1000,
            window_ms=600_000,
            flush_ms=FLUSH,
            stall_after_ms=stall_s * 1000,
            running_for_ms=None if running_for_s is None else running_for_s * 1000,
            **common,  # type: ignore[arg-type]
        )

    assert at(30, stall_s=20) is Status.STALL  # 30 s unchanged >= max(20 s, 3 x 10 s)
    assert at(29, stall_s=20) is Status.OK  # 29 s < 3 flushes, though > stall_after
    assert at(30, stall_s=45) is Status.OK
    # resumed 10 s ago: given its own time to flush, whatever N's age
    assert at(30, stall_s=20, running_for_s=10) is Status.OK
    assert at(30, stall_s=20, running_for_s=30) is Status.STALL
