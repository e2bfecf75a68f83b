"""Input entries of a test file -> the real events the engine reads, with their arrival times.

Source records are numbered per topic-partition so idempotency never swallows two inputs;
an entry that is not a valid event is reported at its own place in the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import ErrorDetails

from offsetd.events.models import (
    ErrorInfo,
    Event,
    EventKind,
    error_from_trace,
)
from offsetd.rules.matching import AnyEvent
from offsetd.ruletest.spec import DEFAULT_TOPICS, TestEvent, TestSource
from offsetd.yamlerrors import (
    format_errors,
)

__all__ = ["TestInput", "build_events", "event_errors"]


# Fields passed through to the event model when given (it rejects those a kind lacks).
_BODY_FIELDS = (
    "task_id",
    "state",
    "worker_id",
    "generation",
    "error",
    "record",
    "headers",
    "topic",
    "discovered_ms",
    "deleted",
    "partition",
    "offset",
    "progress",
    "records_waiting",
    "flow_status",
    "detail",
)

_EVENT = TypeAdapter[AnyEvent](Event)
_EVENT_TAGS = frozenset(str(kind) for kind in EventKind)


@dataclass(frozen=True)
class TestInput:
    """One input event and when it arrives (`now_ms`)."""

    __test__ = False
    event: AnyEvent
    now_ms: int


def build_events(spec: TestEvent, counters: dict[tuple[str, int], int]) -> Iterator[TestInput]:
    """The events of one input entry; `counters` numbers source offsets per topic-partition.

    Raises `ValidationError` (locations relative to the entry) if the body is not an event.
    """
    body: dict[str, Any] = {
        name: getattr(spec, name) for name in _BODY_FIELDS if name in spec.model_fields_set
    }
    if "record" in body and body["record"] is not None:
        body["record"] = body["record"].model_dump()
    if spec.trace is not None or spec.stage is not None:
        if "error" in body:
            raise ValueError("give either error or trace/stage, not both")
        error = error_from_trace(spec.trace) or ErrorInfo()
        body["error"] = error.model_copy(update={"stage": spec.stage}).model_dump()
    elif spec.kind is EventKind.DLQ_RECORD and "error" not in body:
        body["error"] = {}
    if spec.kind is EventKind.PROGRESS:
        body["grace_ms"] = spec.grace or 0
    src = spec.source or TestSource()
    topic = src.topic or DEFAULT_TOPICS[spec.kind]
    for index in range(spec.repeat):
        time_ms = spec.at + index * spec.every
        counter_key = (topic, src.partition)
        offset = counters.get(counter_key, 0) if src.offset is None else src.offset + index
        counters[counter_key] = max(counters.get(counter_key, 0), offset + 1)
        if spec.kind is EventKind.PROGRESS:
            body["since_ms"] = time_ms
        event = _EVENT.validate_python(
            {
                **body,
                "kind": spec.kind,
                "connect_cluster": spec.connect_cluster,
                "connector": spec.connector,
                "source": {
                    "topic": topic,
                    "partition": src.partition,
                    "offset": offset,
                    "timestamp_ms": time_ms,
                },
            }
        )
        now = time_ms if spec.now is None else spec.now + index * spec.every
        yield TestInput(event, now)


def event_errors(
    errors: list[ErrorDetails], path: Path, node: Any, prefix: tuple[str | int, ...] = ()
) -> list[str]:
    """`file:line: field: message` for errors of `build_events` (the event model's)."""
    out: list[ErrorDetails] = []
    for error in errors:
        loc = tuple(p for p in error["loc"] if p not in _EVENT_TAGS)
        if loc[:1] == ("source",):
            # the generated `source` is not in the file: point at the entry itself
            error = {**error, "loc": ()}  # noqa: PLW2901
        out.append(error)
    return format_errors(out, path, node, prefix, _EVENT_TAGS)
