"""`pause`, `stop`, `resume`: one lifecycle call to Connect each, asked again if unanswered.

One module for the three: each is the same single idempotent call with another verb.
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
    await services.again("pause", lambda: call.client.pause(call.decision.connector))
    return "executed", "paused", {}


async def stop(services: Services, call: ActionCall, _spec: StopSpec) -> Result:
    await services.again("stop", lambda: call.client.stop(call.decision.connector))
    return "executed", "stopped", {}


async def resume(services: Services, call: ActionCall, _spec: ResumeSpec) -> Result:
    await services.again("resume", lambda: call.client.resume(call.decision.connector))
    return "executed", "resumed", {}
