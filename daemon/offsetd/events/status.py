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
    digits,
    excerpt,
    json_type,
    json_value,
    malformed,
    source_of,
    trace_fields,
    utf8,
)
from offsetd.events.models import (
    TRACE_HEAD_CHARS,
    ConnectorStatusEvent,
    ErrorInfo,
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
    """
    if raw.key is None:
        raise malformed(raw, "status record has no key")
    key = utf8(raw, raw.key, "status key")
    if key.startswith(_CONNECTOR):
        connector = key[len(_CONNECTOR) :]
        if not connector:
            raise malformed(raw, "connector status key has an empty connector name")
        data = _status_fields(raw)
        data["connect_cluster"], data["connector"] = connect_cluster, connector
        return build(raw, ConnectorStatusEvent, data)
    if key.startswith(_TASK):
        connector, sep, task = key[len(_TASK) :].rpartition("-")
        if not (sep and connector):
            raise malformed(raw, f"task status key is not status-task-<name>-<id>: {excerpt(key)}")
        task_id = digits(raw, task, "task id in the status key", INT32_MAX)
        data = _status_fields(raw)
        data["connect_cluster"], data["connector"], data["task_id"] = (
            connect_cluster,
            connector,
            task_id,
        )
        return build(raw, TaskStatusEvent, data)
    if key.startswith(_TOPIC):
        return _topic_status(connect_cluster, raw, key)
    raise malformed(raw, f"unknown status key prefix: {excerpt(key)}")


# value bytes -> its checked fields (without `source`). A worker writes the same short value for
# every task it runs (`{"state":"RUNNING","trace":null,"worker_id":...,"generation":...}`), so
# most status values were seen before: their JSON need not be parsed and checked again. Only
# short values (no trace) are remembered; the memo is bounded.
_FIELDS_MEMO: dict[bytes, dict[str, object]] = {}
_MEMO_VALUE_BYTES = 512
_MEMO_ENTRIES = 4096


def _status_fields(raw: RawRecord) -> dict[str, object]:
    """source, state, worker_id, generation and error of a connector or task status."""
    data = raw.value
    if data is None:
        return {"source": source_of(raw), "state": None}
    short = len(data) <= _MEMO_VALUE_BYTES
    if short:
        known = _FIELDS_MEMO.get(data)
        if known is not None:
            return {"source": source_of(raw), **known}
    fields = _checked_fields(raw, data)
    if short:
        if len(_FIELDS_MEMO) >= _MEMO_ENTRIES:
            _FIELDS_MEMO.clear()
        _FIELDS_MEMO[data] = fields
    return {"source": source_of(raw), **fields}


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
