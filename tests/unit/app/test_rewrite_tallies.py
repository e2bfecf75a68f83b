"""FrameDecider.rewrite_tallies: after a start, each owned state's tallies are written once more
(a crash may have put a state whose unawaited tally writes never arrived). Pure logic: a dict
for the Table and a recording audit; the daemon's wiring is not needed for this method."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from offsetd.app.decider import FrameDecider
from offsetd.engine import ConnectorState
from offsetd.engine.cache import StateCache
from offsetd.engine.tally import fold_suppressed
from tests.unit.engine.test_engine_decide import SEC, Feed
from tests.unit.engine.test_engine_tally import WINDOW, storm_rules


class RecordingAudit:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    def write_soon(self, updates: list[dict[str, Any]]) -> None:
        self.written += updates


def test_each_states_tallies_are_written_once_after_a_start() -> None:
    feed = Feed(storm_rules())
    decisions = []
    for t in (0, 1 * SEC, 2 * SEC, 3 * SEC):  # one skip planned, three held back by its cooldown
        decisions += feed.feed(feed.dlq(t, record_offset=t))
    fold_suppressed(feed.state, decisions, WINDOW)
    store: dict[str, Any] = {}
    cache = StateCache(store)
    cache.put("local/orders-sink", feed.state)
    cache.put("local/quiet-sink", ConnectorState())  # no tallies: nothing to write
    audit = RecordingAudit()
    settings = SimpleNamespace(daemon=SimpleNamespace(suppressed_window=WINDOW))
    owner: Any = SimpleNamespace(
        wiring=SimpleNamespace(settings=settings, audit=audit),
        cache=StateCache(store),  # a restarted process: the states come from the Table's text
        _tallies_rewritten=set(),
    )

    assert FrameDecider.rewrite_tallies(owner, store) == 1
    [tally] = audit.written
    assert (tally["kind"], tally["rule"], tally["count"]) == ("suppressed", "skip", 3)
    assert tally["connector"] == "orders-sink"
    assert FrameDecider.rewrite_tallies(owner, store) == 0  # once per process
    store["local/new-owner"] = store["local/orders-sink"]  # a partition assigned later
    assert FrameDecider.rewrite_tallies(owner, store) == 1
