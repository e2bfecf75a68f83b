"""The events.k8s.io/v1 Event offsetd writes, and the patch that counts a repeat (pure).

Why events.k8s.io/v1 and its `series` rather than core/v1's `count`/`lastTimestamp`: it is the
API Kubernetes' own controllers write today (client-go's `tools/events`), the server validates
what matters (`reportingController` a qualified name, `reportingInstance`, `action`, `eventTime`
a MicroTime), and the note of an Event in a series is immutable, so an Event cannot be rewritten
to say something its first occurrence did not; the latest decision id and record are kept in
annotations instead. Both APIs show the same objects: `kubectl describe` reads them as core/v1
Events (`regarding` is `involvedObject`) and shows a series as "(x3 over 2m)".

A repeat of the same cause (`notes.EventNote.key`) patches the Event's `series` — count and
`lastObservedTime` — as client-go does; the first occurrence has no series (the API requires a
series to count at least 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from offsetd.remediation.kube_events.notes import EventNote

__all__ = [
    "LAST_DECISION",
    "LAST_RECORD",
    "REPORTING_CONTROLLER",
    "Regarding",
    "event_body",
    "event_name",
    "micro_time",
    "series_patch",
]

#: Who reports (a qualified name, as the API requires): shown as the Event's source.
REPORTING_CONTROLLER = "offsetd.io/remediation"
LAST_DECISION = "offsetd.io/last-decision"
LAST_RECORD = "offsetd.io/last-record"
_DECISION = "offsetd.io/decision"
_CONNECTOR = "offsetd.io/connector"
_INSTANCE_LIMIT = 128


@dataclass(frozen=True)
class Regarding:
    """The resource an Event is about: a KafkaConnector, or the KafkaMirrorMaker2 holding an
    MM2 connector (`field_path` then points at the connector's spec in it)."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str
    field_path: str | None = None

    def reference(self) -> dict[str, str]:
        ref = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,  # `kubectl describe` selects Events by it
        }
        if self.field_path:
            ref["fieldPath"] = self.field_path
        return ref


def micro_time(at: datetime) -> str:
    """A MicroTime as the API server parses it: RFC 3339 with exactly six fraction digits."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(regarding: Regarding, note: EventNote, first: datetime) -> str:
    """`<resource>.<hash>`, like client-go's `<name>.<hex>`: unique per series, a DNS subdomain."""
    seed = "|".join((regarding.uid, *note.key, micro_time(first)))
    return f"{regarding.name[:200]}.{hashlib.sha256(seed.encode()).hexdigest()[:16]}"


def event_body(
    note: EventNote,
    regarding: Regarding,
    *,
    name: str,
    instance: str,
    first: datetime,
    count: int = 1,
    last: datetime | None = None,
) -> dict[str, Any]:
    """A new Event for `note` (with its series when created for a repeat: `count` >= 2)."""
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": regarding.namespace,
            "labels": {"app.kubernetes.io/managed-by": "offsetd"},
            "annotations": {
                _DECISION: note.decision_id,
                _CONNECTOR: note.connector,
                **_last(note),
            },
        },
        "eventTime": micro_time(first),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:_INSTANCE_LIMIT],
        "action": note.action,
        "reason": note.reason,
        "type": note.type,
        "note": note.note,
        "regarding": regarding.reference(),
    }
    if count >= 2:
        body["series"] = _series(count, last or first)
    return body


def series_patch(count: int, last: datetime, note: EventNote) -> dict[str, Any]:
    """The merge patch of a repeat: the series (count >= 2) and the latest decision's id."""
    return {"series": _series(count, last), "metadata": {"annotations": _last(note)}}


def _series(count: int, last: datetime) -> dict[str, Any]:
    return {"count": count, "lastObservedTime": micro_time(last)}


def _last(note: EventNote) -> dict[str, str]:
    found = {LAST_DECISION: note.decision_id}
    if note.record:
        found[LAST_RECORD] = note.record
    return found
