"""Progress from Kafka, judged: which tasks are stalled, unassigned, lagging or fine (pure).

Connect's status says RUNNING while a sink task hangs in a call to the system it writes to, and
says nothing at all about a task that never started. The collector reads what Kafka knows (a
sink's committed offsets against its log ends, MM2's flow statuses, which tasks have a status)
and `ProgressTracker.observe` turns each cycle of it into a state per task, and the changes into
`ProgressReport`s the daemon sends to each connector's owner as progress events.

The states (docs/lag.md, "Stuck connectors", has the timings and why):

- `stalled`: the connector and the task RUNNING, records waiting on the task's partitions, and
  no committed offset of them moved for `stall_after` — counted from the last move, or from when
  the task was last seen to start or move to another worker (a restart, a rebalance, a creation
  gets its first interval), or from when this collector first looked. An MM2 flow whose lag
  status reads STALL (`offsetd.lag.status`, the same rule on MM2's offsets) is stalled as a
  whole (task None).
- `unassigned`: the connector RUNNING and one of its configured tasks UNASSIGNED, RESTARTING or
  without any status (a task that hangs in `start()` never writes one) for `stuck_after`,
  counted from when the worker group was last seen to change (a rebalance under way is no stuck
  task); the connector itself UNASSIGNED likewise (task None). Neither librdkafka (it refuses a
  `connect`-protocol group) nor aiokafka (it fails to decode one now and then) describes
  Connect's worker group reliably, so a change is read from Connect's statuses: which worker
  runs which task. A worker that crashed keeps its RUNNING statuses until the group notices it
  is gone; `stuck_after` waits out Connect's scheduled rebalance delay for that reason.
  `group_stable` takes a coordinator's word where one is had.
- `lagging`: progressing, but the oldest waiting record is older than the lag objective.
- `inactive`: PAUSED, STOPPED or FAILED (FAILED has its own status events): never judged.
- `ok`: anything else, idle included (nothing waiting is never stuck).

A sink partition is the task's whose consumer holds it (`holders`, when a reader can say); when
none is known it stays with the task that last held it, or goes to the only task there is (a
task blocked in `put()` past `max.poll.interval.ms` is dropped from the group while its thread
still hangs), else to the connector as a whole.

Pure: no I/O, time comes in as `now_ms`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from offsetd.events.models import PROGRESS_SOURCE_TOPIC, ProgressState, owner_key
from offsetd.lag.snapshot import ConnectorHealth, SinkPartition, TaskProgress
from offsetd.lag.status import Status

__all__ = ["ProgressReport", "ProgressTracker", "progress_news"]

TP = tuple[str, int]
ConnectorKey = tuple[str, str]
_WAITING_STATES = frozenset({"UNASSIGNED", "RESTARTING"})


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """A state to tell the connector's owner: changed this cycle, or a stuck state that holds."""

    progress: TaskProgress
    changed: bool
    grace_ms: int  # how long the task's latest status must have held (decide.new_episode)


@dataclass
class _Task:
    """What the tracker remembers of one task between cycles."""

    state: ProgressState = "ok"
    since_ms: int = 0
    status: str | None = None  # None: never seen ("" is a task without any status)
    worker: str = ""
    started_ms: int = 0  # when its status or worker last changed (or first seen)
    committed: dict[TP, int | None] = field(default_factory=dict)
    moved_ms: int = 0  # when a committed offset of its partitions last moved
    waiting_since_ms: int | None = None  # UNASSIGNED, RESTARTING or no status since


class ProgressTracker:
    """Keeps each task's history across cycles; `observe` judges one cycle."""

    def __init__(self, *, stall_after_ms: int, stuck_after_ms: int, slo_seconds: float) -> None:
        self.stall_after_ms = stall_after_ms
        self.stuck_after_ms = stuck_after_ms
        self.slo_seconds = slo_seconds
        self._tasks: dict[tuple[str, str, int | None], _Task] = {}
        self._owner: dict[tuple[str, str, TP], int] = {}  # the task that last held a partition
        self._unstable_ms: dict[str, int] = {}  # per Connect cluster: when it last changed
        self._layouts: dict[str, frozenset[tuple[str, int, str]]] = {}
        # a sink partition's label text, formatted once (a large estate's page every cycle)
        self._labels: dict[tuple[str, str, TP, int | None], str] = {}
        self.states: list[TaskProgress] = []  # the last cycle's, for the exposition
        self.partitions: list[SinkPartition] = []

    def observe(
        self,
        now_ms: int,
        connectors: Iterable[ConnectorHealth],
        sink_partitions: Mapping[ConnectorKey, Sequence[SinkPartition]],
        holders: Mapping[ConnectorKey, Mapping[TP, int]],
        flows: Mapping[ConnectorKey, Status],
        group_stable: Mapping[str, bool | None] | None = None,
    ) -> list[ProgressReport]:
        """One cycle: every connector seen now, the sinks' partitions, which task's consumer
        holds each (`holders`), MM2 source flows' worst status, and whether each Connect
        cluster's worker group is Stable (False: rebalancing; None or absent: not known)."""
        connectors = list(connectors)
        self._note_group(now_ms, connectors)
        for cluster, stable in (group_stable or {}).items():
            if stable is False:
                self._unstable_ms[cluster] = now_ms
        reports: list[ProgressReport] = []
        states: list[TaskProgress] = []
        partitions: list[SinkPartition] = []
        seen: set[tuple[str, str, int | None]] = set()
        for health in connectors:
            key = (health.connect_cluster, health.name)
            parts = self._attribute(key, health, sink_partitions.get(key, ()), holders.get(key, {}))
            partitions.extend(parts)
            for judged in self._judge(now_ms, health, parts, flows.get(key)):
                ident = (judged.connect_cluster, judged.connector, judged.task_id)
                seen.add(ident)
                track = self._tasks[ident]
                changed = judged.state != track.state  # first sight: from "ok"
                if changed or track.since_ms == 0:
                    track.state, track.since_ms = judged.state, now_ms
                progress = _with_since(judged, track.since_ms)
                states.append(progress)
                if changed or progress.state in ("stalled", "unassigned"):
                    stuck = progress.state == "unassigned"
                    grace = self.stuck_after_ms if stuck else self.stall_after_ms
                    reports.append(ProgressReport(progress, changed, grace))
        for gone in self._tasks.keys() - seen:
            del self._tasks[gone]
        live = {(c, n) for c, n, _ in seen}
        for owned in [o for o in self._owner if (o[0], o[1]) not in live]:
            del self._owner[owned]
        if len(self._labels) > 2 * max(len(partitions), 1000):
            self._labels.clear()
        self.states, self.partitions = states, partitions
        return reports

    def _note_group(self, now_ms: int, connectors: Sequence[ConnectorHealth]) -> None:
        """When each Connect cluster's assignment (which worker runs which task) last changed."""
        layouts: dict[str, set[tuple[str, int, str]]] = {}
        for health in connectors:
            layout = layouts.setdefault(health.connect_cluster, set())
            layout.update((health.name, task, worker) for task, worker in health.task_workers)
        for cluster, layout in layouts.items():
            frozen = frozenset(layout)
            if self._layouts.get(cluster) != frozen:
                self._layouts[cluster] = frozen
                self._unstable_ms[cluster] = now_ms

    # -- one connector ----------------------------------------------------------------------------

    def _attribute(
        self,
        key: ConnectorKey,
        health: ConnectorHealth,
        parts: Sequence[SinkPartition],
        holders: Mapping[TP, int],
    ) -> list[SinkPartition]:
        """Each partition with the task that holds it, held it last, or is the only one."""
        only = health.configured_tasks[0] if len(health.configured_tasks) == 1 else None
        out = []
        for part in parts:
            tp = (part.topic, part.partition)
            held_key = (key[0], key[1], tp)
            task = holders.get(tp)
            if task is not None:
                self._owner[held_key] = task
            else:
                task = self._owner.get(held_key, only)
            row = SinkPartition(
                part.connect_cluster,
                part.connector,
                part.topic,
                part.partition,
                part.committed,
                part.end,
                part.waiting,
                part.oldest_waiting_ms,
                task,
            )
            label_key = (*held_key, task)
            labels = self._labels.get(label_key)
            if labels is None:
                labels = self._labels[label_key] = row.label_text()
            object.__setattr__(row, "labels", labels)
            out.append(row)
        return out

    def _track(self, ident: tuple[str, str, int | None], now_ms: int) -> _Task:
        track = self._tasks.get(ident)
        if track is None:
            track = self._tasks[ident] = _Task(started_ms=now_ms, moved_ms=now_ms)
        return track

    def _judge(
        self,
        now_ms: int,
        health: ConnectorHealth,
        parts: Sequence[SinkPartition],
        flow: Status | None,
    ) -> list[TaskProgress]:
        cluster, name = health.connect_cluster, health.name
        whole = self._track((cluster, name, None), now_ms)
        _note_status(whole, health.state, "", now_ms)
        if health.state in ("PAUSED", "STOPPED", "FAILED"):
            whole.waiting_since_ms = None
            out = [TaskProgress(cluster, name, None, "inactive", now_ms, detail=health.state)]
            for task_id in health.configured_tasks:
                self._track((cluster, name, task_id), now_ms)
                out.append(TaskProgress(cluster, name, task_id, "inactive", now_ms))
            return out
        out = [self._whole(now_ms, health, whole, parts, flow)]
        statuses = dict(health.tasks)
        workers = dict(health.task_workers)
        for task_id in sorted({*health.configured_tasks, *statuses}):
            track = self._track((cluster, name, task_id), now_ms)
            status = statuses.get(task_id, "")
            _note_status(track, status, workers.get(task_id, ""), now_ms)
            mine = [p for p in parts if p.task_id == task_id]
            out.append(self._task(now_ms, health, task_id, status, track, mine))
        return out

    def _whole(
        self,
        now_ms: int,
        health: ConnectorHealth,
        whole: _Task,
        parts: Sequence[SinkPartition],
        flow: Status | None,
    ) -> TaskProgress:
        """The connector as a whole: UNASSIGNED for too long, an MM2 flow's status, or the
        waiting records of partitions no task can be told to hold."""
        cluster, name = health.connect_cluster, health.name
        if health.state in _WAITING_STATES:
            return self._unassigned_or_ok(now_ms, cluster, name, None, whole, health.state)
        whole.waiting_since_ms = None
        if flow is not None:
            state: ProgressState = "ok"
            if flow is Status.STALL:
                state = "stalled"
            elif flow is Status.WARN:
                state = "lagging"
            elif flow is Status.STOP:
                state = "inactive"
            return TaskProgress(
                cluster, name, None, state, now_ms, flow_status=str(flow), detail=f"flow {flow}"
            )
        orphans = [p for p in parts if p.task_id is None]
        return self._sink(now_ms, cluster, name, None, whole, orphans, running=True)

    def _task(
        self,
        now_ms: int,
        health: ConnectorHealth,
        task_id: int,
        status: str,
        track: _Task,
        parts: Sequence[SinkPartition],
    ) -> TaskProgress:
        cluster, name = health.connect_cluster, health.name
        if status in ("PAUSED", "FAILED"):
            track.waiting_since_ms = None
            return TaskProgress(cluster, name, task_id, "inactive", now_ms, detail=status)
        if status in _WAITING_STATES or not status:
            return self._unassigned_or_ok(
                now_ms, cluster, name, task_id, track, status or "no status"
            )
        track.waiting_since_ms = None
        running = status == "RUNNING" and health.state == "RUNNING"
        return self._sink(now_ms, cluster, name, task_id, track, parts, running=running)

    def _unassigned_or_ok(
        self, now_ms: int, cluster: str, name: str, task_id: int | None, track: _Task, status: str
    ) -> TaskProgress:
        if track.waiting_since_ms is None:
            track.waiting_since_ms = now_ms
        since = max(track.waiting_since_ms, self._unstable_ms.get(cluster, 0))
        held = now_ms - since
        what = "the connector" if task_id is None else f"task {task_id}"
        if held >= self.stuck_after_ms:
            detail = f"{what} {status} for {held // 1000}s while the worker group is stable"
            return TaskProgress(cluster, name, task_id, "unassigned", now_ms, detail=detail)
        return TaskProgress(cluster, name, task_id, "ok", now_ms, detail=f"{what} {status}")

    def _sink(
        self,
        now_ms: int,
        cluster: str,
        name: str,
        task_id: int | None,
        track: _Task,
        parts: Sequence[SinkPartition],
        *,
        running: bool,
    ) -> TaskProgress:
        committed = {(p.topic, p.partition): p.committed for p in parts}
        if committed != track.committed:
            if track.committed or not committed:  # moved (or came or went): progress
                track.moved_ms = now_ms
            track.committed = committed
        if not parts:
            return TaskProgress(cluster, name, task_id, "ok", now_ms)
        waiting = sum(p.waiting for p in parts)
        oldest = [p.oldest_waiting_ms for p in parts if p.waiting > 0 and p.oldest_waiting_ms]
        age = max(0.0, (now_ms - min(oldest)) / 1000.0) if oldest else None

        def judged(state: ProgressState, detail: str = "") -> TaskProgress:
            return TaskProgress(cluster, name, task_id, state, now_ms, waiting, age, None, detail)

        if waiting <= 0:
            track.moved_ms = now_ms  # idle is never stuck: the stall clock starts when it waits
            return judged("ok")
        if not running:
            return judged("ok")
        quiet_ms = now_ms - max(track.moved_ms, track.started_ms)
        if quiet_ms >= self.stall_after_ms:
            oldest_text = f", the oldest {age:.0f}s old" if age is not None else ""
            quiet = f"nothing committed for {quiet_ms // 1000}s"
            return judged("stalled", f"{waiting} records waiting, {quiet}{oldest_text}")
        if age is not None and age > self.slo_seconds:
            return judged("lagging", f"the oldest waiting record is {age:.0f}s old")
        return judged("ok")

    def stuck(self, connect_cluster: str) -> tuple[str, ...]:
        """The cluster's connectors stalled or unassigned in the last cycle."""
        return tuple(
            sorted(
                {
                    s.connector
                    for s in self.states
                    if s.connect_cluster == connect_cluster and s.state in ("stalled", "unassigned")
                }
            )
        )


def _note_status(track: _Task, status: str, worker: str, now_ms: int) -> None:
    """A new status or worker restarts the task's clock: a restart, a rebalance, a creation."""
    if (status, worker) != (track.status, track.worker):
        if track.status is not None:  # not the first sight: it really changed
            track.started_ms = now_ms
        track.status, track.worker = status, worker


def _with_since(progress: TaskProgress, since_ms: int) -> TaskProgress:
    return TaskProgress(
        progress.connect_cluster,
        progress.connector,
        progress.task_id,
        progress.state,
        since_ms,
        progress.records_waiting,
        progress.oldest_waiting_seconds,
        progress.flow_status,
        progress.detail,
    )


def progress_news(
    reports: Sequence[ProgressReport], cycle_ms: int, stuck: Mapping[str, tuple[str, ...]]
) -> list[tuple[str, dict[str, object]]]:
    """The nudges of one cycle's reports: (owner key, `{"type": "progress", "event": ...}`).

    Each event's source is `PROGRESS_SOURCE_TOPIC` at offset `cycle_ms * 1000 + i`, where i
    counts the cycle's reports of the same connector (its tasks and itself, fewer than 1,000):
    the engine keeps offsets per connector, so they only grow and a nudge read twice is dropped
    like any replayed record. `stuck`: per Connect cluster, the connectors stalled or
    unassigned this cycle.
    """
    out: list[tuple[str, dict[str, object]]] = []
    counted: dict[str, int] = {}
    for report in reports:
        p = report.progress
        key = owner_key(p.connect_cluster, p.connector)
        index = counted[key] = counted.get(key, -1) + 1
        if index >= 1000:
            continue  # a connector of over 999 tasks: the rest are said next cycle
        event = {
            "kind": "progress",
            "connect_cluster": p.connect_cluster,
            "connector": p.connector,
            "source": {
                "topic": PROGRESS_SOURCE_TOPIC,
                "partition": 0,
                "offset": cycle_ms * 1000 + index,
                "timestamp_ms": cycle_ms,
            },
            "task_id": p.task_id,
            "progress": p.state,
            "since_ms": p.since_ms,
            "held_ms": p.held_ms(cycle_ms),
            "grace_ms": report.grace_ms,
            "records_waiting": p.records_waiting,
            "oldest_waiting_seconds": p.oldest_waiting_seconds,
            "flow_status": p.flow_status,
            "detail": p.detail,
            "stuck_in_cluster": list(stuck.get(p.connect_cluster, ())),
        }
        out.append((key, {"type": "progress", "event": event}))
    return out
