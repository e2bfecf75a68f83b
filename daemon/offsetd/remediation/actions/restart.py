"""`restart-failed-tasks`: restart what is FAILED; `restart-tasks`: restart the task a progress
event named (or the whole connector), whatever its state. Both wait for their backoff, and
stand down for a skip of the connector planned meanwhile."""

from __future__ import annotations

import asyncio
import contextlib

from offsetd.connect.client import ConnectorState
from offsetd.errors import OffsetdError
from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.rules.actions import RestartFailedTasks, RestartTasks

__all__ = ["RestartSpec", "RestartTasksSpec", "restart", "restart_tasks"]


class RestartSpec(RestartFailedTasks, PlannedSpec):
    not_before_ms: int | None = None  # the engine's backoff: not before this time


class RestartTasksSpec(RestartTasks, PlannedSpec):
    not_before_ms: int | None = None


async def _backoff_then_skip_pending(
    services: Services, call: ActionCall, not_before_ms: int | None
) -> bool:
    """Wait for the backoff; True if a skip of the connector was planned meanwhile (a skip
    restarts it anyway, and offsetd acting on a connector must not be second-guessed)."""
    delay_s = max(int(not_before_ms or 0) - services.now_ms(), 0) / 1000
    pending = services.skip_pending.setdefault(call.owner, asyncio.Event())
    if delay_s > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pending.wait(), timeout=delay_s)
    return pending.is_set()


async def restart_tasks(services: Services, call: ActionCall, spec: RestartTasksSpec) -> Result:
    """A stuck task is RUNNING (or has no status at all), so this restarts it by id; an MM2
    flow's stall names no task: the connector and all its tasks are restarted."""
    if await _backoff_then_skip_pending(services, call, spec.not_before_ms):
        return "suppressed_skip_pending", "a skip of this connector is planned", {}
    name, task_id = call.decision.connector, call.decision.task_id
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    what = f"task {task_id}" if task_id is not None else "the connector and all its tasks"
    try:
        state = await services.again(
            f"restart {what}", lambda: backend.restart_tasks(name, task_id)
        )
    except OffsetdError as exc:
        return "failed", f"{what} of {name} not restarted: {exc}", {}
    return "executed", f"restarted {what}; now {_states(state)}", {"task_id": task_id}


async def restart(services: Services, call: ActionCall, spec: RestartSpec) -> Result:
    if await _backoff_then_skip_pending(services, call, spec.not_before_ms):
        return "suppressed_skip_pending", "a skip of this connector is planned", {}
    name = call.decision.connector
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    owner = await backend.auto_restarted_by(name)
    if owner is not None:
        return (
            "suppressed_auto_restart",
            f"{owner} restarts {name} itself; offsetd's restart rule stands down",
            {"auto_restart": owner},
        )
    # A sink that committed nothing restarts where its auto.offset.reset says; for `latest`
    # that is past the failed record and everything written since: its start is pinned first.
    try:
        pinned = await services.locator.pin_unstarted(call.client, call.decision)
    except OffsetdError as exc:
        return "failed", f"not restarted: {exc}", {}
    # onlyFailed: a retry after a lost answer restarts only what is still FAILED
    tries = 0

    async def once() -> ConnectorState:
        nonlocal tries
        tries += 1
        return await backend.restart_failed(name)

    state = await services.again("restart failed tasks", once)
    restarting = _restarting(state)
    if not restarting and tries == 1:
        # Connect answers 202 with every instance it restarts marked RESTARTING; none marked
        # means nothing was FAILED any more (someone restarted it, or it healed).
        return "not_needed", f"nothing to restart: {_states(state)}", {}
    extra = {"pinned": pinned} if pinned else {}
    if not restarting:  # an earlier try may have restarted it and its answer was lost
        return "executed", f"restart sent {tries} times; now {_states(state)}", extra
    return "executed", f"restarted {', '.join(restarting)}", extra


def _restarting(state: ConnectorState) -> list[str]:
    """The instances a restart answer marks RESTARTING: 'connector', 'task N'."""
    found = ["connector"] if state.state == "RESTARTING" else []
    return found + [f"task {t.id}" for t in state.tasks if t.state == "RESTARTING"]


def _states(state: ConnectorState) -> str:
    tasks = ", ".join(f"{t.id}={t.state}" for t in state.tasks) or "none"
    return f"connector {state.state}, tasks {tasks}"
