"""Windows, budgets, cooldowns and backoff: small pure functions over the state's records.

All times are event times in milliseconds. Windows are inclusive: events at 0, 5m and 10m
are "3 within 10m". A window is anchored on the newest event seen for its key, so events
that arrive out of order still count when they are within reach of it.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from offsetd.engine.state import BackoffState, RuleState, WindowEntry
from offsetd.rules.models import Backoff

__all__ = [
    "add_to_window",
    "backoff_delay",
    "budget_used",
    "evict_stalest",
    "in_cooldown",
    "new_rule_state",
    "next_backoff",
    "prune_times",
    "prune_window",
    "record_executed",
]


def new_rule_state() -> RuleState:
    return {"windows": {}, "executed": [], "last_executed_ms": None}


def prune_window(entries: list[WindowEntry], within_ms: int) -> None:
    """Drop entries older than the newest one minus `within_ms` (entries sorted by time)."""
    if not entries:
        return
    cutoff = entries[-1][0] - within_ms
    if entries[0][0] < cutoff:
        drop = 0
        for entry in entries:
            if entry[0] >= cutoff:
                break
            drop += 1
        del entries[:drop]


def add_to_window(entries: list[WindowEntry], entry: WindowEntry, within_ms: int) -> bool:
    """Add a matching event and prune; False if the event itself fell out of the window."""
    if not entries or entry[0] >= entries[-1][0]:
        entries.append(entry)
    else:
        insort(entries, entry)  # out of order: keep sorted by event time
    prune_window(entries, within_ms)
    return entry[0] >= entries[-1][0] - within_ms


def evict_stalest(windows: dict[str, list[WindowEntry]], keep: int) -> None:
    """Keep `keep` keys: those with the most events, then the most recent; drop the others.

    In a flood of distinct records, keys seen once go first, so a record that keeps failing
    is still counted.
    """
    if len(windows) <= keep:
        return
    # ties keep the keys' order (the position), and tuples sort without a key function
    ranked = sorted(
        (len(entries), entries[-1][0] if entries else -1, i, key)
        for i, (key, entries) in enumerate(windows.items())
    )
    for *_, key in ranked[: len(windows) - keep]:
        del windows[key]


def prune_times(times: list[int], cutoff: int) -> None:
    """Drop times before `cutoff` from a sorted list."""
    if times and times[0] < cutoff:
        del times[: bisect_left(times, cutoff)]


def budget_used(rule_state: RuleState, time_ms: int, per_ms: int) -> int:
    """Executed decisions in the budget window `(time - per, time]`."""
    times = rule_state["executed"]
    prune_times(times, time_ms - per_ms + 1)
    return sum(1 for t in times if t <= time_ms)


def in_cooldown(rule_state: RuleState, time_ms: int, cooldown_ms: int) -> bool:
    last = rule_state["last_executed_ms"]
    return cooldown_ms > 0 and last is not None and time_ms - last < cooldown_ms


def record_executed(rule_state: RuleState, time_ms: int) -> None:
    insort(rule_state["executed"], time_ms)
    last = rule_state["last_executed_ms"]
    rule_state["last_executed_ms"] = time_ms if last is None else max(last, time_ms)


def backoff_delay(state: BackoffState | None, time_ms: int, spec: Backoff) -> tuple[int, int]:
    """(delay in ms, attempt number from 0) for a restart decided at `time_ms`."""
    attempt = 0
    if state is not None and time_ms - state["last_ms"] <= spec.reset_after:
        attempt = state["attempts"]
    # min() before the power would overflow floats for silly attempt counts
    delay = spec.initial * spec.factor ** min(attempt, 64)
    return int(min(delay, spec.max)), attempt


def next_backoff(state: BackoffState | None, time_ms: int, spec: Backoff) -> BackoffState:
    """The backoff state after a restart decision at `time_ms`."""
    _, attempt = backoff_delay(state, time_ms, spec)
    last = time_ms if state is None or attempt == 0 else max(state["last_ms"], time_ms)
    return {"attempts": attempt + 1, "last_ms": last}
