"""`restart-failed-tasks`: restart what is FAILED, when its backoff says, unless a skip comes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from offsetd.connect.client import ConnectorState
from offsetd.errors import OffsetdError
from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services

__all__ = ["RestartSpec", "restart"]


class RestartSpec(PlannedSpec):
    type: Literal["restart-failed-tasks"]
    not_before_ms: int | None = None  # the engine's backoff: not before this time


async def restart(services: Services, call: ActionCall, spec: RestartSpec) -> Result:
    delay_s = max(int(spec.not_before_ms or 0) - services.now_ms(), 0) / 1000
    pending = services.skip_pending.setdefault(call.owner, asyncio.Event())
    if delay_s > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pending.wait(), timeout=delay_s)
    if pending.is_set():
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
        return await call.client.restart_failed(name)

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
