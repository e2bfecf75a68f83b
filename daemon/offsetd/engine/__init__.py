"""The engine: one event + one connector's durable state + the rules -> decisions (pure)."""

from offsetd.engine.decide import decide, prune
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.engine.later import (
    did_not_run,
    outcome_news,
    redecide_deferred,
    release,
    settle,
)
from offsetd.engine.state import ConnectorState
from offsetd.rules.models import ConnectorMeta

__all__ = [
    "ConnectorMeta",
    "ConnectorState",
    "Decision",
    "DecisionInputs",
    "EventSummary",
    "PlannedAction",
    "decide",
    "did_not_run",
    "outcome_news",
    "prune",
    "redecide_deferred",
    "release",
    "settle",
]
