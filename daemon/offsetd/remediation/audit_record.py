"""The audit record of a remediation's outcome: its shape, in one place.

`kind: remediation`, keyed by decision and outcome: what `offsetd history` joins to its
decision, and what the executor writes once a decision ends (whatever its end).
"""

from __future__ import annotations

from typing import Any

from offsetd.engine import Decision

__all__ = ["outcome_record"]


def outcome_record(
    decision: Decision,
    outcome: str,
    message: str,
    at_ms: int,
    extra: dict[str, Any],
    located: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The audit record of a decision's outcome. `located`: the record a skip saga located
    (failed and aborted skips name it too), over the decision's own."""
    record = {
        "id": f"{decision.id}:{outcome}",
        "kind": "remediation",
        "decision_id": decision.id,
        "rule": decision.rule,
        "mode": decision.mode,
        "connect_cluster": decision.connect_cluster,
        "connector": decision.connector,
        "actions": [a.model_dump(mode="json") for a in decision.actions],
        "record": decision.record.model_dump() if decision.record else None,
        "outcome": outcome,
        "message": message,
        "decided_at_ms": at_ms,
        **extra,
    }
    if located is not None:
        record["record"] = located
    return record
