"""The offsets backend protocol: every way offsetd reads and changes connector offsets.

Two callers, one protocol. The CLI lists, plans (alter from a patch, a document or a target,
reset, undo of an earlier change) and applies: `OffsetsBackend`. The daemon's sagas record
their progress between the steps of a change, so they use the same backend one step at a time:
`StepwiseBackend` (`OffsetsBackend` plus the steps, the connector moves and `client` for reads).
Which backend serves a command is chosen once, by `offsetd.offsets.registry.backend_for`, from
the Connect cluster's config and the command's flags; callers then ask the backend —
`write_refusal`, `feature_refusal` — instead of testing `--offline` or Strimzi themselves.

Backends today: `rest` (Connect's REST API, `offsetd.offsets.operations`), `strimzi` (the
KafkaConnector / KafkaMirrorMaker2 resources through the Kubernetes API, and REST for a
connector that Strimzi does not manage, `offsetd.offsets.strimzi`), `strimzi-manual` (Strimzi
without Kubernetes access: REST reads, writes refused with the steps to do them by hand), and
`offline` (the offsets topic or the sink's consumer group written directly while the workers
are down, `offsetd.offsets.offline`; it has no steps, so it serves the CLI only).

What a new backend implements. A backend that changes offsets through running workers
implements four small parts and nothing else:

- `OffsetsReader`: read offsets now, list them, and read back a written change;
- `OffsetsWriter`: write offsets (a patch, or None: delete them all);
- `ConnectorMover`: ask for a state (STOPPED, PAUSED, RUNNING), restart, replace the config,
  say who restarts the connector on its own;
- `ChangeRoute`: refuse a connector it must not change before planning, add its own steps to
  a plan (`--dry-run`), refuse a planned change that must be done by hand.

(A backend without its own way for one of them reuses the REST part, by composition.)

`offsetd.offsets.sequence.ChangeSequence` composes them (a `Parts`) into the backend: the one
safe sequence (snapshot first, stop, write, read back, restore, never half-done and silent),
the same for every such backend. Add a package under `offsetd/offsets/` with the parts and a
factory taking a `BackendRequest`, and one line in `offsetd.offsets.registry`: its name, its
factory, its guard refusal, and when it is chosen. A backend that works another way (offline)
implements `OffsetsBackend` itself and refuses what it cannot do through `feature_refusal`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeVar

from offsetd.config import Settings
from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.location import WorkerView
from offsetd.offsets.model import ConnectorKind, OffsetEntry
from offsetd.offsets.snapshots import Snapshot, SnapshotStore

if TYPE_CHECKING:
    from offsetd.offsets.retarget import Selection
    from offsetd.offsets.targets import Target

__all__ = [
    "BackendRequest",
    "ChangePlan",
    "ChangeRoute",
    "ClusterConfig",
    "ConnectorMover",
    "Feature",
    "OfflineOptions",
    "OffsetsBackend",
    "OffsetsReader",
    "OffsetsWriter",
    "Parts",
    "Refusal",
    "StepwiseBackend",
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


class ClusterConfig(Protocol):
    """What a backend is chosen by: a Connect cluster's config (`ConnectCluster`), or the
    CLI's target (a cluster given by its URL, with `--strimzi-namespace`)."""

    @property
    def orchestrator(self) -> str: ...

    @property
    def strimzi(self) -> StrimziAccess | None: ...


@dataclass(frozen=True)
class BackendRequest:
    """What a backend is built from: one Connect cluster, as the CLI or the daemon sees it.

    Callers build it with `for_cluster` from the cluster's config; which backend the config
    asks for is `offsetd.offsets.registry.backend_name`'s to say."""

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

    @classmethod
    def for_cluster(
        cls,
        connect_cluster: str,
        cluster: ClusterConfig | None,
        client: ConnectClient,
        store: SnapshotStore,
        *,
        settings: Settings | None = None,
        worker: WorkerView | None = None,
        offline: OfflineOptions | None = None,
        timeouts: Timeouts | None = None,
        log: Callable[[str], None] = lambda _msg: None,
    ) -> Self:
        """The request for a cluster as configured (None: a cluster offsetd does not know,
        served as plain REST)."""
        return cls(
            connect_cluster,
            cluster.orchestrator if cluster is not None else "none",
            client,
            store,
            settings=settings,
            worker=worker,
            offline=offline,
            timeouts=timeouts,
            log=log,
            strimzi=cluster.strimzi if cluster is not None else None,
        )


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

    async def plan_target(self, connector: str, target: Target, selection: Selection) -> PlanT:
        """An alter to a target (a time, the log start or end, a shift) for the selected
        partitions, computed from where the connector's offsets live (`feature_refusal`
        "targets" says when a backend cannot)."""
        ...

    async def apply(self, plan: PlanT) -> OutcomeT_co:
        """Snapshot (the undo image), write, read back and compare; never half-done and silent."""
        ...

    async def verify_replicating(self, outcome: Outcome) -> None:
        """After an MM2 reset or rewind: every touched partition shows progress again
        (`feature_refusal` "mm2-verify" says when a backend cannot)."""
        ...


# -- the parts a backend that works through running workers is made of -------------------------


class OffsetsReader(Protocol):
    """Where a backend reads offsets: now (the before-image), listed for a command, and read
    back after a write."""

    async def require_api(self) -> None:
        """Raise when the cluster cannot change offsets this way at all (too old a Connect)."""
        ...

    async def offsets(self, connector: str) -> list[OffsetEntry]:
        """The connector's offsets now, read plainly (a plan's before-image, its rebase at
        rest, the check after a failed write)."""
        ...

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        """Every named connector's offsets (no names: every connector)."""
        ...

    async def read_back(self, connector: str) -> list[OffsetEntry]:
        """The offsets a written change is checked against."""
        ...


class OffsetsWriter(Protocol):
    """How a backend writes offsets (the connector is STOPPED when it is asked)."""

    async def write(self, connector: str, writes: tuple[OffsetEntry, ...] | None) -> str:
        """Write these entries (None: delete every offset); the answer's words."""
        ...


class ConnectorMover(Protocol):
    """How a backend moves a connector: states, restarts, config. Through REST, or through
    an orchestrator's resources where REST moves would be put back."""

    async def request_state(self, connector: str, state: str) -> None:
        """Ask for STOPPED, PAUSED or RUNNING; the caller waits for it."""
        ...

    async def restart_failed(self, connector: str) -> ConnectorState:
        """Restart what is FAILED; the answer marks what was restarted RESTARTING."""
        ...

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState:
        """Restart one task whatever its state, or the connector and all its tasks (None)."""
        ...

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        """Replace the connector's config."""
        ...

    async def auto_restarted_by(self, connector: str) -> str | None:
        """Who restarts this connector on its own, so offsetd's restart rules stand down."""
        ...


class ChangeRoute(Protocol):
    """What a backend adds to the planning of a change."""

    async def admit(self, connector: str) -> None:
        """Before planning: raise for a connector this backend must not change (a GitOps
        controller owns its resource); locate what the change will drive, once."""
        ...

    async def shown(self, plan: Plan) -> Plan:
        """The plan with this backend's own steps and notes (what `--dry-run` prints)."""
        ...

    def refuse(self, plan: Plan) -> None:
        """Before anything moves: raise when this change must be done by hand."""
        ...


@dataclass(frozen=True)
class Parts:
    """A backend that works through running workers: its name, its parts, and the Connect
    client its reads of status, info and config go to."""

    name: str
    client: ConnectClient
    reader: OffsetsReader
    writer: OffsetsWriter
    mover: ConnectorMover
    route: ChangeRoute
    refusal: Refusal | None = None  # what the daemon's guards say before a writing action


class StepwiseBackend(OffsetsBackend[Plan, Outcome], Protocol):
    """`OffsetsBackend` one step at a time, for a caller that records its progress between
    the steps (the daemon's skip and rewind sagas), and the connector moves of the daemon's
    actions. `client` is a Connect client: reads are Connect's, while its moving calls (stop,
    pause, resume, restarts, config, offsets) go through this backend's parts."""

    @property
    def client(self) -> ConnectClient: ...

    @property
    def connect_cluster(self) -> str: ...

    async def describe(self, connector: str) -> tuple[ConnectorKind, str, ConnectorState]: ...

    async def snapshot(self, plan: Plan) -> Snapshot: ...

    async def stop_and_wait(self, plan: Plan, snapshot: Snapshot) -> tuple[Plan, Snapshot]: ...

    async def write(self, plan: Plan, snapshot: Snapshot) -> str: ...

    async def write_offsets(self, connector: str, patch: list[OffsetEntry]) -> str: ...

    async def read_back(self, plan: Plan, snapshot: Snapshot) -> tuple[OffsetEntry, ...]: ...

    async def restore_state(self, plan: Plan) -> str: ...

    async def record_outcome(
        self, snapshot: Snapshot, status: str, after: tuple[OffsetEntry, ...], message: str
    ) -> None: ...

    async def load_snapshot(self, snapshot_id: str) -> Snapshot: ...

    async def request_state(self, connector: str, state: str) -> None: ...

    async def restart_failed(self, connector: str) -> ConnectorState: ...

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState: ...

    async def put_config(self, connector: str, config: dict[str, str]) -> None: ...

    async def auto_restarted_by(self, connector: str) -> str | None: ...
