"""The `strimzi-manual` offsets backend: a cluster configured as Strimzi-run, without access.

Strimzi drives every connector back to its `spec.state` at each reconcile, so a REST
stop -> patch -> resume can be torn apart half-way. Without Kubernetes access (the cluster's
`strimzi` section, which selects the `strimzi` backend) this backend lists and plans like the
`rest` one, refuses to change offsets (the daemon's guards ask `write_refusal`), and gives the
Strimzi way to do the same change by hand.
"""

from __future__ import annotations

import json
from dataclasses import replace

from offsetd.errors import StrimziManaged
from offsetd.offsets.backend import BackendRequest, Refusal
from offsetd.offsets.change import Plan, nothing_to_change
from offsetd.offsets.documents import configmap_key, configmap_name
from offsetd.offsets.operations import RestRoute, rest_parts
from offsetd.offsets.sequence import ChangeSequence

__all__ = ["ManualRoute", "refusal", "strimzi_backend", "strimzi_refusal"]


class ManualRoute:
    """Plans like REST; a change that would write is refused with the custom-resource steps
    (one with nothing to write still says so, and touches nothing)."""

    def __init__(self) -> None:
        self.rest = RestRoute()

    async def admit(self, connector: str) -> None:
        await self.rest.admit(connector)

    async def shown(self, plan: Plan) -> Plan:
        return await self.rest.shown(plan)

    def refuse(self, plan: Plan) -> None:
        if nothing_to_change(plan) is None:
            raise StrimziManaged(refusal(plan))


def strimzi_refusal(connect_cluster: str) -> Refusal:
    """What the daemon's guards say before any writing action on such a cluster."""
    return Refusal(
        "refused_strimzi",
        "strimzi",
        f"Connect cluster {connect_cluster} is managed by Strimzi, which reverts REST changes; "
        f"give offsetd Kubernetes access (connect_clusters.{connect_cluster}.strimzi) to change "
        "it through its resources",
    )


def strimzi_backend(request: BackendRequest) -> ChangeSequence:
    """The `strimzi-manual` backend of a Connect cluster (offsetd.offsets.registry): REST
    parts, with the manual route and the guards' refusal."""
    parts = rest_parts(
        request.client, name="strimzi-manual", refusal=strimzi_refusal(request.connect_cluster)
    )
    return ChangeSequence.for_request(request, replace(parts, route=ManualRoute()))


def refusal(plan: Plan) -> str:
    operation = "reset" if plan.patch is None else "alter"
    lines = [
        f"{plan.connector} runs on a Strimzi-managed Connect cluster: Strimzi would resume a "
        "connector stopped through REST at its next reconcile, so offsetd does not change its "
        "offsets through REST. Do it through the custom resource instead:",
    ]
    if plan.writes is not None:
        body = json.dumps({"offsets": [e.as_json() for e in plan.writes]}, indent=2)
        indented = "\n".join("      " + line for line in body.splitlines())
        lines += [
            "1. create this ConfigMap:",
            "   apiVersion: v1",
            "   kind: ConfigMap",
            f"   metadata: {{name: {configmap_name(plan.connector)}}}",
            "   data:",
            f"     {configmap_key(plan.connector)}: |",
            indented,
        ]
        lines.append(
            "2. set spec.state: stopped on the KafkaConnector (or on the connector in the "
            "KafkaMirrorMaker2 spec) and wait until its status shows STOPPED"
        )
        lines.append(
            "3. set spec.alterOffsets.fromConfigMap.name to that ConfigMap, then annotate: "
            "strimzi.io/connector-offsets=alter"
        )
    else:
        lines.append(
            "1. set spec.state: stopped and wait until its status shows STOPPED, then annotate: "
            "strimzi.io/connector-offsets=reset"
        )
    if "->" in plan.connector:
        lines.append(
            "   (on a KafkaMirrorMaker2 also annotate "
            f"strimzi.io/mirrormaker-connector={plan.connector})"
        )
    lines.append(f"{len(lines)}. when the annotation is gone, set spec.state back to running")
    lines.append(f"(operation: {operation})")
    return "\n".join(lines)
