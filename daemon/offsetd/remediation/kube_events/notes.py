"""What a remediation's outcome tells Kubernetes: the Event's reason, type, action and note.

Pure (no I/O): the executor's `finish` hands every audited outcome here, so an Event says what
the audit says. The reasons are a small stable set (docs/kubernetes.md lists them), so alerts
and `kubectl get events --field-selector reason=...` keep working across versions:

- an executed action: its `reported` reason in the action catalogue (`RecordSkipped`,
  `ConnectorStopped`, `ConnectorPaused`, `ConnectorResumed`, `OffsetsAltered` (rewind),
  `TasksRestarted`, `TasksScaled`, `PersonNotified`; Normal);
- `RemediationObserved` (observe mode's dry run) and `RemediationNotNeeded` (Normal);
- `RemediationHeld` (a guard holds it: paused, breaker, blast radius, budget, approval...),
  `RemediationRefused` (refused: Strimzi without access, class not allowed, a person said no),
  `RemediationFailed` (failed, aborted, record not located) — Warning;
- a held or refused decision whose rule notifies also gets `PersonNotified`, as the executor
  tells people then too.

The note names the record (topic, partition, offset) and the decision id, which
`offsetd history --incident <id>` tells the story of. It never carries an action's parameters
(a notify's webhook URL is a secret) and a failure's text is scrubbed of URL user info and
`password=`-style values before it goes in.

The aggregation `key`: the same reason for the same cause — rule and outcome (and, for a
hold, the guard; for an executed action, its type) — on the same connector. Records are not
part of it: a DLQ storm held by one guard is one Event with a growing count, not one per record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from offsetd.engine import Decision
from offsetd.rules.actions import ACTIONS, Notify, reported_of

__all__ = [
    "FAILED",
    "HELD",
    "NOTE_LIMIT",
    "NOTIFIED",
    "NOT_NEEDED",
    "OBSERVED",
    "REASONS",
    "REFUSED",
    "EventNote",
    "notes_for",
    "scrub",
]

EventType = Literal["Normal", "Warning"]

EXECUTED = "RemediationExecuted"  # an action type the catalogue does not know (none today)
OBSERVED = "RemediationObserved"
NOT_NEEDED = "RemediationNotNeeded"
HELD = "RemediationHeld"
REFUSED = "RemediationRefused"
FAILED = "RemediationFailed"

#: An executed action's reason is the catalogue's (`Reported`); the notify action's is also
#: what a held decision whose rule notifies adds.
NOTIFIED = Notify.reported.reason

#: Every reason offsetd writes, with its type.
REASONS: dict[str, EventType] = {
    **{model.reported.reason: "Normal" for model in ACTIONS.values()},
    NOTIFIED: "Normal",
    EXECUTED: "Normal",
    OBSERVED: "Normal",
    NOT_NEEDED: "Normal",
    HELD: "Warning",
    REFUSED: "Warning",
    FAILED: "Warning",
}

_REFUSALS = frozenset({"refused_strimzi", "refused_not_allowed", "rejected"})
_HOLDS = frozenset({"awaiting_approval", "breaker_open"})
_NOT_OURS = "suppressed_out_of_scope"  # another deployment owns it: its Events, not ours
#: The API server refuses a note over 1 kB (events.k8s.io/v1 validation, counted in bytes).
NOTE_LIMIT = 1024

_USERINFO = re.compile(r"(\w+://)[^/\s@]+@")
_SECRET_VALUE = re.compile(
    r"((?:password|passwd|secret|token|api[_-]?key|authorization)[\"']?\s*[=:]\s*[\"']?)"
    r"[^\s,;&\"']+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class EventNote:
    """One Event to report about one connector (the resource is found by the publisher)."""

    connect_cluster: str
    connector: str
    reason: str
    type: EventType
    action: str  # machine-readable: the action type(s) taken or held
    note: str
    cause: str  # rule and outcome (and guard or action): same cause, same Event
    decision_id: str
    record: str | None  # "topic/partition@offset", when the decision concerns one

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What aggregates: the same reason and action for the same cause on one connector."""
        return (self.connect_cluster, self.connector, self.reason, self.action, self.cause)


def notes_for(
    decision: Decision,
    outcome: str,
    message: str,
    extra: dict[str, Any],
    located: dict[str, Any] | None = None,
) -> list[EventNote]:
    """The Events an audited outcome makes (none for a connector another deployment owns)."""
    if outcome == _NOT_OURS:
        return []
    record = _record_text(located if located is not None else _decision_record(decision))
    actions = "+".join(decision.action_types) or "none"

    def note(reason: str, action: str, cause: str, text: str) -> EventNote:
        subject = f" — record {record}" if record else ""
        said = f": {scrub(message)}" if message else ""
        full = (
            f"{text}{subject}{said} (decision {decision.id}, rule {decision.rule}; "
            f"offsetd history --incident {decision.id})"
        )
        return EventNote(
            decision.connect_cluster,
            decision.connector,
            reason,
            REASONS[reason],
            action[:128],
            _fit(full, decision.id),
            cause,
            decision.id,
            record,
        )

    base = f"{decision.rule}:{outcome}"
    if outcome == "executed":
        seen: list[EventNote] = []
        for kind in decision.action_types:
            reported = reported_of(kind)
            reason = reported.reason if reported is not None else EXECUTED
            if any(n.reason == reason for n in seen):
                continue  # the same action twice: one Event
            said = reported.done if reported is not None else f"ran {kind}"
            seen.append(note(reason, kind, f"{base}:{kind}", said))
        return seen
    if outcome == "dry_run":
        return [note(OBSERVED, actions, base, f"observe mode: would {actions}")]
    if outcome == "not_needed":
        return [note(NOT_NEEDED, actions, base, f"{actions} not needed")]
    guard = str(extra.get("guard") or "")
    if outcome in _REFUSALS:
        found = [note(REFUSED, actions, f"{base}:{guard}", f"{actions} refused ({outcome})")]
    elif outcome in _HOLDS or outcome.startswith("suppressed_"):
        found = [note(HELD, actions, f"{base}:{guard}", f"{actions} held ({outcome})")]
    else:
        return [note(FAILED, actions, base, f"{actions} {outcome}")]
    # The executor tells people of a held decision whose rule notifies (`_notify_only`).
    if decision.outcome != "suppressed" and decision.effects.tells_people:
        found.append(note(NOTIFIED, "notify", f"{base}:notify", f"told people: {outcome}"))
    return found


def scrub(text: str) -> str:
    """The text without URL user info or `password=`-style values: an Event is readable by
    anyone who may list Events in the namespace."""
    return _SECRET_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def _decision_record(decision: Decision) -> dict[str, Any] | None:
    return decision.record.model_dump() if decision.record is not None else None


def _record_text(record: dict[str, Any] | None) -> str | None:
    if not record or "topic" not in record:
        return None
    return f"{record['topic']}/{record.get('partition')}@{record.get('offset')}"


def _fit(text: str, decision_id: str) -> str:
    """At most `NOTE_LIMIT` bytes; a cut keeps the decision id at the end."""
    if len(text.encode()) <= NOTE_LIMIT:
        return text
    tail = f"… (decision {decision_id})"
    room = NOTE_LIMIT - len(tail.encode())
    return text.encode()[:room].decode(errors="ignore") + tail
