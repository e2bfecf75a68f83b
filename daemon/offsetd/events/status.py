"""connect-status records -> ConnectorStatusEvent, TaskStatusEvent, TopicStatusEvent.

Keys and values as `KafkaStatusBackingStore` writes them (reference/connect-offsets.md §2.2):
`status-connector-<name>` and `status-task-<name>-<id>` carry
`{"state","trace","worker_id","generation"}` (Connect 4.x adds `"version"`; unknown fields are
ignored), `status-topic-<topic>:connector-<name>` carries
`{"topic":{"name","connector","task","discoverTimestamp"}}`; a null value is a tombstone.
"""

from __future__ import annotations

from offsetd.events.decode import (
    INT32_MAX,
    RawRecord,
    build,
    constructor,
    digits,
    excerpt,
    json_type,
    json_value,
    malformed,
    source_of,
    source_record,
    trace_fields,
    utf8,
)
from offsetd.events.models import (
    TRACE_HEAD_CHARS,
    ConnectorStatusEvent,
    ErrorInfo,
    EventKind,
    TaskStatusEvent,
    TopicStatusEvent,
)

__all__ = ["STATUS_STATES", "decode_status"]

_CONNECTOR = "status-connector-"
_TASK = "status-task-"
_TOPIC = "status-topic-"
_TOPIC_SEP = ":connector-"

STATUS_STATES = frozenset(
    {"UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED", "DESTROYED"}
)
"""The states Connect's reader accepts (`AbstractStatus.State.valueOf`); others are Malformed."""


def decode_status(
    connect_cluster: str, raw: RawRecord
) -> ConnectorStatusEvent | TaskStatusEvent | TopicStatusEvent:
    """A connect-status record as an event; FAILED statuses carry `error` from their trace.

    The task id is what follows the last `-` of `status-task-<name>-<id>` (names may contain
    `-`); a topic key splits at its first `:connector-` (topic names cannot contain `:`).
    The event is made of the checked fields without validating them again (`constructor`).
    """
    key = raw.key
    head = _HEADS.get(key) if type(key) is bytes else None
    if head is None:
        found = _key_head(raw)
        if isinstance(found, str):
            return _topic_status(connect_cluster, raw, found)
        head = found
    fields = _status_fields(raw)
    source = source_record(raw)
    if source is None or type(connect_cluster) is not str:
        return _validated_status(connect_cluster, raw)  # pydantic's coercions, as before
    connector, task_id = head
    tombstone = fields is _TOMBSTONE
    if tombstone:
        fields = _TOMBSTONE_VALUES
    if task_id is None:
        return _make_connector(
            {
                "connect_cluster": connect_cluster,
                "connector": connector,
                "source": source,
                "kind": _CONNECTOR_KIND,
                **fields,
            },
            set(_CONNECTOR_TOMBSTONE_GIVEN if tombstone else _CONNECTOR_GIVEN),
        )
    return _make_task(
        {
            "connect_cluster": connect_cluster,
            "connector": connector,
            "source": source,
            "kind": _TASK_KIND,
            "task_id": task_id,
            **fields,
        },
        set(_TASK_TOMBSTONE_GIVEN if tombstone else _TASK_GIVEN),
    )


def _validated_status(
    connect_cluster: str, raw: RawRecord
) -> ConnectorStatusEvent | TaskStatusEvent | TopicStatusEvent:
    """`decode_status` with pydantic validating the event (`build`): what it made before
    `constructor`, and still makes when a coordinate or the cluster is not exactly a str or an
    int. The tests hold `decode_status` to it."""
    found = _key_head(raw)
    if isinstance(found, str):
        return _topic_status(connect_cluster, raw, found)
    connector, task_id = found
    data: dict[str, object] = {"source": source_of(raw), **_status_fields(raw)}
    data["connect_cluster"], data["connector"] = connect_cluster, connector
    if task_id is None:
        return build(raw, ConnectorStatusEvent, data)
    data["task_id"] = task_id
    return build(raw, TaskStatusEvent, data)


_make_connector = constructor(ConnectorStatusEvent)
_CONNECTOR_KIND = EventKind.CONNECTOR_STATUS
_make_task = constructor(TaskStatusEvent)
_TASK_KIND = EventKind.TASK_STATUS
# The names a validated status event was given (its `model_fields_set`): a tombstone gives
# only its state of the value's fields.
_CONNECTOR_TOMBSTONE_GIVEN = frozenset({"connect_cluster", "connector", "source", "state"})
_CONNECTOR_GIVEN = _CONNECTOR_TOMBSTONE_GIVEN | {"worker_id", "generation", "error"}
_TASK_TOMBSTONE_GIVEN = _CONNECTOR_TOMBSTONE_GIVEN | {"task_id"}
_TASK_GIVEN = _CONNECTOR_GIVEN | {"task_id"}

# status key bytes -> (connector, task id; None for a connector's key). A key names the same
# connector and task in every record (1,846 distinct keys in the bench's 90,750 statuses):
# it is split and checked once. Only keys that decoded; bounded like `_FIELDS_MEMO`.
_HEADS: dict[bytes, tuple[str, int | None]] = {}
_MEMO_KEY_BYTES = 512


def _key_head(raw: RawRecord) -> tuple[str, int | None] | str:
    """The connector and task id a connector or task status key names (remembered), or the
    key's text when it is a topic status key; `Malformed` when it is neither."""
    if raw.key is None:
        raise malformed(raw, "status record has no key")
    key = utf8(raw, raw.key, "status key")
    head: tuple[str, int | None]
    if key.startswith(_CONNECTOR):
        connector = key[len(_CONNECTOR) :]
        if not connector:
            raise malformed(raw, "connector status key has an empty connector name")
        head = (connector, None)
    elif key.startswith(_TASK):
        connector, sep, task = key[len(_TASK) :].rpartition("-")
        if not (sep and connector):
            raise malformed(raw, f"task status key is not status-task-<name>-<id>: {excerpt(key)}")
        head = (connector, digits(raw, task, "task id in the status key", INT32_MAX))
    elif key.startswith(_TOPIC):
        return key
    else:
        raise malformed(raw, f"unknown status key prefix: {excerpt(key)}")
    if type(raw.key) is bytes and len(raw.key) <= _MEMO_KEY_BYTES:
        if len(_HEADS) >= _MEMO_ENTRIES:
            _HEADS.clear()
        _HEADS[raw.key] = head
    return head


# value bytes -> its checked fields (without `source`). A worker writes the same short value for
# every task it runs (`{"state":"RUNNING","trace":null,"worker_id":...,"generation":...}`), so
# most status values were seen before: their JSON need not be parsed and checked again. Only
# short values (no trace) are remembered; the memo is bounded.
_FIELDS_MEMO: dict[bytes, dict[str, object]] = {}
_MEMO_VALUE_BYTES = 512
_MEMO_ENTRIES = 4096
_TOMBSTONE: dict[str, object] = {"state": None}  # the fields a tombstone gives
_TOMBSTONE_VALUES: dict[str, object] = {  # and its event's, with their defaults
    "state": None,
    "worker_id": None,
    "generation": None,
    "error": None,
}


def _status_fields(raw: RawRecord) -> dict[str, object]:
    """state, worker_id, generation and error of a connector or task status (`_TOMBSTONE`
    for a tombstone), in the events' field order. Shared with the memo: never changed."""
    data = raw.value
    if data is None:
        return _TOMBSTONE
    short = len(data) <= _MEMO_VALUE_BYTES
    if short:
        known = _FIELDS_MEMO.get(data)
        if known is not None:
            return known
    fields = _checked_fields(raw, data)
    if short:
        if len(_FIELDS_MEMO) >= _MEMO_ENTRIES:
            _FIELDS_MEMO.clear()
        _FIELDS_MEMO[data] = fields
    return fields


def _checked_fields(raw: RawRecord, data: bytes) -> dict[str, object]:
    value = json_value(raw, data, "status value")
    if not isinstance(value, dict):
        raise malformed(raw, f"status value is {json_type(value)}, not an object")
    state = value.get("state")
    if not isinstance(state, str) or state not in STATUS_STATES:
        raise malformed(raw, f"status field 'state' is not a known state: {excerpt(repr(state))}")
    generation = value.get("generation")
    if type(generation) is not int:
        kind = json_type(generation) if "generation" in value else "missing"
        raise malformed(raw, f"status field 'generation' is {kind}, not an integer")
    trace = _optional_text(raw, value, "trace")
    return {
        "state": state,
        "worker_id": _optional_text(raw, value, "worker_id"),
        "generation": generation,
        "error": _error_of(trace) if trace and state == "FAILED" else None,
    }


# trace head -> its ErrorInfo. A failing task writes the same trace again and again (402
# distinct traces in the bench's 26,480 FAILED statuses): one frozen instance serves them all
# (pydantic takes a model instance as it is), its fields are found once, and the matcher can
# remember its answers per instance (`RuleSet.live`). Bounded; keyed by the head, all that
# `trace_fields` reads.
_ERRORS: dict[str, ErrorInfo] = {}
_MAX_ERRORS = 1024


def _error_of(trace: str) -> ErrorInfo:
    head = trace[:TRACE_HEAD_CHARS]
    found = _ERRORS.get(head)
    if found is None:
        found = ErrorInfo.model_validate(trace_fields(head))
        if len(_ERRORS) >= _MAX_ERRORS:
            _ERRORS.clear()
        _ERRORS[head] = found
    return found


def _optional_text(raw: RawRecord, value: dict[str, object], field: str) -> str | None:
    item = value.get(field)
    if item is None or isinstance(item, str):
        return item
    raise malformed(raw, f"status field {field!r} is {json_type(item)}, not a string")


def _topic_status(connect_cluster: str, raw: RawRecord, key: str) -> TopicStatusEvent:
    topic, sep, connector = key[len(_TOPIC) :].partition(_TOPIC_SEP)
    if not (sep and topic and connector):
        shape = "status-topic-<topic>:connector-<name>"
        raise malformed(raw, f"topic status key is not {shape}: {excerpt(key)}")
    data: dict[str, object] = {
        "connect_cluster": connect_cluster,
        "connector": connector,
        "source": source_of(raw),
        "topic": topic,
    }
    if raw.value is None:
        data["deleted"] = True
        return build(raw, TopicStatusEvent, data)
    value = json_value(raw, raw.value, "topic status value")
    inner = value.get("topic") if isinstance(value, dict) else None
    if not isinstance(inner, dict):
        raise malformed(raw, 'topic status value is not an object {"topic": {...}}')
    task, discovered = inner.get("task"), inner.get("discoverTimestamp")
    if type(task) is not int or type(discovered) is not int or task < 0:
        raise malformed(raw, "topic status 'task' and 'discoverTimestamp' are not integers")
    data["task_id"], data["discovered_ms"] = task, discovered
    return build(raw, TopicStatusEvent, data)
