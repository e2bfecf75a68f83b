"""Burrow-style status of one replicated partition from a window of samples (pure, no I/O).

A sample is (N, LEO, time) taken once per collection cycle. Rules, first match wins:

- REWIND: N went backwards inside the window and has not come back (an offset reset);
- OK: the partition is caught up now (records lag 0);
- STOP: lag > 0 while the connector or its task is not RUNNING;
- STALL: the connector and its tasks are RUNNING, lag > 0 throughout, and N has not changed
  for `stall_after` (default 1m) while RUNNING, and never less than 3 offset-flush intervals:
  Connect writes N only once per flush interval (and skips a flush while the previous one is
  still outstanding), so a shorter time cannot tell a stall from a pending flush. With Connect's
  default flush interval (60 s) a stall shows after 3 minutes; on a stack flushing every second,
  after `stall_after`. "While RUNNING" counts from when the task was last seen to become RUNNING,
  so a resumed connector is given the same time to make its first flush;
- STOP: lag > 0 in every sample and no offsets record for longer than the window (a
  not-started partition that never starts, or a window shorter than 3 flush intervals);
- WARN: N advances but lag grows through the window (never shrinks between samples, and ends
  higher than it started): replication is slower than the producers;
- OK otherwise.

"How long N has been unchanged" takes the larger of what the samples show and the age of the
offsets record holding N (Connect does not rewrite an unchanged offset), so a restarted collector
with a partial window still sees a long stall.

The window is kept small: samples closer together than `window / MAX_SAMPLES` replace the newest
one (a decrease of N, and lag starting or ending, always append, so neither a rewind nor the
caught-up sample before a new lag is compressed away), and samples older
than the window are dropped, keeping one just outside it as the window's left edge.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_SAMPLES",
    "SEVERITY",
    "Sample",
    "Status",
    "add_sample",
    "evaluate",
    "worst",
]

MAX_SAMPLES = 12


class Status(enum.StrEnum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"


#: Roll-up order (worst last): a connector's status is its worst partition's.
SEVERITY = {Status.OK: 0, Status.WARN: 1, Status.REWIND: 2, Status.STALL: 3, Status.STOP: 4}


@dataclass(frozen=True, slots=True)
class Sample:
    """One observation: N (-1 when not started), the log end, and when (epoch ms)."""

    n: int
    end: int
    t_ms: int

    @property
    def lag(self) -> int:
        return max(0, self.end - (self.n + 1))


def add_sample(samples: list[Sample], sample: Sample, window_ms: int) -> list[Sample]:
    """`samples` with `sample` added, compressed and trimmed (the list is updated in place).

    Runs once per partition per cycle, so it avoids copies: at 100k partitions every
    microsecond here is a tenth of a second per cycle.
    """
    spacing = window_ms // MAX_SAMPLES
    if (
        len(samples) >= 2
        and samples[-1].t_ms - samples[-2].t_ms < spacing  # the newest is still young
        and sample.n >= samples[-1].n  # never hide a decrease
        and (sample.lag > 0) == (samples[-1].lag > 0)  # nor the start or end of a lag
    ):
        samples[-1] = sample
    else:
        samples.append(sample)
    # Keep the newest sample at or before the horizon: it marks the window's left edge.
    horizon = sample.t_ms - window_ms
    while len(samples) >= 2 and samples[1].t_ms <= horizon:
        del samples[0]
    return samples


def evaluate(
    samples: Sequence[Sample],
    *,
    lag: int,
    now_ms: int,
    running: bool,
    offset_written_ms: int | None,
    window_ms: int,
    flush_ms: int,
    stall_after_ms: int | None = None,
    running_for_ms: int | None = None,
) -> Status:
    """The status of a partition whose current records lag is `lag` (see the module doc).

    `stall_after_ms` defaults to the window; `running_for_ms` is how long the connector has been
    RUNNING without a break (None: since before anyone looked, unbounded).
    """
    if _rewound(samples):
        return Status.REWIND
    if lag <= 0:
        return Status.OK
    if not running:
        return Status.STOP
    lagging_ms = _lagging_for(samples, now_ms)
    unchanged_ms = min(_unchanged_for(samples, now_ms, offset_written_ms), lagging_ms)
    if running_for_ms is not None:
        unchanged_ms = min(unchanged_ms, running_for_ms)
    stall_ms = window_ms if stall_after_ms is None else stall_after_ms
    if unchanged_ms >= max(stall_ms, 3 * flush_ms):
        return Status.STALL
    silent_ms = now_ms - offset_written_ms if offset_written_ms is not None else None
    if silent_ms is None and samples and all(s.n < 0 for s in samples):
        silent_ms = now_ms - samples[0].t_ms  # never written: as old as the window says
    if running_for_ms is not None:
        lagging_ms = min(lagging_ms, running_for_ms)  # a resumed task is not silent yet
    if silent_ms is not None and min(silent_ms, lagging_ms) > window_ms:
        return Status.STOP
    if _lag_growing(samples):
        return Status.WARN
    return Status.OK


def _rewound(samples: Sequence[Sample]) -> bool:
    highest = -1
    dropped = False
    for s in samples:
        if s.n < highest:
            dropped = True
        highest = max(highest, s.n)
    return dropped and samples[-1].n < highest


def _lagging_for(samples: Sequence[Sample], now_ms: int) -> int:
    """How long the lag has been above 0 without a break, as far as the window shows.

    Burrow's rule: a partition is only stalled (or stopped) if it lagged in every sample. An
    idle caught-up partition that just got one record has an old N and an old offsets record,
    but it has lagged for one cycle, not for the window. Unbounded when every sample lagged
    (the lag began before the window: the other measures decide).
    """
    since = None
    for s in reversed(samples):
        if s.lag <= 0:
            break
        since = s.t_ms
    else:
        return 1 << 62
    return 0 if since is None else now_ms - since


def _unchanged_for(samples: Sequence[Sample], now_ms: int, offset_written_ms: int | None) -> int:
    seen = 0
    if samples:
        current = samples[-1].n
        since = samples[-1].t_ms
        for s in reversed(samples):
            if s.n != current:
                break
            since = s.t_ms
        seen = now_ms - since
    written = now_ms - offset_written_ms if offset_written_ms is not None else 0
    return max(seen, written)


def _lag_growing(samples: Sequence[Sample]) -> bool:
    if len(samples) < 3:
        return False
    lags = [s.lag for s in samples]
    if min(lags) == 0:
        return False
    if samples[-1].n <= samples[0].n:
        return False  # N not advancing: a stall in the making, not a slow consumer
    return all(b >= a for a, b in itertools.pairwise(lags)) and lags[-1] > lags[0]


def worst(statuses: Iterable[Status]) -> Status:
    """The worst status (OK for none)."""
    return max(statuses, key=SEVERITY.__getitem__, default=Status.OK)
