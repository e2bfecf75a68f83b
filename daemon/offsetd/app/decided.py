"""What a frame decided, written to the audit and handed on: one place for either engine.

The Python engine (`offsetd.engine`) hands the owner its firings, which are folded here
(`fold_suppressed`, `tally_record`); the compiled one (`offsetd.engine.compiled`) hands back the
same things already folded (the planned decisions' and the tallies' JSON, counts per rule and
outcome, the suppressed failures). Both become a `Decided`, and `write_decided` does the rest the
same way for both: the audit, `offsetd_decisions_total`, the remediator, the breaker.

The planned decisions are written until the audit takes them (`delays`, every refusal logged and
counted in `offsetd_audit_refusals_total`, which the alert OffsetdAuditRefused reads): the agent
waits, and nothing is lost when the audit topic comes back. A frame that only changed tallies
does not wait (`AuditLog.write_soon`). `offsetd_decisions_total` counts a frame's decisions
once they are written.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offsetd.audit import AuditError
from offsetd.engine import Decision
from offsetd.engine.decision import Firing
from offsetd.engine.state import ConnectorState
from offsetd.engine.tally import fold_suppressed, tally_record
from offsetd.errors import KafkaAccessDenied
from offsetd.outcomes import PLANNED, suppressed_outcome
from offsetd.retry import retry_call

if TYPE_CHECKING:
    from offsetd_native import FrameOutcome

    from offsetd.app.wiring import Wiring

__all__ = ["Decided", "FailureSeen", "compiled_decided", "python_decided", "write_decided"]

log = logging.getLogger("offsetd")

DecisionLabels = tuple[str, str, str]
"""(rule, mode, outcome label) of `offsetd_decisions_total`."""


@dataclass(slots=True)  # not frozen: a frozen one costs ~1 us to make, a storm makes many
class FailureSeen:
    """A suppressed firing caused by a failure, as the breaker reads it (`BreakerTrip`): what
    the compiled engine hands back of one, instead of the firing."""

    id: str
    connect_cluster: str
    connector: str
    decided_at_ms: int
    record_text: str | None
    from_failure: bool = True


@dataclass(frozen=True, slots=True)
class Decided:
    """What one frame (or nudge) decided, folded: ready for `write_decided`."""

    connect_cluster: str
    connector: str
    planned: list[Decision]
    updates: list[dict[str, Any]]  # the tallies it changed: their audit records, in order
    counts: Counter[DecisionLabels]  # firings per label set of `offsetd_decisions_total`
    # its suppressed firings, for the breaker: built only when one is told (a remediator)
    suppressed: Callable[[], Sequence[Any]]


def _label(outcome: str, reason: str | None) -> str:
    return PLANNED if outcome == PLANNED else suppressed_outcome(reason or "disabled")


def python_decided(state: ConnectorState, decisions: Sequence[Firing], window: int) -> Decided:
    """The Python engine's firings of one frame, folded into `state` (its tallies)."""
    planned, tallies = fold_suppressed(state, decisions, window)
    return Decided(
        state.connect_cluster,
        state.connector,
        planned,
        [tally_record(state, tally, window) for tally in tallies],
        Counter((d.rule, d.mode, _label(d.outcome, d.reason)) for d in decisions),
        lambda: [d for d in decisions if d.outcome != PLANNED],
    )


def compiled_decided(outcome: FrameOutcome, connect_cluster: str, connector: str) -> Decided:
    """What the compiled engine decided of one frame (already folded into its state)."""
    counts: Counter[DecisionLabels] = Counter()
    for rule, mode, decided, reason, count in outcome.decisions:
        counts[(rule, mode, _label(decided, reason))] += count
    return Decided(
        connect_cluster,
        connector,
        [Decision.model_validate_json(text) for text in outcome.planned],
        [json.loads(text) for text in outcome.tallies],
        counts,
        lambda: [
            FailureSeen(decision_id, connect_cluster, connector, decided_at, record)
            for decision_id, decided_at, record in outcome.failures
        ],
    )


async def write_decided(wiring: Wiring, delays: Iterator[float], decided: Decided) -> None:
    """The one place decisions are written to the audit (and handed on from): a frame's
    planned decisions and the tallies its suppressed ones changed, in order, with one wait
    for all their acknowledgements (see the module's docstring)."""
    metrics = wiring.metrics
    planned, updates = decided.planned, decided.updates
    if not planned:  # only counts changed: nothing waits for them (see offsetd.audit)
        wiring.audit.write_soon(updates)
        written: list[bool] = []
    else:
        records = [decision.audit_record(wiring.rules) for decision in planned]

        def audit_refused(error: Exception, _attempt: int, delay: float) -> None:
            metrics.audit_refusals.inc()
            log.error(
                "the audit did not take %d planned decision(s) for %s/%s: %s; "
                "writing them again in %.0f s (nothing acts on them before)",
                len(records),
                decided.connect_cluster,
                decided.connector,
                error,
                delay,
            )

        # Until the audit takes them: nothing may act on an unaudited decision, and a frame
        # given up would lose them for good (a FAILED task sends no new status).
        written = await retry_call(
            lambda: wiring.audit.write_many(records, updates=updates),
            delays,
            retriable=lambda error: isinstance(error, (AuditError, KafkaAccessDenied)),
            before_retry=audit_refused,
        )
    for labels, count in decided.counts.items():  # a storm's frame: one increment per label set
        metrics.decisions.labels(*labels).inc(count)
    for decision, new in zip(planned, written, strict=True):
        if new:
            metrics.audit_writes.labels(PLANNED).inc()
            log.info("decision %s: %s", decision.id, decision.summary())
            if wiring.remediator is not None:
                # Enqueue only: remediations run as their own tasks. A replayed decision is
                # already in the audit; the remediator's start-up scan resubmits those that
                # never got an outcome, so a crash between audit and action loses nothing.
                wiring.remediator.submit(decision)
    for update in updates:
        metrics.audit_writes.labels(suppressed_outcome(update["reason"])).inc()
    if updates and wiring.remediator is not None:  # a failure soon after a skip: breaker
        wiring.remediator.note_suppressed(decided.suppressed())
