"""Dead letter queue records -> DlqRecordEvent.

A sink's DLQ record is the original record (key, value, headers, timestamp) plus, when
`errors.deadletterqueue.context.headers.enable=true`, the `__connect.errors.*` headers that
`DeadLetterQueueReporter.populateContextHeaders` adds as UTF-8 text (reference/connect-offsets.md
§3.2). Only those headers are read: the record's own headers and payload may be anything.
"""

from __future__ import annotations

from offsetd.events.decode import (
    INT32_MAX,
    INT64_MAX,
    RawRecord,
    build,
    constructor,
    digits,
    first_line,
    last_cause,
    malformed,
    number,
    source_of,
    source_record,
    utf8,
)
from offsetd.events.models import (
    TRACE_HEAD_CHARS,
    DlqRecordEvent,
    ErrorInfo,
    EventKind,
    RecordRef,
)

__all__ = ["DLQ_HEADER_PREFIX", "decode_dlq"]

DLQ_HEADER_PREFIX = "__connect.errors."
H_TOPIC = DLQ_HEADER_PREFIX + "topic"
H_PARTITION = DLQ_HEADER_PREFIX + "partition"
H_OFFSET = DLQ_HEADER_PREFIX + "offset"
H_CONNECTOR = DLQ_HEADER_PREFIX + "connector.name"
H_TASK = DLQ_HEADER_PREFIX + "task.id"
H_STAGE = DLQ_HEADER_PREFIX + "stage"
H_CLASS = DLQ_HEADER_PREFIX + "class.name"
H_EXCEPTION = DLQ_HEADER_PREFIX + "exception.class.name"
H_MESSAGE = DLQ_HEADER_PREFIX + "exception.message"
H_STACKTRACE = DLQ_HEADER_PREFIX + "exception.stacktrace"
# The errors of recent DLQ records, by their headers: a storm repeats one error on every record,
# and reading its trace (first line, causes) cost more than the rest of the record. One instance
# per error also lets the matcher remember its answers (`RuleSet.live`). Bounded (the keys hold
# trace heads of up to 4 KiB: ~4 MiB at most).
_ERRORS: dict[tuple[str | None, ...], ErrorInfo] = {}
_MAX_ERRORS = 1024


def decode_dlq(
    connect_cluster: str, raw: RawRecord, *, connector: str | None = None
) -> DlqRecordEvent:
    """A record a sink task sent to its dead letter queue, with its error context.

    The connector is `__connect.errors.connector.name`. A DLQ without context headers names
    nobody: pass `connector` (the owner of this DLQ topic, known from the connectors' configs) to
    attribute its records; without either the record is Malformed. The header wins when both
    are there (one DLQ topic may serve several connectors). `record` is set only when the topic,
    partition and offset headers are all present and numeric. The event is made of the checked
    fields without validating them again (`constructor`).
    """
    owner, task_id, record, error, headers = _dlq_fields(raw, connector)
    source = source_record(raw)
    if source is None or type(connect_cluster) is not str or type(owner) is not str:
        return _validated_dlq(connect_cluster, raw, connector=connector)  # as before
    return _make_event(
        {
            "connect_cluster": connect_cluster,
            "connector": owner,
            "source": source,
            "kind": _KIND,
            "task_id": task_id,
            "record": None if record is None else _make_ref(record, set(_REF_GIVEN)),
            "error": error,
            "headers": headers,
        },
        set(_GIVEN),
    )


def _validated_dlq(
    connect_cluster: str, raw: RawRecord, *, connector: str | None = None
) -> DlqRecordEvent:
    """`decode_dlq` with pydantic validating the event (`build`): what it made before
    `constructor`, and still makes when a coordinate, the cluster or the connector is not
    exactly a str or an int. The tests hold `decode_dlq` to it."""
    owner, task_id, record, error, headers = _dlq_fields(raw, connector)
    data: dict[str, object] = {
        "connect_cluster": connect_cluster,
        "connector": owner,
        "source": source_of(raw),
        "task_id": task_id,
        "record": record,
        "error": error,
        "headers": headers,
    }
    return build(raw, DlqRecordEvent, data)


def _dlq_fields(
    raw: RawRecord, connector: str | None
) -> tuple[str, int | None, dict[str, object] | None, ErrorInfo, dict[str, str | None]]:
    """The checked owner, task id, failing record (fields of a RecordRef), error and context
    headers of a DLQ record's event; `record` and `headers` are new dicts every call."""
    headers = _context_headers(raw)
    owner = headers.get(H_CONNECTOR) or connector
    if not owner:
        raise malformed(raw, f"DLQ record has no {H_CONNECTOR} header: its connector is unknown")
    task = headers.get(H_TASK)
    task_id = None if task is None else digits(raw, task, H_TASK, INT32_MAX)
    return owner, task_id, _record_ref(headers), _error_of(headers), headers


_make_event = constructor(DlqRecordEvent)
_make_ref = constructor(RecordRef)
_KIND = EventKind.DLQ_RECORD
_GIVEN = frozenset(
    {"connect_cluster", "connector", "source", "task_id", "record", "error", "headers"}
)
_REF_GIVEN = frozenset({"topic", "partition", "offset"})


def _context_headers(raw: RawRecord) -> dict[str, str | None]:
    """Every `__connect.errors.*` header as text, under its full name; the last one wins.

    A record replayed from a DLQ still carries its old context headers, and Connect 4.2 appends
    the new ones after them (verified in tests/integration/test_connect_facts.py), so the last
    is the current failure, as with Kafka's `Headers.lastHeader`. Some older reporters refused
    to add a header that was already there: their DLQ records show only the stale context.
    """
    found: dict[str, str | None] = {}
    try:
        for name, value in raw.headers:
            if name.startswith(DLQ_HEADER_PREFIX):
                found[name] = None if value is None else value.decode()
    except UnicodeDecodeError:  # rare: name the header as `utf8` does (no call per header)
        for name, value in raw.headers:
            if name.startswith(DLQ_HEADER_PREFIX) and value is not None:
                utf8(raw, value, f"header {name[:80]}")
        raise
    return found


def _record_ref(headers: dict[str, str | None]) -> dict[str, object] | None:
    """The failing record's coordinates (a RecordRef) when all three are present and numeric."""
    topic = headers.get(H_TOPIC)
    partition = number(headers.get(H_PARTITION), INT32_MAX)
    offset = number(headers.get(H_OFFSET), INT64_MAX)
    if not topic or partition is None or offset is None:
        return None
    return {"topic": topic, "partition": partition, "offset": offset}


def _error_of(headers: dict[str, str | None]) -> ErrorInfo:
    """`_error`, remembered: an ErrorInfo is frozen, so one instance serves every record with
    the same error headers (pydantic takes a model instance as it is)."""
    key = (
        headers.get(H_EXCEPTION),
        headers.get(H_MESSAGE),
        (headers.get(H_STACKTRACE) or "")[:TRACE_HEAD_CHARS],  # all `_error` reads of it
        headers.get(H_STAGE),
        headers.get(H_CLASS),
    )
    found = _ERRORS.get(key)
    if found is None:
        found = ErrorInfo.model_validate(_error(headers))
        if len(_ERRORS) >= _MAX_ERRORS:
            _ERRORS.clear()
        _ERRORS[key] = found
    return found


def _error(headers: dict[str, str | None]) -> dict[str, object]:
    """Exception from the class/message headers (the trace's first line if they are missing),
    root cause from the last `Caused by:` in the stack trace's bounded head."""
    head = (headers.get(H_STACKTRACE) or "")[:TRACE_HEAD_CHARS]
    first_class, first_message = first_line(head) if head else (None, None)
    exception_class = headers.get(H_EXCEPTION) or first_class
    message = headers.get(H_MESSAGE) or first_message
    cause = last_cause(head) if head else None
    return {  # an ErrorInfo
        "exception_class": exception_class,
        "message": message,
        "root_cause_class": cause[0] if cause else exception_class,
        "root_cause_message": cause[1] if cause else message,
        "stage": headers.get(H_STAGE) or None,
        "executing_class": headers.get(H_CLASS) or None,
        "trace_head": head,
    }
