"""A `Snapshot` as Prometheus text exposition (format 0.0.4), rendered once per cycle (pure).

The collector renders after each cycle and keeps the bytes; a scrape returns them as they are,
so a 100k-series page costs a byte copy instead of `generate_latest`'s per-sample work. Names
follow Prometheus conventions: `offsetd_` prefix, base units (seconds, records), `_total` for
counters, help text on every family. `METRICS` is the public surface (dashboards, alerts and a
test check against it).

Per-partition labels are connect_cluster, connector, source, target, topic, partition: every
series that belongs to a connector names it, so two MirrorSourceConnectors on one source ->
target pair never collide. With `aggregate_per_topic` the partition label goes: lag in records
is summed, seconds and ages take the maximum, the status is the worst partition's, and the
per-partition N is left out. Checkpoints are per group and partition; failover readiness
(`offsetd_mm2_failover_*` but the re-consume bound) is per group only, whatever its partitions:
connect_cluster, connector (the MirrorCheckpointConnector), source, target, group.

Statuses (partition, connector, Connect states) are state sets: one series per possible state,
1 for the current one and 0 for the others. So a series never disappears when the status
changes: `== 1` alerts keep their `for:` clock on one continuous series, "status changed"
panels are `changes()` over it, and a status that is no longer current reads 0 instead of going
stale for five minutes.

Why one module of ~600 lines: it is the whole page, and the page must hold together: every
family shares the label sets, the per-topic aggregation rules and the state-set shape above, and
`METRICS` (the surface dashboards, alerts and a test check) is read off the same families;
split by family, those would be modules that must always change together.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from offsetd.events.models import PROGRESS_STATES
from offsetd.lag.snapshot import PartitionLag, Snapshot
from offsetd.lag.snapshot import escape_label as _escape
from offsetd.lag.status import SEVERITY, Status, worst

__all__ = ["CONNECT_STATES", "METRICS", "MetricFamily", "render"]

#: Connector and task states Connect reports; each gets a 0/1 series so alerts see a 1 appear.
CONNECT_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")


@dataclass(frozen=True)
class MetricFamily:
    name: str
    kind: str  # gauge | counter
    help: str


def _families(*families: MetricFamily) -> dict[str, MetricFamily]:
    return {f.name: f for f in families}


METRICS = _families(
    MetricFamily(
        "offsetd_mm2_lag_records",
        "gauge",
        "Source records MirrorMaker 2 has not replicated yet: log end (LSO) - (N + 1); "
        "log end - log start for a partition not started.",
    ),
    MetricFamily(
        "offsetd_mm2_lag_seconds",
        "gauge",
        "Age of the first unreplicated source record (its timestamp at N + 1); 0 when caught up.",
    ),
    MetricFamily(
        "offsetd_mm2_offset_age_seconds",
        "gauge",
        "Age of N, the last replicated offset (time since Connect last wrote it).",
    ),
    MetricFamily(
        "offsetd_mm2_last_replicated_offset",
        "gauge",
        "N: offset of the last source record MirrorMaker 2 replicated (Connect's offsets topic).",
    ),
    MetricFamily(
        "offsetd_mm2_partition_status",
        "gauge",
        "1 for the partition's current status, 0 for the other statuses "
        "(OK, WARN, STALL, STOP, REWIND).",
    ),
    MetricFamily(
        "offsetd_mm2_connector_status",
        "gauge",
        "1 for the connector's status, the worst of its partitions; 0 for the others.",
    ),
    MetricFamily(
        "offsetd_mm2_partitions",
        "gauge",
        "Source partitions of a MirrorSourceConnector, by status.",
    ),
    MetricFamily(
        "offsetd_mm2_partitions_not_started",
        "gauge",
        "Source partitions with no replicated offset yet.",
    ),
    MetricFamily(
        "offsetd_mm2_heartbeat_age_seconds",
        "gauge",
        "Age of the newest record in the replicated <source>.heartbeats topic on the target: "
        "moves only while replication moves.",
    ),
    MetricFamily(
        "offsetd_mm2_local_heartbeat_age_seconds",
        "gauge",
        "Age of the newest record in a cluster's local heartbeats topic (emitter liveness, "
        "not replication).",
    ),
    MetricFamily(
        "offsetd_mm2_checkpoint_age_seconds",
        "gauge",
        "Age of a group's checkpoint, exported only while the group's source offset is past "
        "the checkpoint's upstream offset.",
    ),
    MetricFamily(
        "offsetd_mm2_failover_reconsume_lower_bound_records",
        "gauge",
        "Records a group would consume again if it failed over to the target now "
        "(lower bound: source committed offset - checkpoint upstream offset).",
    ),
    MetricFamily(
        "offsetd_mm2_failover_ready",
        "gauge",
        "1 when the group could fail over to the target now: a checkpoint for every partition "
        "it committed on the source (of the replicated topics), none of them stale, its commits "
        "read; 0 otherwise (offsetd lag names the reason).",
    ),
    MetricFamily(
        "offsetd_mm2_failover_expected",
        "gauge",
        "1 when the group matches lag.failover_groups (it is expected to fail over), 0 for a "
        "group exported only because MM2 checkpoints it.",
    ),
    MetricFamily(
        "offsetd_mm2_failover_uncovered_partitions",
        "gauge",
        "Partitions the group committed on the source (of the replicated topics) that have no "
        "checkpoint: they would restart at auto.offset.reset on the target.",
    ),
    MetricFamily(
        "offsetd_mm2_failover_stale_partitions",
        "gauge",
        "Partitions whose checkpoint is older than lag.failover_max_checkpoint_age while the "
        "group's source offset is past it.",
    ),
    MetricFamily(
        "offsetd_mm2_failover_checkpoint_age_max_seconds",
        "gauge",
        "Age of the group's oldest checkpoint among those its source offset is past; absent "
        "while it is past none.",
    ),
    MetricFamily(
        "offsetd_mm2_failover_reread_lower_bound_records",
        "gauge",
        "Records the group would consume again if it failed over now, summed over its "
        "checkpointed partitions (lower bound).",
    ),
    MetricFamily(
        "offsetd_mm2_lag_slo_seconds",
        "gauge",
        "The seconds-lag objective from offsetd's config (lag.slo_seconds), for alert rules.",
    ),
    MetricFamily(
        "offsetd_connector_state",
        "gauge",
        "1 for the connector's current state in Connect REST, 0 for the other states.",
    ),
    MetricFamily(
        "offsetd_connector_task_state",
        "gauge",
        "1 for the task's current state in Connect REST, 0 for the other states.",
    ),
    MetricFamily(
        "offsetd_sink_lag_records",
        "gauge",
        "Records waiting for a sink connector: the log end minus its group's committed offset "
        "(task: the sink task whose consumer holds the partition).",
    ),
    MetricFamily(
        "offsetd_sink_lag_seconds",
        "gauge",
        "Age of the oldest record waiting for a sink connector (its timestamp); 0 when none waits.",
    ),
    MetricFamily(
        "offsetd_connector_progress",
        "gauge",
        "1 for the task's progress state read from Kafka (ok, lagging, stalled, unassigned, "
        'inactive), 0 for the others; task="": the connector as a whole.',
    ),
    MetricFamily(
        "offsetd_connector_progress_state_seconds",
        "gauge",
        "How long the task's current progress state has held.",
    ),
    MetricFamily(
        "offsetd_progress_stall_after_seconds",
        "gauge",
        "progress.stall_after: how long a RUNNING sink task may commit nothing while records "
        "wait before it reads stalled.",
    ),
    MetricFamily(
        "offsetd_mm2_lag_refresh_duration_seconds",
        "gauge",
        "Wall time of the last MM2 lag collection cycle.",
    ),
    MetricFamily(
        "offsetd_mm2_lag_refresh_stage_duration_seconds",
        "gauge",
        "Wall time of each stage of the last MM2 lag collection cycle (connect, offsets, "
        "source, heartbeats, checkpoints, sinks, persist): where a slow cycle waited.",
    ),
    MetricFamily(
        "offsetd_mm2_lag_last_refresh_timestamp_seconds",
        "gauge",
        "When the last MM2 lag collection cycle finished (Unix time).",
    ),
    MetricFamily(
        "offsetd_mm2_lag_collection_errors_total",
        "counter",
        "Failed steps of MM2 lag collection cycles, by stage.",
    ),
)


def _labels(pairs: Iterable[tuple[str, object]]) -> str:
    return ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs)


def _num(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value)}.0"
    return repr(value)


class _Page:
    """The page, built family by family: each family's lines are joined and encoded at once.

    So the 500k line strings of a 100k-partition page never exist together (only one family's
    at a time), which bounds the peak memory of rendering to about twice the page.
    """

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def family(self, name: str, lines: Iterable[str]) -> None:
        meta = METRICS[name]
        head = f"# HELP {name} {meta.help}\n# TYPE {name} {meta.kind}\n"
        self.chunks.append((head + "".join(lines)).encode("utf-8"))

    def bytes(self) -> bytes:
        return b"".join(self.chunks)


@dataclass(frozen=True, slots=True)
class _Row:
    """A partition (or, aggregated, a topic) with its label text prepared once."""

    labels: str
    lag_records: int
    lag_seconds: float | None
    offset_age: float | None
    last_replicated: int | None
    status: Status


#: Per current status: the five state-set lines of a partition after its label text.
_STATUS_LINES = {
    current: tuple(
        (f',status="{status.value}"}} {1 if status is current else 0}\n') for status in Status
    )
    for current in Status
}


def _partition_families(page: _Page, snapshot: Snapshot) -> None:
    """The five per-partition families, straight from the rows (the 100k-series hot path).

    One f-string per sample on the row's prepared label text (`PartitionLag.labels`), no
    intermediate objects: at 100k partitions this is 500k lines per cycle.
    """
    parts = snapshot.partitions
    now = snapshot.taken_ms
    page.family(
        "offsetd_mm2_lag_records",
        [f"offsetd_mm2_lag_records{{{p.labels}}} {p.lag_records}\n" for p in parts],
    )
    page.family(
        "offsetd_mm2_lag_seconds",
        [
            f"offsetd_mm2_lag_seconds{{{p.labels}}} {p.lag_seconds!r}\n"  # a float
            for p in parts
            if p.lag_seconds is not None
        ],
    )
    page.family(
        "offsetd_mm2_offset_age_seconds",
        [
            f"offsetd_mm2_offset_age_seconds{{{p.labels}}} "
            f"{max(0.0, (now - p.offset_written_ms) / 1000.0)!r}\n"
            for p in parts
            if p.offset_written_ms is not None
        ],
    )
    page.family(
        "offsetd_mm2_last_replicated_offset",
        [
            f"offsetd_mm2_last_replicated_offset{{{p.labels}}} {p.last_replicated}\n"
            for p in parts
            if p.last_replicated is not None
        ],
    )
    lines = _STATUS_LINES
    page.family(
        "offsetd_mm2_partition_status",
        [
            f"offsetd_mm2_partition_status{{{p.labels}{line}"
            for p in parts
            for line in lines[p.status]
        ],
    )


def _topic_rows(snapshot: Snapshot) -> list[_Row]:
    now = snapshot.taken_ms
    groups: dict[tuple[str, str, str, str, str], list[PartitionLag]] = {}
    for p in snapshot.partitions:
        key = (p.connect_cluster, p.connector, p.source, p.target, p.topic)
        groups.setdefault(key, []).append(p)
    rows = []
    for key, parts in groups.items():
        seconds = [p.lag_seconds for p in parts if p.lag_seconds is not None]
        ages = [a for a in (p.offset_age_seconds(now) for p in parts) if a is not None]
        rows.append(
            _Row(
                _labels(zip(_TOPIC_LABELS, key, strict=True)),
                sum(p.lag_records for p in parts),
                max(seconds) if seconds else None,
                max(ages) if ages else None,
                None,
                worst(p.status for p in parts),
            )
        )
    return rows


_TOPIC_LABELS = ("connect_cluster", "connector", "source", "target", "topic")


def _values(rows: list[_Row], name: str, get: Callable[[_Row], float | None]) -> Iterable[str]:
    for row in rows:
        value = get(row)
        if value is not None:
            yield f"{name}{{{row.labels}}} {_num(value)}\n"


def _topic_families(page: _Page, rows: list[_Row]) -> None:
    page.family(
        "offsetd_mm2_lag_records",
        _values(rows, "offsetd_mm2_lag_records", lambda r: r.lag_records),
    )
    page.family(
        "offsetd_mm2_lag_seconds", _values(rows, "offsetd_mm2_lag_seconds", lambda r: r.lag_seconds)
    )
    page.family(
        "offsetd_mm2_offset_age_seconds",
        _values(rows, "offsetd_mm2_offset_age_seconds", lambda r: r.offset_age),
    )
    page.family(
        "offsetd_mm2_last_replicated_offset",
        _values(rows, "offsetd_mm2_last_replicated_offset", lambda r: r.last_replicated),
    )
    page.family(
        "offsetd_mm2_partition_status",
        (
            f"offsetd_mm2_partition_status{{{r.labels}{line}"
            for r in rows
            for line in _STATUS_LINES[r.status]
        ),
    )


def render(
    snapshot: Snapshot,
    *,
    aggregate_per_topic: bool = False,
    errors_total: Mapping[str, int] | None = None,
) -> bytes:
    """The whole page for `snapshot` (every family in `METRICS`, in that order)."""
    page = _Page()
    if aggregate_per_topic:
        _topic_families(page, _topic_rows(snapshot))
    else:
        _partition_families(page, snapshot)
    _connector_rollups(page, snapshot)
    _heartbeats(page, snapshot)
    _checkpoints(page, snapshot)
    _failover(page, snapshot)
    page.family(
        "offsetd_mm2_lag_slo_seconds",
        [f"offsetd_mm2_lag_slo_seconds {_num(snapshot.slo_seconds)}\n"],
    )
    _connect_states(page, snapshot)
    _progress(page, snapshot)
    page.family(
        "offsetd_mm2_lag_refresh_duration_seconds",
        [f"offsetd_mm2_lag_refresh_duration_seconds {_num(snapshot.refresh_seconds)}\n"],
    )
    page.family(
        "offsetd_mm2_lag_refresh_stage_duration_seconds",
        (
            f"offsetd_mm2_lag_refresh_stage_duration_seconds{{{_labels([('stage', stage)])}}} "
            f"{_num(seconds)}\n"
            for stage, seconds in snapshot.stage_seconds.items()
        ),
    )
    page.family(
        "offsetd_mm2_lag_last_refresh_timestamp_seconds",
        [f"offsetd_mm2_lag_last_refresh_timestamp_seconds {_num(snapshot.taken_ms / 1000.0)}\n"],
    )
    page.family(
        "offsetd_mm2_lag_collection_errors_total",
        (
            f"offsetd_mm2_lag_collection_errors_total{{{_labels([('stage', stage)])}}} {count}\n"
            for stage, count in sorted((errors_total or {}).items())
        ),
    )
    return page.bytes()


_CONNECTOR = operator.attrgetter("connect_cluster", "connector", "source", "target")
_CONNECTOR_STATUS = operator.attrgetter(
    "connect_cluster", "connector", "source", "target", "status"
)


def _connector_rollups(page: _Page, snapshot: Snapshot) -> None:
    parts = snapshot.partitions
    by_status = Counter(map(_CONNECTOR_STATUS, parts))  # counted in C: one pass, no lists
    missing = Counter(_CONNECTOR(p) for p in parts if p.last_replicated is None)
    connectors = {key[:4] for key in by_status}
    for c in snapshot.connectors:  # an MM2 source connector with no partition yet is OK
        if c.source is not None and c.target is not None and _is_source(c.connector_class):
            connectors.add((c.connect_cluster, c.name, c.source, c.target))
    status_lines: list[str] = []
    count_lines: list[str] = []
    not_started: list[str] = []
    for key in sorted(connectors):
        base = _labels(zip(("connect_cluster", "connector", "source", "target"), key, strict=True))
        counts = {status: by_status.get((*key, status), 0) for status in SEVERITY}
        rolled = worst(status for status, count in counts.items() if count)
        for status in SEVERITY:
            status_lines.append(
                f'offsetd_mm2_connector_status{{{base},status="{status}"}} '
                f"{1 if status is rolled else 0}\n"
            )
            count_lines.append(
                f'offsetd_mm2_partitions{{{base},status="{status}"}} {counts[status]}\n'
            )
        not_started.append(f"offsetd_mm2_partitions_not_started{{{base}}} {missing[key]}\n")
    page.family("offsetd_mm2_connector_status", status_lines)
    page.family("offsetd_mm2_partitions", count_lines)
    page.family("offsetd_mm2_partitions_not_started", not_started)


def _is_source(connector_class: str) -> bool:
    return connector_class.rsplit(".", 1)[-1] == "MirrorSourceConnector"


def _heartbeats(page: _Page, snapshot: Snapshot) -> None:
    replicated, local = [], []
    for h in snapshot.heartbeats:
        if h.age_seconds is None:
            continue
        if h.source is not None and h.target is not None:
            labels = _labels((("source", h.source), ("target", h.target), ("topic", h.topic)))
            replicated.append(
                f"offsetd_mm2_heartbeat_age_seconds{{{labels}}} {_num(h.age_seconds)}\n"
            )
        else:
            labels = _labels((("cluster", h.cluster), ("topic", h.topic)))
            local.append(
                f"offsetd_mm2_local_heartbeat_age_seconds{{{labels}}} {_num(h.age_seconds)}\n"
            )
    page.family("offsetd_mm2_heartbeat_age_seconds", replicated)
    page.family("offsetd_mm2_local_heartbeat_age_seconds", local)


def _checkpoints(page: _Page, snapshot: Snapshot) -> None:
    ages, reconsume = [], []
    for c in snapshot.checkpoints:
        labels = _labels(
            (
                ("connect_cluster", c.connect_cluster),
                ("connector", c.connector),
                ("source", c.source),
                ("target", c.target),
                ("group", c.group),
                ("topic", c.topic),
                ("partition", c.partition),
            )
        )
        if c.age_seconds is not None:
            ages.append(f"offsetd_mm2_checkpoint_age_seconds{{{labels}}} {_num(c.age_seconds)}\n")
        if c.reconsume_lower_bound is not None:
            reconsume.append(
                f"offsetd_mm2_failover_reconsume_lower_bound_records{{{labels}}} "
                f"{c.reconsume_lower_bound}\n"
            )
    page.family("offsetd_mm2_checkpoint_age_seconds", ages)
    page.family("offsetd_mm2_failover_reconsume_lower_bound_records", reconsume)


def _failover(page: _Page, snapshot: Snapshot) -> None:
    """Per group and checkpoint flow (never per partition: the partitions are in the counts)."""
    ready, expected, uncovered, stale, ages, reread = [], [], [], [], [], []
    for g in snapshot.failover:
        labels = _labels(
            (
                ("connect_cluster", g.connect_cluster),
                ("connector", g.connector),
                ("source", g.source),
                ("target", g.target),
                ("group", g.group),
            )
        )
        ready.append(f"offsetd_mm2_failover_ready{{{labels}}} {int(g.ready)}\n")
        expected.append(f"offsetd_mm2_failover_expected{{{labels}}} {int(g.expected)}\n")
        if not g.commits_known:  # counts of partitions unknown: no series, not a made-up 0
            continue
        uncovered.append(
            f"offsetd_mm2_failover_uncovered_partitions{{{labels}}} {g.uncovered_count}\n"
        )
        stale.append(f"offsetd_mm2_failover_stale_partitions{{{labels}}} {g.stale}\n")
        if g.checkpoint_age_max_seconds is not None:
            ages.append(
                f"offsetd_mm2_failover_checkpoint_age_max_seconds{{{labels}}} "
                f"{_num(g.checkpoint_age_max_seconds)}\n"
            )
        if g.reread_lower_bound is not None:
            reread.append(
                f"offsetd_mm2_failover_reread_lower_bound_records{{{labels}}} "
                f"{g.reread_lower_bound}\n"
            )
    page.family("offsetd_mm2_failover_ready", ready)
    page.family("offsetd_mm2_failover_expected", expected)
    page.family("offsetd_mm2_failover_uncovered_partitions", uncovered)
    page.family("offsetd_mm2_failover_stale_partitions", stale)
    page.family("offsetd_mm2_failover_checkpoint_age_max_seconds", ages)
    page.family("offsetd_mm2_failover_reread_lower_bound_records", reread)


def _connect_states(page: _Page, snapshot: Snapshot) -> None:
    connectors: list[str] = []
    tasks: list[str] = []
    for c in sorted(snapshot.connectors, key=lambda c: (c.connect_cluster, c.name)):
        base = _labels((("connect_cluster", c.connect_cluster), ("connector", c.name)))
        states = CONNECT_STATES if c.state in CONNECT_STATES else (*CONNECT_STATES, c.state)
        connectors.extend(
            f'offsetd_connector_state{{{base},state="{_escape(s)}"}} {1 if s == c.state else 0}\n'
            for s in states
        )
        for task_id, task_state in c.tasks:
            t_states = (
                CONNECT_STATES if task_state in CONNECT_STATES else (*CONNECT_STATES, task_state)
            )
            tasks.extend(
                f'offsetd_connector_task_state{{{base},task="{task_id}",state="{_escape(s)}"}} '
                f"{1 if s == task_state else 0}\n"
                for s in t_states
            )
    page.family("offsetd_connector_state", connectors)
    page.family("offsetd_connector_task_state", tasks)


def _progress(page: _Page, snapshot: Snapshot) -> None:
    now = snapshot.taken_ms
    parts = snapshot.sink_partitions
    page.family(
        "offsetd_sink_lag_records",
        (f"offsetd_sink_lag_records{{{p.labels}}} {p.waiting}\n" for p in parts),
    )
    page.family(
        "offsetd_sink_lag_seconds",
        (f"offsetd_sink_lag_seconds{{{p.labels}}} {_num(p.lag_seconds(now))}\n" for p in parts),
    )
    states: list[str] = []
    held: list[str] = []
    for t in snapshot.progress:
        task = "" if t.task_id is None else str(t.task_id)
        base = _labels(
            (("connect_cluster", t.connect_cluster), ("connector", t.connector), ("task", task))
        )
        states.extend(
            f'offsetd_connector_progress{{{base},state="{s}"}} {1 if s == t.state else 0}\n'
            for s in PROGRESS_STATES
        )
        held.append(
            f"offsetd_connector_progress_state_seconds{{{base}}} {_num(t.held_ms(now) / 1000.0)}\n"
        )
    page.family("offsetd_connector_progress", states)
    page.family("offsetd_connector_progress_state_seconds", held)
    stall = snapshot.stall_after_seconds
    page.family(
        "offsetd_progress_stall_after_seconds",
        [f"offsetd_progress_stall_after_seconds {_num(stall)}\n"] if stall is not None else [],
    )
