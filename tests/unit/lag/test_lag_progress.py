"""offsetd.lag.progress: what counts as stalled, unassigned, lagging or fine, cycle by cycle."""

from __future__ import annotations

from collections.abc import Sequence

from offsetd.events.models import PROGRESS_SOURCE_TOPIC, ProgressEvent
from offsetd.lag.progress import ProgressReport, ProgressTracker, progress_news
from offsetd.lag.snapshot import ConnectorHealth, SinkPartition
from offsetd.lag.status import Status

SEC = 1000
STALL = 30 * SEC
STUCK = 60 * SEC
T0 = 1_700_000_000_000


def sink(
    state: str = "RUNNING",
    tasks: Sequence[tuple[int, str]] = ((0, "RUNNING"),),
    configured: Sequence[int] = (0,),
    workers: Sequence[tuple[int, str]] | None = None,
    name: str = "orders-sink",
) -> ConnectorHealth:
    return ConnectorHealth(
        "local",
        name,
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
        state,
        tuple(tasks),
        connector_type="sink",
        configured_tasks=tuple(configured),
        task_workers=tuple(workers if workers is not None else [(t, "w1") for t, _ in tasks]),
    )


def part(
    committed: int | None, end: int, oldest_ms: int | None = None, p: int = 0
) -> SinkPartition:
    waiting = end - (committed or 0)
    return SinkPartition("local", "orders-sink", "orders", p, committed, end, waiting, oldest_ms)


class World:
    """Feeds cycles to one tracker, `interval` apart."""

    def __init__(self, interval: int = 10 * SEC) -> None:
        self.tracker = ProgressTracker(stall_after_ms=STALL, stuck_after_ms=STUCK, slo_seconds=300)
        self.now = T0
        self.interval = interval

    def cycle(
        self,
        health: ConnectorHealth,
        parts: Sequence[SinkPartition] = (),
        holders: dict[tuple[str, int], int] | None = None,
        flow: Status | None = None,
        others: Sequence[ConnectorHealth] = (),
    ) -> list[ProgressReport]:
        key = ("local", health.name)
        self.now += self.interval
        return self.tracker.observe(
            self.now,
            [health, *others],
            {key: list(parts)},
            {key: holders if holders is not None else {("orders", 0): 0}},
            {key: flow} if flow is not None else {},
        )

    def state(self, task_id: int | None = 0, connector: str = "orders-sink") -> str:
        found = [
            s for s in self.tracker.states if s.task_id == task_id and s.connector == connector
        ]
        assert len(found) == 1, self.tracker.states
        return found[0].state


def test_a_running_sink_whose_commits_stop_while_records_wait_is_stalled_after_stall_after() -> (
    None
):
    world = World()
    world.cycle(sink(), [part(100, 200)])
    for _ in range(2):  # 10 s, 20 s without a commit: not yet
        assert world.cycle(sink(), [part(100, 200)]) == []
        assert world.state() == "ok"
    reports = world.cycle(sink(), [part(100, 200)])  # 30 s
    assert [(r.progress.task_id, r.progress.state, r.changed) for r in reports] == [
        (0, "stalled", True)
    ]
    assert reports[0].progress.records_waiting == 100
    assert reports[0].grace_ms == STALL
    assert "100 records waiting, nothing committed for 30s" in reports[0].progress.detail
    again = world.cycle(sink(), [part(100, 200)])  # said again while it holds, not changed
    assert [(r.progress.state, r.changed) for r in again] == [("stalled", False)]
    assert again[0].progress.since_ms == reports[0].progress.since_ms


def test_commits_that_move_are_progress_however_much_waits() -> None:
    world = World()
    for committed in range(100, 160, 10):
        assert world.cycle(sink(), [part(committed, 10_000)]) == []
        assert world.state() == "ok"


def test_idle_is_never_stuck_and_the_stall_clock_starts_when_records_wait() -> None:
    world = World()
    for _ in range(10):  # 100 s with nothing waiting
        world.cycle(sink(), [part(200, 200)])
        assert world.state() == "ok"
    world.cycle(sink(), [part(200, 210)])  # records arrive, nothing is committed
    world.cycle(sink(), [part(200, 210)])
    assert world.state() == "ok"  # 20 s: not yet, the idle time does not count
    world.cycle(sink(), [part(200, 210)])
    world.cycle(sink(), [part(200, 210)])
    assert world.state() == "stalled"


def test_paused_stopped_or_failed_are_inactive_never_stuck() -> None:
    for health in (
        sink(state="PAUSED", tasks=[(0, "PAUSED")]),
        sink(state="STOPPED", tasks=[]),
        sink(tasks=[(0, "FAILED")]),
    ):
        world = World()
        for _ in range(12):  # two minutes with records waiting
            world.cycle(health, [part(100, 200)])
        assert world.state() == "inactive", health
        assert all(s.state in ("inactive", "ok") for s in world.tracker.states)


def test_a_restart_or_a_move_to_another_worker_gives_the_task_its_first_interval() -> None:
    world = World()
    for _ in range(4):  # first seen, then 30 s without a commit
        world.cycle(sink(), [part(100, 200)])
    assert world.state() == "stalled"
    moved = sink(workers=[(0, "w2")])
    world.cycle(moved, [part(100, 200)])  # a rebalance moved it: its clock starts again
    assert world.state() == "ok"
    world.cycle(sink(tasks=[(0, "RESTARTING")], workers=[(0, "w2")]), [part(100, 200)])
    assert world.state() == "ok"
    for _ in range(3):  # restarted: 0, 10, 20 s
        world.cycle(moved, [part(100, 200)])
        assert world.state() == "ok"
    world.cycle(moved, [part(100, 200)])  # 30 s after the restart
    assert world.state() == "stalled"


def test_a_task_without_any_status_is_unassigned_after_stuck_after_while_the_group_is_stable() -> (
    None
):
    world = World()
    never_started = sink(tasks=[], configured=[0])
    for _ in range(6):  # first seen, then 50 s
        world.cycle(never_started, [part(None, 50)], holders={})
        assert world.state() == "ok"
    reports = world.cycle(never_started, [part(None, 50)], holders={})  # 60 s
    assert [(r.progress.task_id, r.progress.state) for r in reports] == [(0, "unassigned")]
    assert reports[0].grace_ms == STUCK
    assert "task 0 no status for 60s" in reports[0].progress.detail


def test_a_rebalance_under_way_is_not_a_stuck_task() -> None:
    """A task of another connector moving to another worker is the group changing."""
    world = World()
    waiting = sink(tasks=[(0, "UNASSIGNED")])
    other = sink(name="other", workers=[(0, "w1")])
    for _ in range(5):
        world.cycle(waiting, others=[other])
    moved = sink(name="other", workers=[(0, "w2")])
    world.cycle(waiting, others=[moved])  # the clock starts again
    for _ in range(5):
        world.cycle(waiting, others=[moved])
        assert world.state() == "ok"
    world.cycle(waiting, others=[moved])
    assert world.state() == "unassigned"


def test_an_mm2_flow_reading_stall_is_stalled_as_a_whole() -> None:
    world = World()
    mirror = ConnectorHealth(
        "local",
        "east-to-west",
        "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "RUNNING",
        ((0, "RUNNING"),),
        "east",
        "west",
        "source",
        (0,),
        ((0, "w1"),),
    )
    assert world.cycle(mirror, flow=Status.OK) == []
    reports = world.cycle(mirror, flow=Status.STALL)
    assert [(r.progress.task_id, r.progress.state, r.progress.flow_status) for r in reports] == [
        (None, "stalled", "STALL")
    ]
    reports = world.cycle(mirror, flow=Status.OK)
    assert [(r.progress.task_id, r.progress.state, r.changed) for r in reports] == [
        (None, "ok", True)
    ]


def test_a_partition_no_member_holds_stays_with_the_task_that_held_it() -> None:
    """A task hung in put() past max.poll.interval.ms leaves the group; its thread still hangs."""
    world = World()
    two = sink(tasks=[(0, "RUNNING"), (1, "RUNNING")], configured=[0, 1])
    parts = [part(100, 200, p=0), part(50, 60, p=1)]
    world.cycle(two, parts, holders={("orders", 0): 1, ("orders", 1): 0})
    for _ in range(3):
        world.cycle(two, parts, holders={("orders", 1): 0})  # task 1 left the group
    assert world.state(1) == "stalled"
    assert [p.task_id for p in world.tracker.partitions] == [1, 0]


def test_progressing_but_far_behind_is_lagging() -> None:
    world = World()
    for committed in (100, 110, 120):
        world.cycle(sink(), [part(committed, 10_000, oldest_ms=world.now - 600 * SEC)])
    assert world.state() == "lagging"


def test_a_connector_deleted_is_forgotten() -> None:
    world = World()
    world.cycle(sink(), [part(100, 200)])
    world.now += 10 * SEC
    world.tracker.observe(world.now, [], {}, {}, {})
    assert world.tracker.states == []
    assert world.tracker._tasks == {}


def test_progress_news_are_events_with_growing_offsets_for_the_owner() -> None:
    world = World()
    for _ in range(5):  # stalled after 4, held 10 s at 5
        reports = world.cycle(sink(), [part(100, 200)])
    news = progress_news(reports, world.now, {"local": ("orders-sink",)})
    assert [key for key, _ in news] == ["local/orders-sink"]
    event = ProgressEvent.model_validate(news[0][1]["event"])
    assert event.progress == "stalled"
    assert event.source.topic == PROGRESS_SOURCE_TOPIC
    assert event.source.offset == world.now * 1000
    assert event.held_ms == 10 * SEC
    assert event.stuck_in_cluster == ("orders-sink",)
    later = progress_news(world.cycle(sink(), [part(100, 200)]), world.now, {})
    assert ProgressEvent.model_validate(later[0][1]["event"]).source.offset > event.source.offset


def test_each_connectors_reports_of_a_cycle_get_their_own_growing_offsets() -> None:
    from offsetd.lag.snapshot import TaskProgress

    def report(connector: str, task: int | None) -> ProgressReport:
        return ProgressReport(TaskProgress("local", connector, task, "stalled", T0), True, STALL)

    news = progress_news([report("a", 0), report("b", None), report("a", 1)], T0, {})
    offsets = [(key, body["event"]["source"]["offset"]) for key, body in news]  # type: ignore[index]
    assert offsets == [("local/a", T0 * 1000), ("local/b", T0 * 1000), ("local/a", T0 * 1000 + 1)]
