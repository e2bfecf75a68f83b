"""`notify`: tell people (log, metric, webhook) that the decision ran."""

from __future__ import annotations

from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.rules.actions import Notify

__all__ = ["NotifySpec", "notify"]


class NotifySpec(Notify, PlannedSpec):
    pass


async def notify(services: Services, call: ActionCall, spec: NotifySpec) -> Result:
    await services.notify(call.decision, spec.params, "executed")
    return "executed", "notified", {}
