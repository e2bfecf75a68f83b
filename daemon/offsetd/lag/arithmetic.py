"""The lag arithmetic for one MirrorSourceConnector source partition (pure, no I/O).

N is the offset of the last source record MM2 replicated (MirrorSourceConnector's stored offset;
the task seeks to N + 1 on start), so the next record to replicate is N + 1 and

    records lag = LEO - (N + 1), never negative.

LEO is the source log end, or the last stable offset for transactional topics (ListOffsets with
read_committed). A committed transaction ends with a control marker that takes an offset but is
never replicated, so an idle transactional partition has LEO = N + 2: lag 1 by the formula. The
collector therefore reads the first record at N + 1 of every lagging partition (it needs its
timestamp anyway): if a consumer sees none up to the end, the lag is 0; if the first one is past
N + 1, the markers before it are not counted (`visible_lag`).
A partition with no N yet is "not started": MM2 will start at the log start (its
auto.offset.reset is earliest), so everything retained is lag: LEO - log start.

Seconds lag is the age of the first unreplicated record: now - timestamp(record at N + 1), and 0
when caught up. If N + 1 is no longer in the log (retention deleted it), the first record MM2 can
still replicate is at the log start; that record's age is used and the partition is flagged.
"""

from __future__ import annotations

__all__ = [
    "first_unreplicated",
    "records_lag",
    "seconds_lag",
    "visible_lag",
]


def records_lag(end: int, last_replicated: int | None, log_start: int | None = None) -> int:
    """Records not yet replicated.

    `end` is the log end (or LSO), `last_replicated` N, or None for a partition not started;
    then `log_start` (default 0) is where MM2 begins.
    """
    if last_replicated is None:
        return max(0, end - max(0, log_start or 0))
    return max(0, end - (last_replicated + 1))


def first_unreplicated(last_replicated: int | None, log_start: int) -> int:
    """The offset of the next record MM2 replicates: N + 1, or the log start if that is later.

    A partition not started begins at the log start; retention may have deleted N + 1 too.
    """
    if last_replicated is None:
        return log_start
    return max(last_replicated + 1, log_start)


def visible_lag(lag: int, end: int, first_visible: int | None) -> int:
    """The records lag without transaction markers that no consumer sees.

    `first_visible` is the offset of the first record a read_committed consumer gets from the
    first unreplicated offset on, or None when it gets none before `end`.
    """
    if lag <= 0 or first_visible is None:
        return 0
    return min(lag, max(0, end - first_visible))


def seconds_lag(lag_records: int, first_record_ms: int | None, now_ms: int) -> float | None:
    """Age of the first unreplicated record in seconds; 0 when caught up.

    None when lagging but the record's timestamp is not known (yet): it was not fetched this
    cycle. Clock skew between the producer and offsetd never makes it negative.
    """
    if lag_records <= 0:
        return 0.0
    if first_record_ms is None:
        return None
    return max(0.0, (now_ms - first_record_ms) / 1000.0)
