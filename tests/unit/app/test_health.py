"""The readiness and liveness verdicts of `offsetd.app.health` (pure: a clock is given)."""

from __future__ import annotations

from offsetd.app.health import Health, StreamProgress, events_share


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_ready_only_when_every_expected_check_has_passed() -> None:
    clock = Clock()
    health = Health(clock, stale_after_ms=10_000)
    health.expect(["kafka", "stream"])
    ready, body = health.readiness()
    assert not ready
    assert body["checks"]["kafka"] == {"ok": False, "detail": "not checked yet"}
    health.record("kafka", True, "1 brokers answer")
    assert not health.readiness()[0]  # stream not probed yet
    health.record("stream", True)
    assert health.readiness() == (
        True,
        {
            "ready": True,
            "checks": {
                "kafka": {"ok": True, "detail": "1 brokers answer"},
                "stream": {"ok": True, "detail": "ok"},
            },
        },
    )


def test_a_probe_that_stopped_answering_does_not_keep_an_old_ok() -> None:
    clock = Clock()
    health = Health(clock, stale_after_ms=10_000)
    health.record("kafka", True)
    clock.now += 10_000
    assert health.readiness()[0]
    clock.now += 1_000
    ready, body = health.readiness()
    assert not ready
    assert body["checks"]["kafka"] == {"ok": False, "detail": "no probe result for 11s"}


def test_a_fatal_problem_fails_liveness_and_readiness() -> None:
    health = Health(Clock(), stale_after_ms=10_000)
    health.record("kafka", True)
    assert health.liveness() == (True, {"alive": True, "detail": "ok"})
    health.fatal = "the ingest stopped: boom"
    assert health.liveness() == (False, {"alive": False, "detail": "the ingest stopped: boom"})
    assert not health.readiness()[0]


def test_stream_stalls_only_when_records_wait_behind_a_position_that_does_not_move() -> None:
    progress = StreamProgress(stall_after_ms=60_000)
    assert progress.observe([("events", 0, 10, 15), ("events", 1, 5, 5)], 0) == []
    # partition 1 has nothing waiting: never stalled, however long it sits still
    assert progress.observe([("events", 0, 10, 15), ("events", 1, 5, 5)], 59_999) == []
    assert progress.observe([("events", 0, 10, 15), ("events", 1, 5, 5)], 60_000) == [
        "events-0: 5 records waiting, position 10 unchanged for 60s"
    ]
    # it moves: the window starts again
    assert progress.observe([("events", 0, 11, 15)], 61_000) == []
    assert progress.observe([("events", 0, 11, 15)], 120_999) == []
    assert len(progress.observe([("events", 0, 11, 15)], 121_000)) == 1


def test_a_partition_given_away_and_back_starts_a_new_window() -> None:
    progress = StreamProgress(stall_after_ms=60_000)
    progress.observe([("events", 0, 10, 15)], 0)
    progress.observe([], 30_000)  # rebalanced away
    assert progress.observe([("events", 0, 10, 15)], 70_000) == []
    assert len(progress.observe([("events", 0, 10, 15)], 130_000)) == 1


# -- the events topic's share -------------------------------------------------------------------

EVENTS = "app-events"


def test_an_assignment_made_without_the_events_topic_is_not_ready() -> None:
    """The deaf start: the group's first assignment ran on metadata without the events topic,
    so it gave out the changelog only; the worker must not say ready."""
    ok, detail = events_share(
        EVENTS, 8, [], {"http://w1:6066": {"app-connector-state-changelog": list(range(8))}}
    )
    assert not ok
    assert "gives out 0 of the 8 partitions of app-events" in detail
    assert "holds 0" in detail


def test_a_single_worker_holds_every_partition() -> None:
    ok, detail = events_share(EVENTS, 8, range(8), {"http://w1:6066": {EVENTS: list(range(8))}})
    assert ok
    assert detail == "holds 8 of the 8 partitions of app-events (1 workers)"
    ok, detail = events_share(EVENTS, 8, range(7), {"http://w1:6066": {EVENTS: list(range(7))}})
    assert not ok  # partition 7 given to nobody


def test_each_of_several_workers_holds_at_least_its_share() -> None:
    spread = {"w1": {EVENTS: [0, 1, 2]}, "w2": {EVENTS: [3, 4, 5]}, "w3": {EVENTS: [6, 7]}}
    assert events_share(EVENTS, 8, [6, 7], spread)[0]  # floor(8 / 3) = 2
    lopsided = {"w1": {EVENTS: [0, 1, 2, 3, 4, 5, 6]}, "w2": {EVENTS: [7]}}
    ok, detail = events_share(EVENTS, 8, [7], lopsided)
    assert not ok
    assert "less than its share (4, 2 workers)" in detail


def test_more_workers_than_partitions_leave_one_standing_by_and_it_says_so() -> None:
    spread = {"w1": {EVENTS: [0]}, "w2": {EVENTS: [1]}, "w3": {}}
    ok, detail = events_share(EVENTS, 2, [], spread)
    assert ok
    assert detail == (
        "holds none of the 2 partitions of app-events: 3 workers share them, this one stands by"
    )


def test_before_any_assignment_nothing_is_ready() -> None:
    ok, detail = events_share(EVENTS, 1, [], {})
    assert not ok
    assert "gives out 0 of the 1 partitions" in detail
