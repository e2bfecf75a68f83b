"""The `strimzi` offsets backend: the safe sequence, driven through Strimzi's resources.

Strimzi drives each connector back to its resource's `spec.state` at every reconcile, so a REST
stop would be resumed under a running change. This backend keeps the `rest` backend's sequence
and its guarantees (`offsetd.offsets.operations`) and replaces the steps that move a connector:

snapshot (durable) -> `spec.state: stopped` -> wait until REST shows STOPPED with no tasks ->
write the offsets ConfigMap -> `alterOffsets.fromConfigMap` + `strimzi.io/connector-offsets=alter`
(or `=reset`) -> wait until the operator removed the annotation, failing on its warning
condition -> read back through `listOffsets` (`=list`, the ConfigMap it writes) -> restore the
previous `spec.state` -> verify through REST.

Whether a cluster is Strimzi-managed is asked of the Kubernetes API (`resources.find_connect`):
a cluster whose KafkaConnect does not use connector resources is served exactly as `rest`.
A resource that a GitOps controller owns is refused unless `allow_gitops_managed` (the
controller would put `spec.state` back as Strimzi puts REST back). Writes use field manager
`offsetd`; `strimzi.io/pause-reconciliation` is never used, so it can never be left behind.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectorState
from offsetd.connect.offsets import entries_from_json
from offsetd.errors import (
    ChangeIncomplete,
    ConnectorRejected,
    GitOpsManaged,
    OffsetdError,
    StrimziManaged,
)
from offsetd.kube.api import KubeApi, open_kube
from offsetd.offsets.backend import BackendRequest, Refusal
from offsetd.offsets.change import Plan, nothing_to_change
from offsetd.offsets.documents import configmap_name
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.operations import OffsetsService
from offsetd.offsets.snapshots import Snapshot
from offsetd.offsets.strimzi.resources import (
    OFFSETS_ANNOTATION,
    ConnectorResource,
    ConnectResource,
    find_connect,
    gitops_owner,
    locate,
)

__all__ = ["PRIOR_STATES", "StrimziBackend", "strimzi_owner_check", "strimzi_resources_backend"]

_SPEC_STATE = {"STOPPED": "stopped", "PAUSED": "paused", "RUNNING": "running"}
_REASONS = {"alter": "AlterOffsets", "reset": "ResetOffsets", "list": "ListOffsets"}
_LABELS = {"app.kubernetes.io/managed-by": "offsetd"}
# On the resource while offsetd holds a connector stopped: {connector: its spec.state before}.
PRIOR_STATES = "offsetd.io/prior-spec-state"


@dataclass(frozen=True)
class _Patch:
    """A write without a plan (the skip saga's own retries): just the entries."""

    patch: tuple[OffsetEntry, ...] | None


class StrimziBackend(OffsetsService):
    """Changes offsets of a Strimzi-managed cluster through its custom resources."""

    name = "strimzi"

    def __init__(self, *args: Any, api: KubeApi, access: StrimziAccess, url: str,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.api = api
        self.access = access
        self.url = url
        self._connect: ConnectResource | None = None
        self._detected = False
        self.configured_strimzi = False  # orchestrator: strimzi — not finding it is an error

    @classmethod
    def for_strimzi(cls, request: BackendRequest, access: StrimziAccess) -> Self:
        backend = cls(
            request.client,
            request.store,
            connect_cluster=request.connect_cluster,
            timeouts=request.timeouts,
            log=request.log,
            api=open_kube(access),
            access=access,
            url=request.client.url,
        )
        backend.configured_strimzi = request.orchestrator == "strimzi"
        return backend

    # -- which resource ---------------------------------------------------------------------------

    async def managed_by(self) -> ConnectResource | None:
        """The KafkaConnect managing this cluster, asked of the API once (None: not Strimzi)."""
        if not self._detected:
            self._connect = await find_connect(
                self.api, name=self.access.kafka_connect, url=self.url, alias=self.connect_cluster
            )
            if self._connect is None and self.configured_strimzi:
                raise StrimziManaged(
                    f"Connect cluster {self.connect_cluster} is configured as Strimzi-managed, "
                    f"but namespace {self.api.namespace} has no KafkaConnect "
                    f"{self.access.kafka_connect or f'with status URL {self.url}'} that uses "
                    'connector resources (strimzi.io/use-connector-resources: "true"); '
                    "nothing was changed"
                )
            self._detected = True
            if self._connect is not None:
                self.log(
                    f"Connect cluster {self.connect_cluster} is managed by Strimzi "
                    f"(KafkaConnect {self.api.namespace}/{self._connect.name})"
                )
        return self._connect

    async def resource(self, connector: str) -> ConnectorResource | None:
        """The connector's resource as it is now; None when the cluster is not Strimzi's."""
        connect = await self.managed_by()
        return None if connect is None else await locate(self.api, connect, connector)

    def write_refusal(self) -> Refusal | None:
        return None

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        """Through each connector's resource (`listOffsets`, as Strimzi's guide does it); a
        connector that no resource describes is read through REST."""
        if await self.managed_by() is None:
            return await super().list_offsets(connectors)
        await self.client.require_offsets_api()
        chosen = list(connectors) or await self.client.connector_names()
        listed = {}
        for name in chosen:
            try:
                listed[name] = await self.read_back_offsets(name)
            except StrimziManaged:
                listed[name] = await self.client.offsets(name)
        return listed

    # -- planning --------------------------------------------------------------------------------

    async def _base_plan(self, connector: str, operation: str) -> Plan:
        found = await self.resource(connector)
        if found is not None:
            owner = gitops_owner(found.resource)
            if owner is not None and not self.access.allow_gitops_managed:
                raise GitOpsManaged(
                    f"{found.label} is managed by {owner}, which would put spec.state back as "
                    "Strimzi puts REST back; change it through that controller, or set "
                    f"connect_clusters.{self.connect_cluster}.strimzi.allow_gitops_managed"
                )
        return await super()._base_plan(connector, operation)

    async def plan_alter(self, connector: str, patch: list[OffsetEntry]) -> Plan:
        return await self._with_steps(await super().plan_alter(connector, patch))

    async def plan_reset(self, connector: str) -> Plan:
        return await self._with_steps(await super().plan_reset(connector))

    async def plan_undo(self, snapshot_id: str, *, force: bool = False) -> Plan:
        return await self._with_steps(await super().plan_undo(snapshot_id, force=force))

    async def _with_steps(self, plan: Plan) -> Plan:
        found = await self.resource(plan.connector)
        if found is None:
            return plan
        route, configmap = self.resource_steps(found, plan)
        return replace(plan, route=route, notes=(*plan.notes, *configmap))

    def resource_steps(
        self, found: ConnectorResource, plan: Plan
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What `--dry-run` shows: the resource changes in order, and the ConfigMap written."""
        nothing = nothing_to_change(plan)
        if nothing is not None:
            return (f"{nothing}: {found.label} is not touched",), ()
        ns = self.api.namespace
        where = f"{found.kind} {ns}/{found.name} at {found.pointer} (field manager offsetd)"
        moving = plan.prior_state != "STOPPED"
        steps = [f"record state {plan.prior_state}; snapshot {len(plan.before)} partitions "
                 f"(undo image); {where}"]  # fmt: skip
        if moving:
            steps.append(
                f"note {PRIOR_STATES} on the resource, set spec.state: stopped; wait until "
                "STOPPED with no tasks"
            )
        configmap: tuple[str, ...] = ()
        if plan.writes is not None:
            name = self.alter_configmap(found)
            body = json.dumps({"offsets": [e.as_json() for e in plan.writes]}, indent=2)
            steps.append(
                f"write ConfigMap {ns}/{name} (key {found.configmap_key()}); "
                f"spec.alterOffsets.fromConfigMap.name: {name}"
            )
            configmap = (f"ConfigMap {ns}/{name}, {found.configmap_key()}:\n{body}",)
        operation = "alter" if plan.patch is not None else "reset"
        notes = ", ".join(f"{k}={v}" for k, v in found.offsets_annotations(operation).items())
        steps.append(f"annotate {notes}; wait until Strimzi takes {OFFSETS_ANNOTATION} away")
        steps.append(
            f"read back: spec.listOffsets.toConfigMap.name: {self.list_configmap(found)}, "
            f"annotate {OFFSETS_ANNOTATION}=list; compare"
        )
        if moving:
            steps.append(
                f"spec.state back to {found.spec_state or '(absent: running)'}; wait until "
                f"the connector and its tasks are {plan.prior_state}"
            )
        return tuple(steps), configmap

    @staticmethod
    def alter_configmap(found: ConnectorResource) -> str:
        return configmap_name(f"{found.name}-offsetd-alter")

    @staticmethod
    def list_configmap(found: ConnectorResource) -> str:
        return configmap_name(f"{found.name}-offsetd-list")

    # -- the steps that move the connector ---------------------------------------------------------

    async def request_state(self, connector: str, state: str) -> None:
        found = await self.resource(connector)
        if found is None:
            await super().request_state(connector, state)
            return
        priors = _priors(found)
        wanted = _SPEC_STATE[state]
        if state == "STOPPED":
            if connector not in priors:  # durable before the spec moves: a crash keeps it
                await self._set_priors(found, {**priors, connector: found.spec_state})
            value: str | None = wanted
        elif connector in priors:
            # Put back exactly what the spec said (absent stays absent) when it meant this state.
            before = priors[connector]
            value = before if (before or "running") == wanted else wanted
        elif (found.spec_state or "running") == wanted:
            return  # it already means that (e.g. the restore repeated after a crash)
        else:
            value = wanted
        if found.spec_state != value:
            self.log(
                f"{found.label}: spec.state {found.spec_state or '(absent)'} -> "
                f"{value or '(absent)'}"
            )
            await self._set_spec(found, "state", value)
        if state != "STOPPED" and connector in priors:  # only once the spec is back
            await self._set_priors(found, {k: v for k, v in priors.items() if k != connector})

    async def write(self, plan: Plan, snapshot: Snapshot) -> str:
        found = await self.resource(plan.connector)
        writes = plan.writes
        if found is None or (writes is not None and not writes):
            return await super().write(plan, snapshot)
        try:
            return await self._write_through(found, _Patch(writes))
        except OffsetdError as exc:  # a refused or timed-out write is read back before "unchanged"
            raise await self._after_failed_write(plan, snapshot, exc) from None

    async def _write_through(self, found: ConnectorResource, plan: Plan | _Patch) -> str:
        operation = "reset" if plan.patch is None else "alter"
        if plan.patch is not None:
            name = self.alter_configmap(found)
            body = json.dumps({"offsets": [e.as_json() for e in plan.patch]}, indent=2)
            await self.api.put_configmap(name, {found.configmap_key(): body}, _LABELS)
            wanted = {"fromConfigMap": {"name": name}}
            if found.spec.get("alterOffsets") != wanted:
                await self._set_spec(found, "alterOffsets", wanted)
        self.log(f"{found.label}: annotating {OFFSETS_ANNOTATION}={operation}")
        await self._operate(found, operation)
        return f"Strimzi applied {OFFSETS_ANNOTATION}={operation} on {found.label}"

    async def write_offsets(self, connector: str, patch: list[OffsetEntry]) -> str:
        found = await self.resource(connector)
        if found is None:
            return await super().write_offsets(connector, patch)
        plan_like = _Patch(tuple(patch))
        return await self._write_through(found, plan_like)

    async def restart_failed(self, connector: str) -> ConnectorState:
        """`strimzi.io/restart` for a FAILED connector, `strimzi.io/restart-task` for each FAILED
        task (one annotation value at a time); the answer marks what was restarted RESTARTING,
        as Connect's own restart answer does."""
        found = await self.resource(connector)
        if found is None:
            return await super().restart_failed(connector)
        status = await self.client.status(connector)
        restarted_connector = status.state == "FAILED"
        if restarted_connector:
            await self._annotate_and_wait(found, *found.restart_annotation(None))
        failed = [t.id for t in status.tasks if t.state == "FAILED"]
        for task in failed:
            await self._annotate_and_wait(found, *found.restart_annotation(task))
        return replace(
            status,
            state="RESTARTING" if restarted_connector else status.state,
            tasks=tuple(
                replace(t, state="RESTARTING") if t.id in failed else t for t in status.tasks
            ),
        )

    async def restart_tasks(self, connector: str, task_id: int | None) -> ConnectorState:
        """`strimzi.io/restart-task` (`restart-connector-task` on a KafkaMirrorMaker2) for one
        task, whatever its state; for None, the connector's restart annotation, then each
        task's (Strimzi's connector restart does not restart the tasks)."""
        found = await self.resource(connector)
        if found is None:
            return await super().restart_tasks(connector, task_id)
        if task_id is not None:
            await self._annotate_and_wait(found, *found.restart_annotation(task_id))
        else:
            await self._annotate_and_wait(found, *found.restart_annotation(None))
            for task in (await self.client.status(connector)).tasks:
                await self._annotate_and_wait(found, *found.restart_annotation(task.id))
        return await self.client.status(connector)

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        """Through `spec.config` (and `class`, `tasksMax`): a REST change would be put back."""
        found = await self.resource(connector)
        if found is None:
            await super().put_config(connector, config)
            return
        plain = {
            k: v for k, v in config.items() if k not in ("connector.class", "tasks.max", "name")
        }
        await self._set_spec(found, "config", plain)
        if found.kind == "KafkaConnector" and "tasks.max" in config:
            await self._set_spec(found, "tasksMax", int(config["tasks.max"]))
        wanted = {k: v for k, v in config.items() if k != "name"}

        async def applied() -> bool:  # the operator applies spec.config at its reconcile
            now = await self.client.config(connector)
            return {k: v for k, v in now.items() if k != "name"} == wanted

        await self._await_operator(f"apply the new spec.config of {found.label}", applied)

    async def auto_restarted_by(self, connector: str) -> str | None:
        found = await self.resource(connector)
        if found is None or not found.auto_restart:
            return None
        return f"Strimzi (spec.autoRestart of {found.label})"

    async def _annotate_and_wait(self, found: ConnectorResource, key: str, value: str) -> None:
        await self.api.patch(found.kind, found.name, {"metadata": {"annotations": {key: value}}})

        async def taken_away() -> bool:
            now = await locate(self.api, await self._require_connect(), found.connector)
            return key not in now.annotations

        await self._await_operator(f"act on {key}={value} on {found.label}", taken_away)

    async def read_back_offsets(self, connector: str) -> list[OffsetEntry]:
        found = await self.resource(connector)
        if found is None:
            return await super().read_back_offsets(connector)
        name = self.list_configmap(found)
        wanted = {"toConfigMap": {"name": name}}
        if found.spec.get("listOffsets") != wanted:
            await self._set_spec(found, "listOffsets", wanted)
        await self._operate(found, "list")
        data = await self.api.configmap_data(name) or {}
        raw = data.get(found.configmap_key())
        if raw is None:
            raise ChangeIncomplete(
                f"Strimzi listed the offsets of {found.label}, but ConfigMap {name} has no "
                f"key {found.configmap_key()}"
            )
        return entries_from_json(json.loads(raw).get("offsets") or [])

    async def _operate(self, found: ConnectorResource, operation: str) -> None:
        """Annotate, then wait until the operator took the annotation away (done) or wrote a
        warning condition about it (refused: the annotation is taken back, nothing retries)."""
        patched = await self.api.patch(
            found.kind,
            found.name,
            {"metadata": {"annotations": found.offsets_annotations(operation)}},
        )
        version = patched["metadata"]["resourceVersion"]
        reason = _REASONS[operation]
        last = found

        async def done() -> bool:
            nonlocal last
            last = await locate(self.api, await self._require_connect(), found.connector)
            if OFFSETS_ANNOTATION not in last.annotations:
                return True
            newer = last.resource["metadata"]["resourceVersion"] != version
            refused = [w for w in last.warnings() if reason in w or "ManageOffsets" in w]
            if newer and refused:
                await self._take_back(last)
                raise ConnectorRejected(
                    f"Strimzi refused {OFFSETS_ANNOTATION}={operation} on {found.label}: "
                    + "; ".join(refused)
                )
            return False

        async def take_back() -> None:
            await self._take_back(last)

        await self._await_operator(
            f"act on {OFFSETS_ANNOTATION}={operation} on {found.label}", done, take_back
        )

    async def _await_operator(
        self,
        what: str,
        done: Callable[[], Awaitable[bool]],
        give_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Poll `done` until it holds; past `operator_timeout`, `give_up` and say so."""
        limit_s = self.access.operator_timeout / 1000
        deadline = time.monotonic() + limit_s
        while not await done():
            if time.monotonic() >= deadline:
                if give_up is not None:
                    await give_up()
                raise ChangeIncomplete(
                    f"Strimzi did not {what} within {limit_s:g} s (is its operator running?)"
                )
            await asyncio.sleep(self.timeouts.poll_s)

    async def _set_priors(self, found: ConnectorResource, priors: dict[str, str | None]) -> None:
        value = json.dumps(priors, sort_keys=True) if priors else None
        await self.api.patch(
            found.kind, found.name, {"metadata": {"annotations": {PRIOR_STATES: value}}}
        )

    async def _set_spec(self, found: ConnectorResource, field: str, value: Any) -> None:
        operations = found.spec_patch(field, value)
        if operations:
            await self.api.patch(found.kind, found.name, operations, json_patch=True)

    async def _take_back(self, found: ConnectorResource) -> None:
        await self.api.patch(
            found.kind, found.name, {"metadata": {"annotations": found.offsets_annotations(None)}}
        )

    async def _require_connect(self) -> ConnectResource:
        connect = await self.managed_by()
        if connect is None:
            raise StrimziManaged(f"Connect cluster {self.connect_cluster} is no longer Strimzi's")
        return connect


def _priors(found: ConnectorResource) -> dict[str, str | None]:
    """The spec.state each connector had before offsetd stopped it (absent: None)."""
    raw = found.annotations.get(PRIOR_STATES)
    if not raw:
        return {}
    try:
        loaded = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): (None if v is None else str(v)) for k, v in loaded.items()}


def strimzi_owner_check(request: BackendRequest) -> Callable[[str], Awaitable[None]] | None:
    """For another backend's writes on this cluster (`--offline`): refuse a connector that a
    Strimzi resource describes, naming the resource; None without Strimzi access."""
    access = request.strimzi
    if access is None:
        return None
    backend = StrimziBackend.for_strimzi(request, access)

    async def check(connector: str) -> None:
        found = await backend.resource(connector)
        if found is not None:
            raise StrimziManaged(
                f"{connector} is managed by Strimzi through {found.label} in namespace "
                f"{backend.api.namespace}: a write that bypasses it would be undone at the "
                "operator's next reconcile; change it through that resource — run the same "
                "command without --offline and offsetd drives it"
            )

    return check


def strimzi_resources_backend(request: BackendRequest) -> OffsetsService:
    """The `strimzi` backend (offsetd.offsets.registry): needs the cluster's `strimzi` access."""
    access = request.strimzi
    if access is None:
        raise ValueError(f"Connect cluster {request.connect_cluster} has no strimzi access")
    return StrimziBackend.for_strimzi(request, access)
