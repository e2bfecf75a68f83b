"""`pause`, `stop`, `resume`: one state asked of the offsets backend each, asked again if
unanswered.

One module for the three: each is the same single idempotent call with another state. The
backend moves the connector its own way (REST, or the resource an orchestrator keeps).
"""

from __future__ import annotations

from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.rules.actions import Pause, Resume, Stop

__all__ = ["PauseSpec", "ResumeSpec", "StopSpec", "pause", "resume", "stop"]


class PauseSpec(Pause, PlannedSpec):
    pass


class StopSpec(Stop, PlannedSpec):
    pass


class ResumeSpec(Resume, PlannedSpec):
    pass


async def pause(services: Services, call: ActionCall, _spec: PauseSpec) -> Result:
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    await services.again("pause", lambda: backend.request_state(call.decision.connector, "PAUSED"))
    return "executed", "paused", {}


async def stop(services: Services, call: ActionCall, _spec: StopSpec) -> Result:
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    await services.again("stop", lambda: backend.request_state(call.decision.connector, "STOPPED"))
    return "executed", "stopped", {}


async def resume(services: Services, call: ActionCall, _spec: ResumeSpec) -> Result:
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    await services.again(
        "resume", lambda: backend.request_state(call.decision.connector, "RUNNING")
    )
    return "executed", "resumed", {}
