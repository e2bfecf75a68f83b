"""The one vocabulary of outcomes: what became of a decision, in the audit, metrics and history.

The engine decides a firing is `planned` or suppressed for a reason (`disabled`, `inhibited`,
`cooldown`, `budget`); everything after the engine speaks of the suppression as one word,
`suppressed_<reason>`, the same word the guards use for the suppressions they add (`paused`,
`opt_out`, `blast_radius`, ...). So `offsetd history`, the `outcome` label of the metrics and the
audit records all say `suppressed_cooldown`, never "suppressed (cooldown)".
"""

from __future__ import annotations

__all__ = [
    "ENGINE_REASONS",
    "FINAL_OUTCOMES",
    "PLANNED",
    "SUPPRESSED_KIND",
    "is_suppressed",
    "suppressed_outcome",
]

PLANNED = "planned"  # decided to act; the remediation layer gives its final outcome

#: The engine's reasons for suppressing a firing, in the order it checks them.
ENGINE_REASONS = ("disabled", "inhibited", "cooldown", "budget")

#: The audit record kind of an aggregate of suppressed decisions (one per rule, connector,
#: reason, incident and window, with a count), next to decisions and "remediation" outcomes.
SUPPRESSED_KIND = "suppressed"

#: Every outcome a decision can end with once it was handled, with what it means.
FINAL_OUTCOMES: dict[str, str] = {
    "executed": "the actions ran",
    "dry_run": "observe mode: decided and audited, not acted on",
    "awaiting_approval": "approve mode: waits for `offsetd approve`",
    "rejected": "a person rejected it",
    "failed": "an action failed (the connector is never left stopped)",
    "aborted": "the action did not start: nothing was changed",
    "not_located": "the poison record could not be found: nothing skipped",
    "not_needed": "the connector had recovered before the action ran",
    "breaker_open": "the connector's breaker is open after repeated failures",
    "refused_strimzi": "a Strimzi-managed cluster without Kubernetes access",
    "refused_not_allowed": "the connector class may not have its offsets moved",
    "suppressed_disabled": "the rule is disabled",
    "suppressed_inhibited": "another rule's decision for the connector inhibits this rule",
    "suppressed_cooldown": "the rule fired for the connector within its cooldown",
    "suppressed_budget": "the rule's (or the connector's skip) budget is spent",
    "suppressed_paused": "automation is paused (`offsetd pause`)",
    "suppressed_opt_out": "the connector is opted out",
    "suppressed_out_of_scope": "another deployment owns the connector",
    "suppressed_blast_radius": "too many connectors of the Connect cluster are failing",
    "suppressed_skip_pending": "a skip of the connector is planned: no restart meanwhile",
    "suppressed_auto_restart": "Strimzi's auto-restart owns restarts of the connector",
}


def suppressed_outcome(reason: str) -> str:
    """The outcome word of an engine suppression: `cooldown` -> `suppressed_cooldown`."""
    return f"suppressed_{reason}"


def is_suppressed(outcome: str) -> bool:
    return outcome.startswith("suppressed_")
