"""`scale-tasks`: set a connector's `tasks.max` — to a number, or a bounded step from now.

Through the offsets backend's config change (`put_config`), never the raw client: on a
Strimzi-managed connector that is the resource's `tasksMax`, which the operator applies (a REST
PUT would be put back at its next reconcile). Connect restarts the connector's tasks with the
new config, so a scale is a restart too: the guards treat it as a writing action (its model's
`effects`).
"""

from __future__ import annotations

from offsetd.errors import OffsetdError
from offsetd.remediation.actions.base import ActionCall, PlannedSpec, Result, Services
from offsetd.rules.actions import ScaleTasks

__all__ = ["ScaleTasksSpec", "scale_tasks"]


class ScaleTasksSpec(ScaleTasks, PlannedSpec):
    pass


async def scale_tasks(services: Services, call: ActionCall, spec: ScaleTasksSpec) -> Result:
    name = call.decision.connector
    config = await services.again("read the config", lambda: call.client.config(name))
    current = _tasks_max(config.get("tasks.max"))
    wanted = spec.target(current)
    if wanted == current:
        bound = "" if spec.to is not None else f" (within {spec.min}..{spec.max or 'any'})"
        return "not_needed", f"tasks.max is {current} already{bound}", {"tasks_max": current}
    backend = services.offsets_service(call.client, call.decision.connect_cluster)
    changed = {**config, "tasks.max": str(wanted)}
    try:
        await services.again(
            f"set tasks.max to {wanted}", lambda: backend.put_config(name, changed)
        )
    except OffsetdError as exc:
        return "failed", f"tasks.max of {name} not changed from {current}: {exc}", {}
    return (
        "executed",
        f"tasks.max {current} -> {wanted}",
        {"tasks_max_before": current, "tasks_max": wanted},
    )


def _tasks_max(value: str | None) -> int:
    """Connect's default is 1; a value that is not a number counts as 1 (Connect refuses it
    anyway, so the new one replaces it)."""
    try:
        return max(int(value or "1"), 1)
    except ValueError:
        return 1
