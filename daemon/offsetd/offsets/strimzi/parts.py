"""The `strimzi` backend's parts: offsets and moves through a connector's resource.

Each part serves a connector that a KafkaConnector or a KafkaMirrorMaker2 describes through
that resource (`site.StrimziSite`), and hands every other connector — on a cluster Strimzi does
not manage — to the REST part it holds (composition: the same part `rest` uses).

- reader: `spec.listOffsets.toConfigMap` + `strimzi.io/connector-offsets=list`, the ConfigMap
  read (the read-back of a change, and `offsets list`);
- writer: the offsets ConfigMap, `spec.alterOffsets.fromConfigMap` +
  `strimzi.io/connector-offsets=alter` (`=reset` to delete), waiting for the operator;
- mover: `spec.state` (the state before noted on the resource, `PRIOR_STATES`, so a crash
  keeps it), the restart annotations, `spec.config` / `tasksMax`, `spec.autoRestart`;
- route: a GitOps-owned resource refused, and the resource changes a plan will make.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.connect.offsets import entries_from_json
from offsetd.errors import ChangeIncomplete, GitOpsManaged, StrimziManaged
from offsetd.offsets.change import Plan, nothing_to_change
from offsetd.offsets.documents import configmap_name
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.operations import RestMover, RestReader, RestRoute, RestWriter
from offsetd.offsets.strimzi.resources import (
    OFFSETS_ANNOTATION,
    PRIOR_STATES,
    ConnectorResource,
    gitops_owner,
)
from offsetd.offsets.strimzi.site import StrimziSite

__all__ = ["StrimziMover", "StrimziReader", "StrimziRoute", "StrimziWriter", "alter_configmap",
           "list_configmap"]  # fmt: skip

_SPEC_STATE = {"STOPPED": "stopped", "PAUSED": "paused", "RUNNING": "running"}
_LABELS = {"app.kubernetes.io/managed-by": "offsetd"}


def alter_configmap(found: ConnectorResource) -> str:
    return configmap_name(f"{found.name}-offsetd-alter")


def list_configmap(found: ConnectorResource) -> str:
    return configmap_name(f"{found.name}-offsetd-list")


class StrimziReader:
    """Offsets through `listOffsets` (as Strimzi's guide lists them)."""

    def __init__(self, site: StrimziSite, client: ConnectClient) -> None:
        self.site = site
        self.client = client
        self.rest = RestReader(client)

    async def require_api(self) -> None:
        await self.rest.require_api()

    async def offsets(self, connector: str) -> list[OffsetEntry]:
        """Through REST: Connect reports the offsets Strimzi would list, without a round of
        annotations (the before-image needs no operator)."""
        return await self.rest.offsets(connector)

    async def list_offsets(self, connectors: Sequence[str]) -> dict[str, list[OffsetEntry]]:
        """Through each connector's resource; a connector no resource describes through REST."""
        if await self.site.managed_by() is None:
            return await self.rest.list_offsets(connectors)
        await self.client.require_offsets_api()
        chosen = list(connectors) or await self.client.connector_names()
        listed = {}
        for name in chosen:
            try:
                listed[name] = await self.read_back(name)
            except StrimziManaged:
                listed[name] = await self.client.offsets(name)
        return listed

    async def read_back(self, connector: str) -> list[OffsetEntry]:
        found = await self.site.resource(connector)
        if found is None:
            return await self.rest.read_back(connector)
        name = list_configmap(found)
        wanted = {"toConfigMap": {"name": name}}
        if found.spec.get("listOffsets") != wanted:
            found = await self.site.set_spec(found, "listOffsets", wanted)
        await self.site.operate(found, "list")
        data = await self.site.api.configmap_data(name) or {}
        raw = data.get(found.configmap_key())
        if raw is None:
            raise ChangeIncomplete(
                f"Strimzi listed the offsets of {found.label}, but ConfigMap {name} has no "
                f"key {found.configmap_key()}"
            )
        return entries_from_json(json.loads(raw).get("offsets") or [])


class StrimziWriter:
    """Offsets through the `alterOffsets` ConfigMap and annotation (`=reset` to delete)."""

    def __init__(self, site: StrimziSite, client: ConnectClient) -> None:
        self.site = site
        self.rest = RestWriter(client)

    async def write(self, connector: str, writes: tuple[OffsetEntry, ...] | None) -> str:
        found = await self.site.resource(connector)
        if found is None:
            return await self.rest.write(connector, writes)
        operation = "reset" if writes is None else "alter"
        if writes is not None:
            name = alter_configmap(found)
            body = json.dumps({"offsets": [e.as_json() for e in writes]}, indent=2)
            await self.site.api.put_configmap(name, {found.configmap_key(): body}, _LABELS)
            wanted = {"fromConfigMap": {"name": name}}
            if found.spec.get("alterOffsets") != wanted:
                found = await self.site.set_spec(found, "alterOffsets", wanted)
        self.site.log(f"{found.label}: annotating {OFFSETS_ANNOTATION}={operation}")
        await self.site.operate(found, operation)
        return f"Strimzi applied {OFFSETS_ANNOTATION}={operation} on {found.label}"


class StrimziMover:
    """States through `spec.state`, restarts through annotations, config through the spec."""

    def __init__(self, site: StrimziSite, client: ConnectClient) -> None:
        self.site = site
        self.client = client
        self.rest = RestMover(client)

    async def request_state(self, connector: str, state: str) -> None:
        found = await self.site.resource(connector)
        if found is None:
            await self.rest.request_state(connector, state)
            return
        priors = _priors(found)
        wanted = _SPEC_STATE[state]
        if state == "STOPPED":
            if connector not in priors:  # durable before the spec moves: a crash keeps it
                found = await self.site.set_priors(found, {**priors, connector: found.spec_state})
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
            self.site.log(
                f"{found.label}: spec.state {found.spec_state or '(absent)'} -> "
                f"{value or '(absent)'}"
            )
            found = await self.site.set_spec(found, "state", value)
        if state != "STOPPED" and connector in priors:  # only once the spec is back
            await self.site.set_priors(found, {k: v for k, v in priors.items() if k != connector})

    async def restart_failed(self, connector: str) -> ConnectorState:
        """`strimzi.io/restart` for a FAILED connector, `strimzi.io/restart-task` for each FAILED
        task (one annotation value at a time); the answer marks what was restarted RESTARTING,
        as Connect's own restart answer does."""
        found = await self.site.locate(connector)
        if found is None:
            return await self.rest.restart_failed(connector)
        status = await self.client.status(connector)
        restarted_connector = status.state == "FAILED"
        if restarted_connector:
            found = await self.site.annotate_and_wait(found, *found.restart_annotation(None))
        failed = [t.id for t in status.tasks if t.state == "FAILED"]
        for task in failed:
            found = await self.site.annotate_and_wait(found, *found.restart_annotation(task))
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
        found = await self.site.locate(connector)
        if found is None:
            return await self.rest.restart_tasks(connector, task_id)
        if task_id is not None:
            await self.site.annotate_and_wait(found, *found.restart_annotation(task_id))
        else:
            found = await self.site.annotate_and_wait(found, *found.restart_annotation(None))
            for task in (await self.client.status(connector)).tasks:
                found = await self.site.annotate_and_wait(found, *found.restart_annotation(task.id))
        return await self.client.status(connector)

    async def put_config(self, connector: str, config: dict[str, str]) -> None:
        """Through `spec.config` and `tasksMax` (a KafkaConnector's, or the mirror connector's in
        a KafkaMirrorMaker2: both carry it as `tasks.max`): a REST change would be put back."""
        found = await self.site.locate(connector)
        if found is None:
            await self.rest.put_config(connector, config)
            return
        plain = {
            k: v for k, v in config.items() if k not in ("connector.class", "tasks.max", "name")
        }
        found = await self.site.set_spec(found, "config", plain)
        if "tasks.max" in config and (
            found.kind == "KafkaConnector"
            # a mirror's tasksMax is often left out: set only when the count changes
            or config["tasks.max"] != (await self.client.config(connector)).get("tasks.max")
        ):
            found = await self.site.set_spec(found, "tasksMax", int(config["tasks.max"]))
        wanted = {k: v for k, v in config.items() if k != "name"}

        async def applied() -> bool:  # the operator applies spec.config at its reconcile
            now = await self.client.config(connector)
            return {k: v for k, v in now.items() if k != "name"} == wanted

        await self.site.await_operator(f"apply the new spec.config of {found.label}", applied)

    async def auto_restarted_by(self, connector: str) -> str | None:
        found = await self.site.locate(connector)
        if found is None or not found.auto_restart:
            return None
        return f"Strimzi (spec.autoRestart of {found.label})"


class StrimziRoute:
    """Locates the connector's resource once for the change, refuses a GitOps-owned one, and
    shows the resource changes in order (`--dry-run`)."""

    def __init__(self, site: StrimziSite, access: StrimziAccess) -> None:
        self.site = site
        self.access = access
        self.rest = RestRoute()

    async def admit(self, connector: str) -> None:
        found = await self.site.locate(connector)
        if found is None:
            await self.rest.admit(connector)
            return
        owner = gitops_owner(found.resource)
        if owner is not None and not self.access.allow_gitops_managed:
            raise GitOpsManaged(
                f"{found.label} is managed by {owner}, which would put spec.state back as "
                "Strimzi puts REST back; change it through that controller, or set "
                f"connect_clusters.{self.site.connect_cluster}.strimzi.allow_gitops_managed"
            )

    async def shown(self, plan: Plan) -> Plan:
        found = await self.site.resource(plan.connector)
        if found is None:
            return await self.rest.shown(plan)
        route, configmap = self.resource_steps(found, plan)
        return replace(plan, route=route, notes=(*plan.notes, *configmap))

    def refuse(self, plan: Plan) -> None:
        self.rest.refuse(plan)

    def resource_steps(
        self, found: ConnectorResource, plan: Plan
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What `--dry-run` shows: the resource changes in order, and the ConfigMap written."""
        nothing = nothing_to_change(plan)
        if nothing is not None:
            return (f"{nothing}: {found.label} is not touched",), ()
        ns = self.site.api.namespace
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
            name = alter_configmap(found)
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
            f"read back: spec.listOffsets.toConfigMap.name: {list_configmap(found)}, "
            f"annotate {OFFSETS_ANNOTATION}=list; compare"
        )
        if moving:
            steps.append(
                f"spec.state back to {found.spec_state or '(absent: running)'}; wait until "
                f"the connector and its tasks are {plan.prior_state}"
            )
        return tuple(steps), configmap


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
