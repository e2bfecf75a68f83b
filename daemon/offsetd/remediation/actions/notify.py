"""`notify`: tell people (log, metric, webhook) that the decision ran."""

from __future__ import annotations

from typing import Literal

from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services

__all__ = ["NotifySpec", "notify"]


class NotifySpec(PlannedSpec):
    type: Literal["notify"]
    severity: str = "warning"
    webhook: str | None = None
    summary: str | None = None


async def notify(services: Services, call: ActionCall, spec: NotifySpec) -> Result:
    await services.notify(call.decision, spec.params, "executed")
    return "executed", "notified", {}
