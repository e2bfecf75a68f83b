"""The readiness and liveness verdicts of `offsetd.app.health` (pure: a clock is given)."""

from __future__ import annotations

from offsetd.app.health import Health, StreamProgress


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
