"""The offsets backend protocol: every way offsetd reads and changes connector offsets.

A backend lists a connector's offsets, plans a change (alter from a patch or a document, reset,
undo of an earlier change), and applies it with a snapshot first and a read-back after. Which
backend serves a command is chosen once, by `offsetd.offsets.registry.backend_for`, from the
Connect cluster's config and the command's flags; the CLI and the daemon then ask the backend —
`write_refusal`, `feature_refusal` — instead of testing `--offline` or `orchestrator` themselves.

Backends today: `rest` (Connect's REST API: stop -> patch -> read back -> resume,
`offsetd.offsets.operations`), `offline` (the offsets topic or the sink's consumer group
written directly while the workers are down, `offsetd.offsets.offline.backend`), and `strimzi`
(a Strimzi-managed cluster: REST reads, while writes are refused with the custom-resource steps
to do them by hand, `offsetd.offsets.strimzi`).

Adding a backend — the Strimzi one that drives `KafkaConnector` resources is next — is one new
package under `offsetd/offsets/` whose class implements `OffsetsBackend` and whose factory takes
a `BackendRequest`, plus one line in `offsetd.offsets.registry`: its name, its factory, and when
it is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from offsetd.config import Settings
from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectClient
from offsetd.offsets.location import WorkerView
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.snapshots import SnapshotStore

__all__ = [
    "BackendRequest",
    "ChangePlan",
    "Feature",
    "OfflineOptions",
    "OffsetsBackend",
    "Refusal",
    "Timeouts",
]

Feature = Literal["targets", "skip-run", "mm2-verify"]


@dataclass(frozen=True)
class Timeouts:
    stop_s: float = 60.0
    resume_s: float = 120.0
    poll_s: float = 0.5
    # How long a read-back may still show the old offsets: Connect acknowledges a write before
    # every GET shows it (a source connector's offsets come from the worker's re-read of its
    # offsets topic), so only a difference that lasts this long is a failed change.
    read_back_s: float = 5.0


@dataclass(frozen=True)
class Refusal:
    """Why a backend will not change offsets here: the guard's outcome, name and words."""

    outcome: str  # the audit outcome, e.g. "refused_strimzi"
    guard: str  # the guard that holds, e.g. "strimzi"
    detail: str


@dataclass(frozen=True)
class OfflineOptions:
    """`--offline` and what goes with it (the safety gate's overrides, key layout, type)."""

    force: bool = False
    assume_workers_down: bool = False
    key_template: str | None = None
    connector_type: str | None = None
    dry_run: bool = False  # a dry run passes no safety gate: it writes nothing


@dataclass(frozen=True)
class BackendRequest:
    """What a backend is built from: one Connect cluster, as the CLI or the daemon sees it."""

    connect_cluster: str
    orchestrator: str
    client: ConnectClient
    store: SnapshotStore
    settings: Settings | None = None
    worker: WorkerView | None = None
    offline: OfflineOptions | None = None  # set: the command asked for --offline
    timeouts: Timeouts | None = None
    log: Callable[[str], None] = lambda _msg: None
    strimzi: StrimziAccess | None = None  # the cluster's Kubernetes access (its `strimzi` section)


class ChangePlan(Protocol):
    """A planned change, as every backend shows it (`--dry-run`, the audit, JSON output)."""

    @property
    def connector(self) -> str: ...

    def as_json(self) -> dict[str, Any]: ...


PlanT = TypeVar("PlanT", bound=ChangePlan)
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)


class OffsetsBackend(Protocol[PlanT, OutcomeT_co]):
    """One way to read and change a Connect cluster's connector offsets."""

    name: str

    def write_refusal(self) -> Refusal | None:
        """Why this backend must not change offsets of its cluster now (None: it may)."""
        ...

    def feature_refusal(self, feature: Feature) -> str | None:
        """Why a feature needs another backend (None: this one has it)."""
        ...

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        """Every named connector's offsets (no names: every connector)."""
        ...

    async def plan_document(self, connector: str, entries: list[Any]) -> PlanT:
        """An alter from a document's raw entries, validated for the connector's kind."""
        ...

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> PlanT: ...

    async def plan_reset(self, connector: str) -> PlanT: ...

    async def plan_undo(self, snapshot_id: str, *, force: bool) -> PlanT:
        """Restore the before-image of an earlier change exactly."""
        ...

    async def apply(self, plan: PlanT) -> OutcomeT_co:
        """Snapshot (the undo image), write, read back and compare; never half-done and silent."""
        ...
