"""Strimzi-managed Connect clusters: what offsetd refuses, and the plan it prints instead.

Strimzi drives every connector back to its `spec.state` at each reconcile, so a REST
stop -> patch -> resume can be torn apart half-way. Until offsetd drives the custom resources
itself, it refuses to change offsets there and prints the Strimzi way to do the same change.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from offsetd.offsets.documents import configmap_key, configmap_name

if TYPE_CHECKING:
    from offsetd.offsets.operations import Plan

MM2_OFFSET_SYNCS_NOTE = (
    "the offset-syncs topic is left alone: writing tombstones into mm2-offset-syncs.*.internal "
    "breaks MirrorCheckpointConnector, and after a rewind MirrorSourceConnector emits fresh "
    "syncs for the replayed records itself"
)


def refusal(plan: Plan) -> str:
    operation = "reset" if plan.patch is None else "alter"
    lines = [
        f"{plan.connector} runs on a Strimzi-managed Connect cluster: Strimzi would resume a "
        "connector stopped through REST at its next reconcile, so offsetd does not change its "
        "offsets through REST. Do it through the custom resource instead:",
    ]
    if plan.patch is not None:
        body = json.dumps({"offsets": [e.as_json() for e in plan.patch]}, indent=2)
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
