"""Strimzi resources that describe the local stack's real Connect cluster and connectors.

`dev up --k8s` and the tests create them as a Strimzi user would: a KafkaConnect with
`strimzi.io/use-connector-resources: "true"`, a KafkaConnector per connector (its `spec.config`
is the connector's config on Connect, so the stand-in operator finds nothing to put back), and a
KafkaMirrorMaker2 whose mirror describes the MM2 source and checkpoint connectors. Both API
versions are written: v1 (Strimzi 1.x: `target` + `mirrors[].source`) and v1beta2 (0.44-0.48:
`connectCluster`, `clusters[]`, `mirrors[].sourceCluster/targetCluster`).
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource

from offsetd.kube.api import GROUP, KINDS

__all__ = [
    "apply_resource",
    "kafka_connect",
    "kafka_connector",
    "kafka_mirror_maker_2",
]

_FIELD_MANAGER = "offsetd-devstack"
_SPLIT = ("connector.class", "tasks.max", "name")


def kafka_connect(
    name: str, version: str, *, bootstrap: str, group_id: str, topics: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "KafkaConnect",
        "metadata": {"name": name, "annotations": {"strimzi.io/use-connector-resources": "true"}},
        "spec": {
            "replicas": 1,
            "bootstrapServers": bootstrap,
            "groupId": group_id,
            "configStorageTopic": topics["config"],
            "statusStorageTopic": topics["status"],
            "offsetStorageTopic": topics["offset"],
        },
    }


def kafka_connector(
    name: str,
    version: str,
    cluster: str,
    config: dict[str, str],
    *,
    state: str | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A KafkaConnector whose spec is exactly `config` (as Connect holds it)."""
    spec: dict[str, Any] = {
        "class": config["connector.class"],
        "tasksMax": int(config.get("tasks.max", "1")),
        "config": {k: v for k, v in config.items() if k not in _SPLIT},
    }
    if state is not None:
        spec["state"] = state
    spec.update(extra_spec or {})
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": cluster}},
        "spec": spec,
    }


def kafka_mirror_maker_2(
    name: str,
    version: str,
    *,
    source: tuple[str, str],
    target: tuple[str, str],
    target_topics: dict[str, str],
    source_config: dict[str, str],
    checkpoint_config: dict[str, str] | None,
) -> dict[str, Any]:
    """One mirror source -> target; `(alias, bootstrap)` pairs; connector configs as on Connect."""

    def connector(config: dict[str, str]) -> dict[str, Any]:
        return {
            "tasksMax": int(config.get("tasks.max", "1")),
            "config": {k: v for k, v in config.items() if k not in _SPLIT},
        }

    mirror: dict[str, Any] = {"sourceConnector": connector(source_config)}
    if checkpoint_config is not None:
        mirror["checkpointConnector"] = connector(checkpoint_config)
    if version == "v1":
        mirror["source"] = {"alias": source[0], "bootstrapServers": source[1]}
        spec: dict[str, Any] = {
            "replicas": 1,
            "target": {
                "alias": target[0],
                "bootstrapServers": target[1],
                "groupId": target_topics["group"],
                "configStorageTopic": target_topics["config"],
                "statusStorageTopic": target_topics["status"],
                "offsetStorageTopic": target_topics["offset"],
            },
            "mirrors": [mirror],
        }
    else:
        mirror.update(sourceCluster=source[0], targetCluster=target[0])
        spec = {
            "replicas": 1,
            "connectCluster": target[0],
            "clusters": [
                {"alias": source[0], "bootstrapServers": source[1]},
                {"alias": target[0], "bootstrapServers": target[1]},
            ],
            "mirrors": [mirror],
        }
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": name},
        "spec": spec,
    }


def apply_resource(client: Client, namespace: str, doc: dict[str, Any]) -> None:
    """Create the resource, or replace its spec and metadata labels/annotations if it exists."""
    version = doc["apiVersion"].split("/", 1)[1]
    kind = create_namespaced_resource(GROUP, version, doc["kind"], KINDS[doc["kind"]])
    obj = kind.from_dict({**doc, "metadata": {**doc["metadata"], "namespace": namespace}})
    try:
        client.create(obj, namespace=namespace, field_manager=_FIELD_MANAGER)
    except ApiError as exc:
        if exc.status.code != 409:
            raise
        client.apply(obj, field_manager=_FIELD_MANAGER, force=True)
