"""What every action handler works with: its typed spec, the call, and the executor's services.

A handler is `async (services, call, spec) -> (outcome, message, audit extra)`. Its spec is a
typed model of the action as the engine planned it — the rule's fields plus what the engine
computed (a restart's `not_before_ms`, a skip's `record`) — parsed from the decision's
`PlannedAction` at the dispatch boundary; the decision, the audit and the events topic keep
carrying the action as plain JSON, unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.connect.client import ConnectClient
from offsetd.engine import Decision
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.backend import StepwiseBackend
from offsetd.remediation.control import ControlStore
from offsetd.remediation.locate import LocateAnswer
from offsetd.remediation.rewind import RewindRunner
from offsetd.remediation.sagas import SagaStore
from offsetd.remediation.skip import Quarantine

__all__ = ["ActionCall", "Handler", "Locator", "PlannedSpec", "Result", "Services"]

T = TypeVar("T")
Result = tuple[str, str, dict[str, Any]]  # outcome, message, fields for the audit record


class PlannedSpec(BaseModel):
    """An action as the engine planned it; fields a handler does not name are kept as given.

    A handler's spec subclasses its action's rule model (`offsetd.rules.actions`) and this, and
    adds only what the engine computed: one model of each action, whose `effects` it inherits.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str

    @property
    def params(self) -> dict[str, Any]:
        """The parameters exactly as planned (what notify and rewind read)."""
        return self.model_dump(mode="json", exclude={"type"}, exclude_unset=True)


class Locator(Protocol):
    """Finds the failing record exactly, or says why not (see `offsetd.remediation.locate`)."""

    async def locate(
        self, client: ConnectClient, decision: Decision, sagas: SagaStore, *, prove: bool = True
    ) -> LocateAnswer: ...

    async def pin_unstarted(self, client: ConnectClient, decision: Decision) -> str | None: ...


@dataclass(frozen=True)
class ActionCall:
    """One action of one decision, with the Connect client the executor opened for it."""

    client: ConnectClient
    cluster: ConnectCluster
    decision: Decision

    @property
    def owner(self) -> str:
        return f"{self.decision.connect_cluster}/{self.decision.connector}"


class Services(Protocol):
    """What the executor lends its handlers (`offsetd.remediation.executor.Remediator`)."""

    settings: RemediationSettings
    metrics: RemediationMetrics
    control: ControlStore
    sagas: SagaStore
    quarantine: Quarantine
    locator: Locator
    rewind: RewindRunner | None
    owner: str
    poll_s: float

    @property
    def now_ms(self) -> Callable[[], int]: ...

    @property
    def skip_pending(self) -> dict[str, asyncio.Event]:
        """Per connector: set while a skip is planned (a restart then stands down)."""
        ...

    def offsets_service(self, client: ConnectClient, connect_cluster: str) -> StepwiseBackend:
        """The cluster's offsets backend for `client` (the one the executor opened it with:
        its moves go through the backend's parts)."""
        ...

    async def again(self, what: str, call: Callable[[], Awaitable[T]]) -> T: ...

    async def notify(self, decision: Decision, params: dict[str, Any], outcome: str) -> None: ...


Handler = Callable[[Services, ActionCall, Any], Awaitable[Result]]
