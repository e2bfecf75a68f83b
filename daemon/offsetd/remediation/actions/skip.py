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
from offsetd.remediation.locate import LocateAnswer
from offsetd.remediation.poison_run import BreakerCause, PoisonRun, where
from offsetd.remediation.sagas import SagaRecord, skip_key
from offsetd.remediation.skip import SkipContext, SkipResult, SkipSaga, SkipTimings
from offsetd.rules.actions import SkipRecord

__all__ = ["SkipSpec", "run_skips", "skip", "skip_context", "skip_outcome"]

log = logging.getLogger("offsetd.remediation")


class SkipSpec(SkipRecord, PlannedSpec):
    record: dict[str, Any] | None = None  # the DLQ's coordinates, when they named it
    record_status: Literal["exact", "to_locate"] | None = None


async def skip(services: Services, call: ActionCall, _spec: SkipSpec) -> Result:
    decision = call.decision
    try:
        answer = await services.locator.locate(call.client, decision, services.sagas)
        if answer.record is None:  # counted once, by the executor's finish, like every outcome
            return "not_located", answer.why, {"not_located": answer.how}
        await services.sagas.catch_up()
        key = _key(decision, answer.record)
        existing = services.sagas.get(key)
        run = PoisonRun(
            decision.connector, services.settings.max_poison_run, answer.proof, answer.no_proof
        )
        if (
            existing is not None
            and existing.status in ("done", "failed")
            and existing.done("patch")
        ):
            if answer.how == "dlq":  # a DLQ record of the skipped failure, decided late
                return "executed", f"already skipped by saga {key}", {"saga": key}
            # The task just failed on it again: the offsets went back, or the connector keeps
            # its own and seeks back to it. Skipping it again cannot help.
            run.skipped_one(_coordinates(answer.record))
            step = run.next_step(_coordinates(answer.record))
            assert step.cause is not None
            return await _stop(services, decision, run, step.cause, step.message, {"saga": key}, [])
        return await run_skips(services, call.client, decision, answer, run)
    finally:
        services.skip_pending.pop(call.owner, None)


async def run_skips(
    services: Services,
    client: ConnectClient,
    decision: Decision,
    answer: LocateAnswer,
    run: PoisonRun,
) -> Result:
    """Skip the located record; while the sink then fails at a *later* record, locate and skip
    that one too (`offsetd.remediation.poison_run` says when to stop instead)."""
    runs: list[dict[str, Any]] = []
    while True:
        assert answer.record is not None
        result = await _saga(services, client, decision, answer)
        outcome, message, extra = await skip_outcome(services, decision, result, breaker=False)
        extra["located"] = answer.why
        runs.append({"saga": extra["saga"], "record": _coordinates_json(answer.record)})
        if result.record.done("patch"):
            run.skipped_one(_coordinates(answer.record))
        if result.status == "done" or not result.verify_failed:
            break
        following = await services.locator.locate(
            client, _to_locate(decision), services.sagas, prove=False
        )
        if following.delivered > 0:
            run.proven_by(f"{following.delivered} records were delivered between the bad ones")
        step = run.next_step(
            _coordinates(following.record) if following.record is not None else None,
            f"{following.how}: {following.why}",
        )
        if step.skip is None:
            assert step.cause is not None
            return await _stop(services, decision, run, step.cause, step.message, extra, runs)
        budget = services.settings.skip_budget
        used = services.control.state.skips_within(
            decision.connect_cluster, decision.connector, services.now_ms(), budget.per
        )
        if used >= budget.max:
            text = (
                f"skipped {where(run.skipped)}; {step.message}, but the skip budget is used up "
                f"({used} skips within {budget.per // 1000} s): left FAILED for a person"
            )
            await services.notify(decision, {"severity": "critical", "summary": text}, "failed")
            return "failed", text, {**extra, "run": _run_json(run, runs, "budget")}
        log.warning("%s: %s", decision.connector, step.message)
        answer = following
    if len(run.skipped) > 1 and result.status == "done":
        message = run.summary(services.settings.verify_stable_for / 1000)
    return outcome, message, {**extra, "run": _run_json(run, runs, result.status)}


async def _saga(
    services: Services, client: ConnectClient, decision: Decision, answer: LocateAnswer
) -> SkipResult:
    """One record's skip saga, from a new durable record (or a rolled-back one's)."""
    assert answer.record is not None
    key = _key(decision, answer.record)
    await services.sagas.catch_up()
    existing = services.sagas.get(key)
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
        record=dict(answer.record),
        located_by=answer.how,
        started_at_ms=now,
        updated_at_ms=now,
        # A retry of a rolled-back skip of the same record finds the copy made then
        # (same saga key) instead of quarantining the record a second time.
        quarantine_mark=existing.quarantine_mark if existing else None,
    )
    await services.sagas.put(saga)
    return await SkipSaga(skip_context(services, client, decision), saga).run()


async def _stop(
    services: Services,
    decision: Decision,
    run: PoisonRun,
    cause: BreakerCause,
    text: str,
    extra: dict[str, Any],
    runs: list[dict[str, Any]],
) -> Result:
    """The run ends without a healed sink: the breaker opens with the cause, a person is told."""
    cluster, connector = decision.connect_cluster, decision.connector
    await asyncio.to_thread(
        lambda: services.control.set_breaker(
            cluster, connector, open=True, by=services.owner, why=text, decision_id=decision.id
        )
    )
    services.metrics.breaker_open.labels(cluster, connector).set(1)
    log.warning("breaker of %s opened: %s", connector, text)
    await services.notify(decision, {"severity": "critical", "summary": text}, "failed")
    return "failed", text, {**extra, "run": _run_json(run, runs, cause), "breaker": cause}


def _key(decision: Decision, record: dict[str, Any]) -> str:
    return skip_key(
        decision.connect_cluster,
        decision.connector,
        str(record["topic"]),
        int(record["partition"]),
        int(record["offset"]),
    )


def _coordinates(record: dict[str, Any]) -> tuple[str, int, int]:
    return str(record["topic"]), int(record["partition"]), int(record["offset"])


def _coordinates_json(record: dict[str, Any]) -> dict[str, Any]:
    topic, partition, offset = _coordinates(record)
    return {"topic": topic, "partition": partition, "offset": offset}


def _to_locate(decision: Decision) -> Decision:
    """The decision as the next record of its run is located: no record named, one-record
    batches (the DLQ record of the new failure is not in it)."""
    return decision.model_copy(update={"record_status": "to_locate", "record": None})


def _run_json(run: PoisonRun, runs: list[dict[str, Any]], ended: str) -> dict[str, Any]:
    return {
        "records": [{"topic": t, "partition": p, "offset": o} for t, p, o in run.skipped],
        "sagas": runs,
        "ended": ended,
        "proof": run.proof,
    }


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


async def skip_outcome(
    services: Services, decision: Decision | None, result: SkipResult, *, breaker: bool = True
) -> Result:
    """Metrics, the skip budget, the breaker and escalation for a saga's end; the outcome.

    `breaker=False`: a failure after the skip is left to the caller (a run of poison records,
    `run_skips`), which tells a new bad record from a skip that did not help."""
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
        past = f"{topic}-{(rec.record or {}).get('partition')}@{(rec.record or {}).get('offset')}"
        await asyncio.to_thread(
            lambda: control.record_skip(rec.connect_cluster, rec.connector, keep, record=past)
        )
    if result.status == "done":
        metrics.left_stopped.labels(*labels).set(0)
        return "executed", result.message, extra
    if result.left_stopped:
        metrics.left_stopped.labels(*labels).set(1)
        log.error("LEFT STOPPED: %s: %s", rec.key, result.message)
    if result.verify_failed and not breaker:
        return "failed", result.message, extra
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
