"""Suppressed decisions, counted instead of listed: one tally per rule, reason, incident and window.

Most decisions are suppressed (86 % on the bench's mix): a count-1 rule fires on every failure
of a connector in a DLQ storm, and its cooldown or budget suppresses all but the first. Written
one by one they buried the one action in the audit (`offsetd history` showed eight rows for one
poison record) and cost an audit record and an executor task each. `fold_suppressed` keeps the
planned decisions as they are and folds each suppressed one into a `Tally` in the connector's
state: its count, its first and last event, the reason and the incident — the planned decision
it is suppressed because of: the same rule's latest on the connector (its cooldown or budget),
or for `inhibited` the inhibiting rule's (a restart held back while a skip runs).

A tally is written to the audit as one record (`tally_record`) under an id made of its first
suppressed decision's id, so each frame's write replaces the previous version of the same tally
in the compacted topic: the audit holds one record per tally, with the count so far. A tally
that ends (its window closed, a new incident) is never continued: the next one starts under a
new id, so no record is ever replaced by another tally's smaller count. The tally lives in the
durable state, so a frame decided again after a crash (the state was not written) recounts from
the same count to the same record.

Windows are tumbling in event time (`window_ms`) and never go back: a late event whose window
has closed is counted in the current one. A new planned decision of the rule starts a new tally
(a new incident).
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from offsetd.engine.decision import Decision, Firing
from offsetd.engine.state import ConnectorState, Tally, TallyMark
from offsetd.outcomes import PLANNED, SUPPRESSED_KIND, suppressed_outcome

__all__ = ["DEFAULT_WINDOW_MS", "Tally", "TallyMark", "fold_suppressed", "tally_record"]

DEFAULT_WINDOW_MS = 600_000  # ten minutes


def fold_suppressed(
    state: ConnectorState, decisions: Iterable[Firing], window_ms: int = DEFAULT_WINDOW_MS
) -> tuple[list[Decision], list[Tally]]:
    """Split `decisions` (in order) into the planned ones, returned as they are, and the
    suppressed ones, counted into the state's tallies; also returns the tallies they changed
    (to be written to the audit), in the order they were first changed."""
    planned: list[Decision] = []
    changed: dict[str, Tally] = {}
    lasts: dict[str, Firing] = {}  # a tally's last firing of these: marked once, at the end
    for decision in decisions:
        if decision.outcome == PLANNED:
            assert isinstance(decision, Decision)  # only suppressed firings are light
            state.incidents[decision.rule] = decision.id
            planned.append(decision)
            continue
        reason = decision.reason or "disabled"
        slot = f"{decision.rule}\x1f{reason}"
        incident = _incident(state, decision, reason)
        start = decision.event_time_ms - decision.event_time_ms % window_ms
        tally = state.suppressed.get(slot)
        if tally is not None and tally["incident"] == incident:
            start = max(start, tally["window_start_ms"])  # never back to a closed window
        if tally is None or tally["incident"] != incident or tally["window_start_ms"] != start:
            mark = _mark(decision)
            tally = state.suppressed[slot] = {
                "id": _tally_id(decision.id),
                "rule": decision.rule,
                "mode": decision.mode,
                "reason": reason,
                "incident": incident,
                "window_start_ms": start,
                "count": 0,
                "actions": list(decision.action_types),
                "detail": decision.detail,
                "first": mark,
                "last": mark,
            }
        tally["count"] += 1
        tally["detail"] = decision.detail
        changed[tally["id"]] = tally
        lasts[tally["id"]] = decision
    for tally_id, last in lasts.items():
        changed[tally_id]["last"] = _mark(last)
    return planned, list(changed.values())


def tally_record(state: ConnectorState, tally: Tally, window_ms: int) -> dict[str, Any]:
    """The audit record of a tally (kind `suppressed`), as of its last suppressed decision."""
    return {
        "id": tally["id"],
        "kind": SUPPRESSED_KIND,
        "rule": tally["rule"],
        "mode": tally["mode"],
        "connect_cluster": state.connect_cluster,
        "connector": state.connector,
        "outcome": suppressed_outcome(tally["reason"]),
        "reason": tally["reason"],
        "detail": tally["detail"],
        "count": tally["count"],
        "incident": tally["incident"],
        "window_start_ms": tally["window_start_ms"],
        "window_ms": window_ms,
        "actions": [{"type": t} for t in tally["actions"]],
        "first": dict(tally["first"]),
        "last": dict(tally["last"]),
        "event_time_ms": tally["last"]["event_time_ms"],
        "decided_at_ms": tally["last"]["decided_at_ms"],
    }


def _incident(state: ConnectorState, decision: Firing, reason: str) -> str | None:
    """The planned decision a suppression belongs to: the inhibiting rule's latest for
    `inhibited` (the skip a restart waits for; named on the decision when it was made, as
    the inhibition may end before the fold), else the rule's own latest (its cooldown, its
    budget). Decisions are folded in order, so "latest" is as of this decision."""
    if reason == "inhibited" and decision.inhibited_by in state.incidents:
        return state.incidents[str(decision.inhibited_by)]
    return state.incidents.get(decision.rule)


def _mark(decision: Firing) -> TallyMark:
    """The decision's trigger: the counted event at the decision's event time (the newest)."""
    source = decision.trigger_source
    return {
        "decision_id": decision.id,
        "event_time_ms": decision.event_time_ms,
        "decided_at_ms": decision.decided_at_ms,
        "topic": source.topic,
        "partition": source.partition,
        "offset": source.offset,
        "record": decision.record_text,
    }


def _tally_id(first_decision_id: str) -> str:
    """A tally is named by its first suppressed decision (itself named by the rule, the
    connector, the count key and the trigger's coordinates): the same on a replay of the same
    records, and never the name of an earlier tally, so no record is ever replaced by another
    tally's count."""
    return hashlib.sha256(f"{SUPPRESSED_KIND}\x1f{first_decision_id}".encode()).hexdigest()[:32]
