"""The `offline` offsets backend: the offsets topic or the sink's consumer group, directly.

For workers that are down or older than 3.6: plans come from the configs topic (the
connector's class and type) and the offsets' real home (`ops.plan`), the safety gate
(`gate.check_offline_allowed`) runs before any plan that may be written, and `apply` writes,
reads back and records the snapshot (`ops.execute`). An undo restores a before-image the same
way, and always passes the gate's "workers down" check (the operator asked for it by name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from offsetd.errors import InvalidDocument, UndoConflict
from offsetd.offsets.backend import BackendRequest, Feature, OfflineOptions, Refusal
from offsetd.offsets.model import OffsetEntry, as_map, same_offsets
from offsetd.offsets.offline.gate import acheck_offline_allowed, check_offline_allowed
from offsetd.offsets.offline.ops import OfflinePlan, OfflineTarget, execute, plan
from offsetd.offsets.offline.plan import WriteReport
from offsetd.offsets.offline.reader import read_offsets
from offsetd.offsets.offline.view import OffsetsView
from offsetd.offsets.retarget import Selection
from offsetd.offsets.snapshots import SnapshotStore
from offsetd.offsets.targets import Target

__all__ = ["OfflineBackend", "OfflineOutcome", "offline_backend"]

_REFUSED = {
    "targets": "--offline takes a --file document (targets need REST for now)",
    "mm2-verify": "--offline takes a --file document (targets need REST for now)",
    "skip-run": "a skip-run plan is applied online: its runs are quarantined before the patch",
}


@dataclass(frozen=True)
class OfflineOutcome:
    plan: OfflinePlan
    snapshot_id: str
    after: tuple[OffsetEntry, ...]
    report: WriteReport

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "snapshot_id": self.snapshot_id,
            "report": self.report.as_json(),
        }


class OfflineBackend:
    """Reads and writes a Connect cluster's offsets without its workers."""

    name = "offline"

    def __init__(
        self,
        target: OfflineTarget,
        store: SnapshotStore,
        rest_url: str | None,
        options: OfflineOptions,
        owner_check: Callable[[str], Awaitable[None]] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.target = target
        # The REST client of the online commands (basic auth, CA): the gate asks through it.
        self.http = http
        self.store = store
        self.rest_url = rest_url
        self.options = options
        # Raises when an orchestrator owns the connector (a Strimzi resource): writing under it
        # offline would be undone at its next reconcile.
        self.owner_check = owner_check

    def write_refusal(self) -> Refusal | None:
        return None  # the safety gate decides per connector, right before planning a write

    def feature_refusal(self, feature: Feature) -> str | None:
        return _REFUSED.get(feature)

    async def read_view(self, connectors: Sequence[str], history: bool) -> OffsetsView:
        """The offsets topic folded: latest offsets, conflicts, malformed records, history."""
        return await asyncio.to_thread(
            read_offsets,
            self.target.worker_conf(),
            self.target.worker.offsets_topic,
            connectors=set(connectors) or None,
            history=history,
        )

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        view = await self.read_view(connectors, history=False)
        return {name: view.entries(name) for name in sorted(view.connectors)}

    async def plan_document(self, connector: str, entries: list[Any]) -> OfflinePlan:
        await self._gate(connector, self.options)
        return await asyncio.to_thread(
            plan,
            self.target,
            connector,
            None,
            raw=entries,
            connector_type=self.options.connector_type,
        )

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> OfflinePlan:
        await self._gate(connector, self.options)
        return await asyncio.to_thread(
            plan, self.target, connector, patch, connector_type=self.options.connector_type
        )

    async def plan_reset(self, connector: str) -> OfflinePlan:
        await self._gate(connector, self.options)
        return await asyncio.to_thread(
            plan, self.target, connector, None, connector_type=self.options.connector_type
        )

    async def plan_target(
        self, connector: str, target: Target, selection: Selection
    ) -> OfflinePlan:
        """Targets need the brokers' offsets by time and the workers' REST: refused."""
        raise InvalidDocument(_REFUSED["targets"])

    async def verify_replicating(self, outcome: Any) -> None:
        """Verifying MM2 needs running workers: refused."""
        raise InvalidDocument(_REFUSED["mm2-verify"])

    async def plan_undo(self, snapshot_id: str, *, force: bool) -> OfflinePlan:
        snap = await asyncio.to_thread(self.store.get, snapshot_id)
        current = (await asyncio.to_thread(plan, self.target, snap.connector, [])).before
        if not same_offsets(current, snap.after) and not force:
            raise UndoConflict(
                f"the offsets of {snap.connector} moved since change {snap.id}; review and "
                "repeat with --force to restore the before-image anyway"
            )
        wanted = as_map(snap.before)
        patch = [*wanted.values()]
        patch += [
            OffsetEntry(e.partition, None) for k, e in as_map(current).items() if k not in wanted
        ]
        undo = replace(self.options, force=force, assume_workers_down=True, connector_type=None)
        await self._gate(snap.connector, undo)
        return await asyncio.to_thread(plan, self.target, snap.connector, patch)

    async def apply(self, plan_: OfflinePlan) -> OfflineOutcome:
        sid, after, report = await asyncio.to_thread(
            execute,
            plan_,
            self.target.settings,
            self.target.worker_conf(),
            self.store,
            self.target.connect_cluster,
            key_template=self.options.key_template,
        )
        return OfflineOutcome(plan_, sid, after, report)

    async def _gate(self, connector: str, options: OfflineOptions) -> None:
        if self.owner_check is not None:
            await self.owner_check(connector)
        if options.dry_run:
            return  # nothing is written: no worker can be hurt
        if self.http is not None:
            await acheck_offline_allowed(
                self.rest_url,
                connector,
                force=options.force,
                assume_workers_down=options.assume_workers_down,
                http=self.http,
            )
            return
        await asyncio.to_thread(
            check_offline_allowed,
            self.rest_url,
            connector,
            force=options.force,
            assume_workers_down=options.assume_workers_down,
        )


def offline_backend(
    request: BackendRequest, owner_check: Callable[[str], Awaitable[None]] | None = None
) -> OfflineBackend:
    """The `offline` backend of a Connect cluster (offsetd.offsets.registry)."""
    if request.worker is None:
        raise ValueError("the offline backend needs the workers' view (topics, Kafka cluster)")
    return OfflineBackend(
        OfflineTarget(request.settings, request.worker, request.connect_cluster),
        request.store,
        request.client.url,
        request.offline or OfflineOptions(),
        owner_check,
        request.client.http,
    )
