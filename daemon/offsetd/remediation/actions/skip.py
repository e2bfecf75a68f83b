"""`skip-record`: locate the failing record exactly, then the durable skip saga around it.

The record is located first (the decision's DLQ coordinates, one-record batches, or a rule's
check; `offsetd.remediation.locate`); a record that cannot be proven is not skipped
(`not_located`). Then the saga (`offsetd.remediation.skip.SkipSaga`) quarantines, snapshots,
stops, patches, resumes and verifies, each step recorded before the next. `skip_context` and
`skip_outcome` serve a saga resumed after a crash too (`offsetd.remediation.recovery`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from offsetd.connect.client import ConnectClient
from offsetd.engine import Decision
from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.remediation.sagas import SagaRecord, skip_key
from offsetd.remediation.skip import SkipContext, SkipResult, SkipSaga, SkipTimings

__all__ = ["SkipSpec", "skip", "skip_context", "skip_outcome"]

log = logging.getLogger("offsetd.remediation")


class SkipSpec(PlannedSpec):
    type: Literal["skip-record"]
    record: dict[str, Any] | None = None  # the DLQ's coordinates, when they named it
    record_status: Literal["exact", "to_locate"] | None = None


async def skip(services: Services, call: ActionCall, _spec: SkipSpec) -> Result:
    decision = call.decision
    try:
        record, how, why = await services.locator.locate(call.client, decision, services.sagas)
        if record is None:  # counted once, by the executor's finish, like every outcome
            return "not_located", why, {"not_located": how}
        key = skip_key(
            decision.connect_cluster,
            decision.connector,
            str(record["topic"]),
            int(record["partition"]),
            int(record["offset"]),
        )
        await services.sagas.catch_up()
        existing = services.sagas.get(key)
        if existing is not None and existing.status == "done":
            return "executed", f"already skipped by saga {key}", {"saga": key}
        now = services.now_ms()
        saga = SagaRecord(
            key=key,
            kind="skip",
            connect_cluster=decision.connect_cluster,
            connector=decision.connector,
            decision_id=decision.id,
            rule=decision.rule,
            epoch=(existing.epoch + 1) if existing else 1,
            owner=services.owner,
            record=dict(record),
            located_by=how,
            started_at_ms=now,
            updated_at_ms=now,
            # A retry of a rolled-back skip of the same record finds the copy made then
            # (same saga key) instead of quarantining the record a second time.
            quarantine_mark=existing.quarantine_mark if existing else None,
        )
        await services.sagas.put(saga)
        result = await SkipSaga(skip_context(services, call.client, decision), saga).run()
        outcome, message, extra = await skip_outcome(services, decision, result)
        extra["located"] = why
        return outcome, message, extra
    finally:
        services.skip_pending.pop(call.owner, None)


def skip_context(
    services: Services, client: ConnectClient, decision: Decision | None
) -> SkipContext:
    """What a skip saga runs with: the client, the offsets backend, quarantine, timings, and
    the error context its quarantine copy carries."""
    trigger = decision.inputs.trigger if decision is not None else None
    error: dict[str, str] = {}
    if decision is not None:
        error["connector.name"] = decision.connector
        if decision.task_id is not None:
            error["task.id"] = str(decision.task_id)
    if trigger is not None:
        if trigger.stage:
            error["stage"] = trigger.stage
        if trigger.exception_class:
            error["exception.class.name"] = trigger.exception_class
    expected = None
    if trigger is not None and trigger.kind == "task_status":
        expected = trigger.root_cause_class or trigger.exception_class
    cluster = decision.connect_cluster if decision is not None else ""
    return SkipContext(
        client=client,
        offsets=services.offsets_service(client, cluster),
        store=services.sagas,
        quarantine=services.quarantine,
        timings=SkipTimings(
            verify_stable_for_s=services.settings.verify_stable_for / 1000,
            poll_s=services.poll_s,
            max_retries=services.settings.max_retries,
        ),
        error_context=error,
        expected_error=expected,
        now_ms=services.now_ms,
    )


async def skip_outcome(services: Services, decision: Decision | None, result: SkipResult) -> Result:
    """Metrics, the skip budget, the breaker and escalation for a saga's end; the outcome."""
    rec = result.record
    labels = (rec.connect_cluster, rec.connector)
    metrics, settings, control = services.metrics, services.settings, services.control
    extra: dict[str, Any] = {
        "saga": rec.key,
        "saga_status": result.status,
        "located_by": rec.located_by,  # dlq | single_record_batches | check
        "steps": list(rec.events),
        "quarantine": rec.quarantine_ref,
        "snapshot_id": rec.snapshot_id,
        "before": [e.as_json() for e in result.before],
        "after": [e.as_json() for e in result.after],
    }
    if result.stopped_s:
        metrics.stopped_seconds.labels(*labels).inc(result.stopped_s)
    topic = str((rec.record or {}).get("topic", ""))
    # What happened counts, whatever came after: a copy made is a record quarantined, an
    # offset written past the record is a skip (for the metric, the budget and the breaker),
    # even when the connector then failed again and the saga ended `failed`.
    if rec.done("quarantine"):
        metrics.quarantined.labels(*labels, topic).inc()
    if rec.done("patch"):
        metrics.skipped.labels(*labels, topic).inc()
        keep = max(settings.skip_budget.per, settings.breaker_window)
        await asyncio.to_thread(control.record_skip, rec.connect_cluster, rec.connector, keep)
    if result.status == "done":
        metrics.left_stopped.labels(*labels).set(0)
        return "executed", result.message, extra
    if result.left_stopped:
        metrics.left_stopped.labels(*labels).set(1)
        log.error("LEFT STOPPED: %s: %s", rec.key, result.message)
    if result.verify_failed:
        await asyncio.to_thread(
            lambda: control.set_breaker(
                rec.connect_cluster,
                rec.connector,
                open=True,
                by=services.owner,
                why=f"the skip of {rec.key} did not help: {result.message}",
                decision_id=rec.decision_id,
            )
        )
        metrics.breaker_open.labels(*labels).set(1)
    if decision is not None and result.status in ("failed", "left_stopped"):
        await services.notify(decision, {"severity": "critical"}, result.status)
    outcome = "aborted" if result.status == "aborted" else "failed"
    return outcome, result.message, extra
