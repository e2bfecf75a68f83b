"""Remediation actions: one typed spec and one handler per action, dispatched by spec.

The executor (`offsetd.remediation.executor`) only queues, guards, dispatches and records; what
an action does lives in its module here. A new action is:

1. its rule model in `offsetd.rules.actions`, with its `effects` (what the guards, the engine
   and the executor ask) and one member in the `Action` union;
2. a module here with its spec — a subclass of that model and `PlannedSpec`, adding only what
   the engine computed — and its handler `async (services, call, spec) -> Result`, changing
   Connect only through `services.offsets_service(...)` (so Strimzi gets it through the
   resources);
3. one line in `HANDLERS`.

tests/unit/rules/test_action_registry.py fails while the three disagree.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError

from offsetd.engine import PlannedAction
from offsetd.remediation.actions.base import ActionCall, Handler, PlannedSpec, Result, Services
from offsetd.remediation.actions.lifecycle import (
    PauseSpec,
    ResumeSpec,
    StopSpec,
    pause,
    resume,
    stop,
)
from offsetd.remediation.actions.notify import NotifySpec, notify
from offsetd.remediation.actions.restart import (
    RestartSpec,
    RestartTasksSpec,
    restart,
    restart_tasks,
)
from offsetd.remediation.actions.rewind import RewindSpec, rewind
from offsetd.remediation.actions.scale import ScaleTasksSpec, scale_tasks
from offsetd.remediation.actions.skip import SkipSpec, skip

__all__ = ["HANDLERS", "dispatch", "parse_action"]

# spec -> handler: the whole catalogue of what the executor can do
HANDLERS: dict[type[PlannedSpec], Handler] = {
    RestartSpec: restart,
    RestartTasksSpec: restart_tasks,
    PauseSpec: pause,
    StopSpec: stop,
    ResumeSpec: resume,
    NotifySpec: notify,
    RewindSpec: rewind,
    ScaleTasksSpec: scale_tasks,
    SkipSpec: skip,
}
_SPECS: dict[str, type[PlannedSpec]] = {
    get_args(spec.model_fields["type"].annotation)[0]: spec for spec in HANDLERS
}


def parse_action(action: PlannedAction) -> PlannedSpec | None:
    """The typed spec of a planned action (None: no such action here). Raises
    `ValidationError` if its parameters do not fit the spec."""
    spec = _SPECS.get(action.type)
    if spec is None:
        return None
    return spec.model_validate({**action.params, "type": action.type})


async def dispatch(services: Services, call: ActionCall, action: PlannedAction) -> Result:
    """Run one planned action with its handler."""
    try:
        spec = parse_action(action)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return "failed", f"invalid parameters of action {action.type}: {problems}", {}
    if spec is None:
        return "failed", f"unknown action {action.type}", {}
    handler: Any = HANDLERS[type(spec)]
    result: Result = await handler(services, call, spec)
    return result
