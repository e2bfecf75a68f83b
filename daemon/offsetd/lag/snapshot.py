"""What one collection cycle found: plain frozen rows, rendered by `exposition` and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offsetd.events.models import ProgressState
from offsetd.lag.readiness import GroupReadiness
from offsetd.lag.status import Status

__all__ = [
    "CheckpointLag",
    "ConnectorHealth",
    "HeartbeatAge",
    "PartitionLag",
    "SinkPartition",
    "Snapshot",
    "TaskProgress",
    "escape_label",
]


def escape_label(value: str) -> str:
    """A Prometheus label value (text format 0.0.4)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One MirrorSourceConnector source partition."""

    connect_cluster: str
    connector: str
    source: str
    target: str
    topic: str
    partition: int
    end: int  # log end, or last stable offset (read_committed)
    log_start: int | None
    last_replicated: int | None  # N; None: not started
    offset_written_ms: int | None  # timestamp of the offsets record holding N
    lag_records: int
    lag_seconds: float | None  # None: lagging, first record's time not fetched yet
    status: Status
    data_loss: bool = False  # N + 1 was deleted by retention before MM2 replicated it
    #: The exposition's label text. It names the connector (Connect cluster and connector) as
    #: well as the flow: two MirrorSourceConnectors on one source -> target pair (blue/green, a
    #: topic subset, a second Connect cluster) would otherwise export identical series with
    #: different values, and Prometheus would keep one at random. Built once per row (rows of
    #: unchanged partitions are reused from cycle to cycle, so a 100k-partition page does not
    #: format its labels every cycle).
    labels: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.labels:
            object.__setattr__(
                self,
                "labels",
                f'connect_cluster="{escape_label(self.connect_cluster)}",'
                f'connector="{escape_label(self.connector)}",'
                f'source="{escape_label(self.source)}",target="{escape_label(self.target)}",'
                f'topic="{escape_label(self.topic)}",partition="{self.partition}"',
            )

    def offset_age_seconds(self, now_ms: int) -> float | None:
        if self.offset_written_ms is None:
            return None
        return max(0.0, (now_ms - self.offset_written_ms) / 1000.0)

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "source": self.source,
            "target": self.target,
            "topic": self.topic,
            "partition": self.partition,
            "end_offset": self.end,
            "log_start_offset": self.log_start,
            "last_replicated_offset": self.last_replicated,
            "not_started": self.last_replicated is None,
            "lag_records": self.lag_records,
            "lag_seconds": self.lag_seconds,
            "offset_age_seconds": self.offset_age_seconds(now_ms),
            "status": str(self.status),
            "data_loss": self.data_loss,
        }


@dataclass(frozen=True, slots=True)
class ConnectorHealth:
    """A connector's state from Connect REST (`GET /connectors?expand=status`)."""

    connect_cluster: str
    name: str
    connector_class: str
    state: str
    tasks: tuple[tuple[int, str], ...]
    source: str | None = None  # MM2 connectors only
    target: str | None = None
    connector_type: str = ""  # sink, source (Connect's `type`), "" unknown
    configured_tasks: tuple[int, ...] = ()  # the task ids of its task configs
    task_workers: tuple[tuple[int, str], ...] = ()  # (task id, worker id), tasks with a status

    @property
    def running(self) -> bool:
        return (
            self.state == "RUNNING"
            and bool(self.tasks)
            and all(s == "RUNNING" for _, s in self.tasks)
        )


@dataclass(frozen=True, slots=True)
class HeartbeatAge:
    """Age of the newest heartbeat: replicated (`<source>.heartbeats` on the target) or local."""

    cluster: str  # where the topic lives
    topic: str
    source: str | None  # the replicated flow (None for a local heartbeats topic)
    target: str | None
    age_seconds: float | None  # None: the topic is empty or missing


@dataclass(frozen=True, slots=True)
class CheckpointLag:
    connect_cluster: str  # the MirrorCheckpointConnector that emits the checkpoints
    connector: str
    source: str
    target: str
    group: str
    topic: str  # source topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    group_offset: int | None  # the group's committed offset on the source
    age_seconds: float | None  # only while the group is past the checkpoint
    reconsume_lower_bound: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "source": self.source,
            "target": self.target,
            "group": self.group,
            "topic": self.topic,
            "partition": self.partition,
            "upstream_offset": self.upstream_offset,
            "downstream_offset": self.downstream_offset,
            "group_offset": self.group_offset,
            "checkpoint_age_seconds": self.age_seconds,
            "failover_reconsume_records_lower_bound": self.reconsume_lower_bound,
        }


@dataclass(frozen=True, slots=True)
class SinkPartition:
    """One partition a sink connector consumes: where its group stands against the log end."""

    connect_cluster: str
    connector: str
    topic: str
    partition: int
    committed: int | None  # the group's committed offset (None: nothing committed yet)
    end: int  # the log end (the last stable offset)
    waiting: int  # records between the committed offset (or where it starts) and the end
    oldest_waiting_ms: int | None  # the oldest waiting record's timestamp, when read
    task_id: int | None = None  # whose consumer holds it (set by the tracker)
    labels: str = field(default="", compare=False, repr=False)

    def lag_seconds(self, now_ms: int) -> float:
        if self.waiting <= 0 or self.oldest_waiting_ms is None:
            return 0.0
        return max(0.0, (now_ms - self.oldest_waiting_ms) / 1000.0)

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "task": self.task_id,
            "topic": self.topic,
            "partition": self.partition,
            "committed_offset": self.committed,
            "end_offset": self.end,
            "lag_records": self.waiting,
            "lag_seconds": self.lag_seconds(now_ms),
        }

    def label_text(self) -> str:
        task = "" if self.task_id is None else str(self.task_id)
        return (
            f'connect_cluster="{escape_label(self.connect_cluster)}",'
            f'connector="{escape_label(self.connector)}",task="{task}",'
            f'topic="{escape_label(self.topic)}",partition="{self.partition}"'
        )


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """The progress state of one task (task_id None: the connector as a whole)."""

    connect_cluster: str
    connector: str
    task_id: int | None
    state: ProgressState
    since_ms: int
    records_waiting: int | None = None
    oldest_waiting_seconds: float | None = None
    flow_status: str | None = None
    detail: str = ""

    def held_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.since_ms)

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "task": self.task_id,
            "state": self.state,
            "held_seconds": self.held_ms(now_ms) / 1000.0,
            "records_waiting": self.records_waiting,
            "oldest_waiting_seconds": self.oldest_waiting_seconds,
            "flow_status": self.flow_status,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Snapshot:
    taken_ms: int
    partitions: tuple[PartitionLag, ...] = ()
    connectors: tuple[ConnectorHealth, ...] = ()
    heartbeats: tuple[HeartbeatAge, ...] = ()
    checkpoints: tuple[CheckpointLag, ...] = ()
    refresh_seconds: float = 0.0
    # the cycle's wall time per stage (connect, offsets, source, heartbeats, checkpoints,
    # sinks, persist; the error stages' names), adding up to refresh_seconds
    stage_seconds: dict[str, float] = field(default_factory=dict)
    slo_seconds: float = 300.0
    errors: dict[str, str] = field(default_factory=dict)  # stage -> last error this cycle
    # sink progress (`offsetd.lag.progress`): each sink partition, each task's state
    sink_partitions: tuple[SinkPartition, ...] = ()
    progress: tuple[TaskProgress, ...] = ()
    stall_after_seconds: float | None = None  # None: progress is not collected
    # failover readiness per MM2 checkpoint flow and group (`offsetd.lag.readiness`)
    failover: tuple[GroupReadiness, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "taken_ms": self.taken_ms,
            "refresh_seconds": self.refresh_seconds,
            "stage_seconds": dict(self.stage_seconds),
            "partitions": [p.as_json(self.taken_ms) for p in self.partitions],
            "connectors": [
                {
                    "connect_cluster": c.connect_cluster,
                    "connector": c.name,
                    "class": c.connector_class,
                    "state": c.state,
                    "tasks": [{"id": i, "state": s} for i, s in c.tasks],
                    "source": c.source,
                    "target": c.target,
                }
                for c in self.connectors
            ],
            "heartbeats": [
                {
                    "cluster": h.cluster,
                    "topic": h.topic,
                    "replicated": h.source is not None,
                    "source": h.source,
                    "target": h.target,
                    "age_seconds": h.age_seconds,
                }
                for h in self.heartbeats
            ],
            "checkpoints": [c.as_json() for c in self.checkpoints],
            "failover": [g.as_json() for g in self.failover],
            "sinks": [p.as_json(self.taken_ms) for p in self.sink_partitions],
            "progress": [p.as_json(self.taken_ms) for p in self.progress],
            "errors": dict(self.errors),
        }
