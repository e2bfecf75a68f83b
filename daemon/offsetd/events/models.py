"""The typed events the daemon reacts to: decoded from Connect's status, DLQ and offsets topics,
and the progress the lag collector reads from Kafka (`ProgressEvent`).

Every event carries its `source` (topic, partition, offset, timestamp): the timestamp is the
event time every window and cooldown uses, and (topic, partition, offset) makes counting
idempotent when compacted topics are replayed after a restart.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "PROGRESS_SOURCE_TOPIC",
    "PROGRESS_STATES",
    "TRACE_HEAD_CHARS",
    "ConnectorStatusEvent",
    "DlqRecordEvent",
    "ErrorInfo",
    "Event",
    "EventKind",
    "JsonScalar",
    "ProgressEvent",
    "ProgressState",
    "RecordRef",
    "SourceOffsetEvent",
    "SourceRecord",
    "TaskStatusEvent",
    "TopicStatusEvent",
    "error_from_trace",
    "owner_key",
]

JsonScalar = str | int | float | bool | None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceRecord(_Frozen):
    """Where an event came from: its Kafka coordinates and its record timestamp (event time)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    @property
    def coordinates(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"


class EventKind(enum.StrEnum):
    CONNECTOR_STATUS = "connector_status"
    TASK_STATUS = "task_status"
    TOPIC_STATUS = "topic_status"
    DLQ_RECORD = "dlq_record"
    SOURCE_OFFSET = "source_offset"
    PROGRESS = "progress"


class ErrorInfo(_Frozen):
    """What failed, read from a FAILED status trace or a DLQ record's error headers.

    `exception_class` is the outermost exception; `root_cause_class` the last `Caused by:` in the
    (bounded) head of the trace, which usually says what really happened (DataException under
    "Tolerance exceeded", a SocketTimeoutException under a ConnectException, ...).
    """

    exception_class: str | None = None
    message: str | None = None
    root_cause_class: str | None = None
    root_cause_message: str | None = None
    stage: str | None = None  # DLQ only: VALUE_CONVERTER, TASK_PUT, ...
    executing_class: str | None = None  # DLQ only: the class running at that stage
    trace_head: str = ""  # the first TRACE_HEAD_CHARS of the trace: what rules may search


TRACE_HEAD_CHARS = 4096


class RecordRef(_Frozen):
    """A Kafka record, exactly: the failing record of a DLQ event, or a skip target."""

    topic: str
    partition: int
    offset: int


class _Event(_Frozen):
    connect_cluster: str
    connector: str
    source: SourceRecord

    @property
    def time_ms(self) -> int:
        return self.source.timestamp_ms


class ConnectorStatusEvent(_Event):
    """`status-connector-<name>`; `state=None` is a tombstone (the connector was deleted)."""

    kind: Literal[EventKind.CONNECTOR_STATUS] = EventKind.CONNECTOR_STATUS
    state: str | None
    worker_id: str | None = None
    generation: int | None = None
    error: ErrorInfo | None = None


class TaskStatusEvent(_Event):
    """`status-task-<name>-<id>` (the id after the last `-`); `state=None` is a tombstone."""

    kind: Literal[EventKind.TASK_STATUS] = EventKind.TASK_STATUS
    task_id: int
    state: str | None
    worker_id: str | None = None
    generation: int | None = None
    error: ErrorInfo | None = None


class TopicStatusEvent(_Event):
    """`status-topic-<topic>:connector-<name>`: the connector used a topic (KIP-558)."""

    kind: Literal[EventKind.TOPIC_STATUS] = EventKind.TOPIC_STATUS
    topic: str
    task_id: int | None = None
    discovered_ms: int | None = None
    deleted: bool = False


class DlqRecordEvent(_Event):
    """A record a sink task sent to its dead letter queue, with the `__connect.errors.*` context.

    `record` is the failing record's original coordinates (None when the DLQ has no context
    headers); `headers` keeps every `__connect.errors.*` header decoded as text.
    """

    kind: Literal[EventKind.DLQ_RECORD] = EventKind.DLQ_RECORD
    task_id: int | None = None
    record: RecordRef | None = None
    error: ErrorInfo
    headers: dict[str, str | None] = Field(default_factory=dict)


class SourceOffsetEvent(_Event):
    """A source connector's committed offset for one of its partitions (None: removed)."""

    kind: Literal[EventKind.SOURCE_OFFSET] = EventKind.SOURCE_OFFSET
    partition: dict[str, JsonScalar]
    offset: dict[str, JsonScalar] | None


ProgressState = Literal["ok", "lagging", "stalled", "unassigned", "inactive"]
PROGRESS_STATES: tuple[ProgressState, ...] = ("ok", "lagging", "stalled", "unassigned", "inactive")
#: The `source.topic` of a progress event: no Kafka record carries it. Its offset is the
#: collector's cycle time in ms times 1,000 plus its index among the connector's reports of
#: that cycle, so it only grows for one connector and a nudge read twice is ignored like any
#: replayed record.
PROGRESS_SOURCE_TOPIC = "~progress"


class ProgressEvent(_Event):
    """What Kafka says of a connector's progress, when Connect's status says nothing is wrong.

    Made by the lag collector (`offsetd.lag.progress`), which compares a sink's committed
    offsets with the log ends and reads MM2's flow statuses, and sent to the connector's owner
    as a nudge: one owner decides it with the connector's other events. A state that is not
    `ok` is sent again every cycle while it holds; the engine decides each *episode* once
    (`offsetd.engine.decide`). `task_id` is None when the connector as a whole is meant (an
    MM2 flow, a sink partition no task holds). `grace_ms`: how long a task must have held its
    latest status (a restart, a rebalance, a creation) before this state counts.
    """

    kind: Literal[EventKind.PROGRESS] = EventKind.PROGRESS
    task_id: int | None = None
    progress: ProgressState
    since_ms: int  # when the collector first saw this state
    held_ms: int = 0  # how long the state has held when sent
    grace_ms: int = 0
    records_waiting: int | None = None
    oldest_waiting_seconds: float | None = None
    flow_status: str | None = None  # MM2 flows: the lag collector's OK/WARN/STALL/STOP/REWIND
    detail: str = ""  # in words, for the audit and a person
    # the Connect cluster's connectors stalled or unassigned in the same cycle (this one too):
    # the blast radius counts them as failing, since many stuck at once is an outage
    stuck_in_cluster: tuple[str, ...] = ()


Event = Annotated[
    ConnectorStatusEvent
    | TaskStatusEvent
    | TopicStatusEvent
    | DlqRecordEvent
    | SourceOffsetEvent
    | ProgressEvent,
    Field(discriminator="kind"),
]


def owner_key(connect_cluster: str, connector: str) -> str:
    """The re-keying key: everything about one connector is handled by one worker."""
    return f"{connect_cluster}/{connector}"


_CAUSED_BY = re.compile(r"^Caused by: ([\w.$]+)(?::[ \t]*(.*))?$", re.MULTILINE)
_FIRST = re.compile(r"^([\w.$]+)(?::[ \t]*(.*))?$")


def error_from_trace(trace: str | None) -> ErrorInfo | None:
    """Exception and root cause from a Java stack trace, reading only its bounded head."""
    if not trace:
        return None
    head = trace[:TRACE_HEAD_CHARS]
    first = _FIRST.match(head.splitlines()[0].strip()) if head.strip() else None
    causes = _CAUSED_BY.findall(head)
    root_class, root_message = causes[-1] if causes else (None, None)
    return ErrorInfo(
        exception_class=first.group(1) if first else None,
        message=(first.group(2) or None) if first else None,
        root_cause_class=root_class or (first.group(1) if first else None),
        root_cause_message=(root_message or None)
        if causes
        else ((first.group(2) or None) if first else None),
        trace_head=head,
    )
