"""`rewind`: move a connector back to a time or a plan file, through the offsets backend."""

from __future__ import annotations

import logging
from typing import Self

from pydantic import model_validator

from offsetd.engine import Decision
from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.remediation.rewind import RewindResult
from offsetd.rules.actions import Rewind

__all__ = ["RewindSpec", "rewind", "rewind_outcome"]

log = logging.getLogger("offsetd.remediation")


class RewindSpec(Rewind, PlannedSpec):
    to_timestamp_ms: int | None = None  # to_timestamp in epoch ms, as the engine planned it

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        """As planned, the time is `to_timestamp_ms` (the rule's `to_timestamp` resolved by the
        engine): exactly one of it and `plan_file` (this replaces the rule model's check)."""
        if (self.to_timestamp_ms is None) == (self.plan_file is None):
            raise ValueError("give exactly one of to_timestamp_ms or plan_file")
        return self


async def rewind(services: Services, call: ActionCall, spec: RewindSpec) -> Result:
    if services.rewind is None:
        return "failed", "rewind is not available in this worker", {}
    decision = call.decision
    service = services.offsets_service(call.client, decision.connect_cluster)
    result = await services.rewind.run(service, services.sagas, decision, spec.params)
    return await rewind_outcome(
        services, decision.connect_cluster, decision.connector, decision, result
    )


async def rewind_outcome(
    services: Services,
    connect_cluster: str,
    connector: str,
    decision: Decision | None,
    result: RewindResult,
) -> Result:
    """Metrics and escalation for a rewind's end (run, or recovered); the outcome for the audit."""
    labels = (connect_cluster, connector)
    if result.stopped_s:
        services.metrics.stopped_seconds.labels(*labels).inc(result.stopped_s)
    services.metrics.left_stopped.labels(*labels).set(1 if result.left_stopped else 0)
    if result.left_stopped:
        log.error("LEFT STOPPED: %s: %s", connector, result.message)
    if decision is not None and result.outcome == "failed":
        await services.notify(decision, {"severity": "critical"}, "failed")
    return result.outcome, result.message, dict(result.extra)
