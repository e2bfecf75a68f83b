"""offsetd.engine.counting: windows, budgets, cooldowns and backoff arithmetic."""

from hypothesis import given
from hypothesis import strategies as st

from offsetd.engine.counting import (
    add_to_window,
    backoff_delay,
    budget_used,
    evict_stalest,
    in_cooldown,
    new_rule_state,
    next_backoff,
    prune_times,
    prune_window,
    record_executed,
)
from offsetd.engine.state import WindowEntry
from offsetd.rules.models import Backoff

MIN = 60_000


def entry(t: int, offset: int = 0) -> WindowEntry:
    return (t, "topic", 0, offset, None)


def test_window_is_inclusive_and_slides() -> None:
    entries: list[WindowEntry] = []
    assert add_to_window(entries, entry(0), 10 * MIN)
    assert add_to_window(entries, entry(5 * MIN), 10 * MIN)
    assert add_to_window(entries, entry(10 * MIN), 10 * MIN)
    assert [e[0] for e in entries] == [0, 5 * MIN, 10 * MIN]  # 0..10m: three within 10m
    assert add_to_window(entries, entry(10 * MIN + 1), 10 * MIN)
    assert [e[0] for e in entries] == [5 * MIN, 10 * MIN, 10 * MIN + 1]


def test_window_out_of_order_events() -> None:
    entries = [entry(5 * MIN), entry(20 * MIN)]
    prune_window(entries, 10 * MIN)
    assert [e[0] for e in entries] == [20 * MIN]
    assert add_to_window(entries, entry(15 * MIN), 10 * MIN)  # late, but within reach
    assert [e[0] for e in entries] == [15 * MIN, 20 * MIN]
    assert not add_to_window(entries, entry(1 * MIN), 10 * MIN)  # too far behind the newest
    assert [e[0] for e in entries] == [15 * MIN, 20 * MIN]


@given(st.lists(st.integers(min_value=0, max_value=100 * MIN), min_size=1, max_size=50))
def test_window_holds_exactly_the_events_within_reach_of_the_newest(times: list[int]) -> None:
    entries: list[WindowEntry] = []
    for i, t in enumerate(times):
        add_to_window(entries, entry(t, i), 10 * MIN)
    newest = max(times)
    kept = sorted(e[0] for e in entries)
    assert kept == [e[0] for e in entries]  # sorted by event time
    assert all(newest - 10 * MIN <= t <= newest for t in kept)
    # every event within reach that arrived after the newest-so-far fell behind is kept
    assert newest in kept


def test_budget_and_cooldown() -> None:
    state = new_rule_state()
    assert budget_used(state, 0, 60 * MIN) == 0
    assert not in_cooldown(state, 0, 2 * MIN)
    record_executed(state, 0)
    record_executed(state, 30 * MIN)
    assert in_cooldown(state, 31 * MIN, 2 * MIN)
    assert not in_cooldown(state, 32 * MIN, 2 * MIN)
    assert not in_cooldown(state, 31 * MIN, 0)  # 0s: no cooldown
    assert budget_used(state, 59 * MIN, 60 * MIN) == 2
    assert budget_used(state, 60 * MIN, 60 * MIN) == 1  # (t - per, t]: 0 has left
    assert state["executed"] == [30 * MIN]  # pruned


def test_prune_times() -> None:
    times = [1, 2, 3, 10]
    prune_times(times, 3)
    assert times == [3, 10]


def test_backoff_grows_caps_and_resets() -> None:
    spec = Backoff.model_validate(
        {"initial": "30s", "factor": 2, "max": "3m", "reset_after": "30m"}
    )
    state = None
    delays = []
    t = 0
    for _ in range(5):
        delay, _attempt = backoff_delay(state, t, spec)
        delays.append(delay)
        state = next_backoff(state, t, spec)
        t += delay + 1000
    assert delays == [30_000, 60_000, 120_000, 180_000, 180_000]
    assert state == {"attempts": 5, "last_ms": t - 180_000 - 1000}
    # more than reset_after since the last restart decision: from the start again
    assert backoff_delay(state, state["last_ms"] + 30 * MIN, spec) == (180_000, 5)
    assert backoff_delay(state, state["last_ms"] + 30 * MIN + 1, spec) == (30_000, 0)
    assert next_backoff(state, state["last_ms"] + 31 * MIN, spec)["attempts"] == 1


def test_backoff_huge_attempt_counts_do_not_overflow() -> None:
    spec = Backoff.model_validate({"initial": "1s", "factor": 10, "max": "1h"})
    assert backoff_delay({"attempts": 10_000, "last_ms": 0}, 0, spec) == (3_600_000, 10_000)


@given(
    st.dictionaries(
        st.text(max_size=3),
        st.lists(st.integers(0, 20), max_size=4).map(sorted),
        max_size=40,
    ),
    st.integers(0, 45),
)
def test_evict_stalest_keeps_the_fullest_then_newest_keys(
    counts: dict[str, list[int]], keep: int
) -> None:
    windows = {k: [entry(t, t) for t in times] for k, times in counts.items()}
    expected = dict(windows)
    if len(expected) > keep:  # the plain ranking: a stable sort of the keys
        ranked = sorted(
            expected, key=lambda k: (len(expected[k]), expected[k][-1][0] if expected[k] else -1)
        )
        for key in ranked[: len(expected) - keep]:
            del expected[key]
    evict_stalest(windows, keep)
    assert list(windows) == list(expected)
