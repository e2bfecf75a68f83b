"""Finding a connector's place in Strimzi's resources and the patches that drive it (pure)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectClient
from offsetd.errors import KubernetesError, StrimziManaged
from offsetd.offsets.backend import BackendRequest, OfflineOptions
from offsetd.offsets.registry import backend_name
from offsetd.offsets.snapshots import SnapshotStore
from offsetd.offsets.strimzi.parts import _priors
from offsetd.offsets.strimzi.resources import (
    PRIOR_STATES,
    ConnectorResource,
    ConnectResource,
    find_connect,
    gitops_owner,
    locate,
)


class FakeApi:
    """A table of resources by kind (unit tests of the lookup logic only; the integration
    tests use the real API server)."""

    namespace = "kafka"

    def __init__(self, **kinds: list[dict[str, Any]]) -> None:
        self.kinds = kinds

    async def list(self, kind: str) -> list[dict[str, Any]]:
        return self.kinds.get(kind, [])

    async def get(self, kind: str, name: str) -> dict[str, Any]:
        for doc in self.kinds.get(kind, []):
            if doc["metadata"]["name"] == name:
                return doc
        raise KubernetesError(f"no {kind} {name}", status=404)


def connect(name: str, url: str | None, enabled: bool = True) -> dict[str, Any]:
    notes = {"strimzi.io/use-connector-resources": "true"} if enabled else {}
    return {"metadata": {"name": name, "annotations": notes}, "status": {"url": url}}


def mm2_v1() -> dict[str, Any]:
    return {
        "metadata": {"name": "mm2"},
        "spec": {
            "target": {"alias": "west"},
            "mirrors": [
                {"source": {"alias": "north"}, "sourceConnector": {"tasksMax": 1}},
                {"source": {"alias": "east"}, "sourceConnector": {"state": "Paused"},
                 "checkpointConnector": {}},
            ],
        },
    }  # fmt: skip


def mm2_v1beta2() -> dict[str, Any]:
    return {
        "metadata": {"name": "mm2"},
        "spec": {
            "mirrors": [
                {"sourceCluster": "east", "targetCluster": "west", "sourceConnector": {}},
            ]
        },
    }


def test_the_kafka_connect_is_found_by_its_status_url_before_its_name() -> None:
    api = FakeApi(
        KafkaConnect=[connect("local", "http://other:8083"), connect("real", "http://c:8083/")]
    )
    found = asyncio.run(find_connect(api, name=None, url="http://c:8083", alias="local"))  # type: ignore[arg-type]
    assert found == ConnectResource("KafkaConnect", "real", "http://c:8083/")


def test_a_kafka_connect_without_connector_resources_is_not_strimzi_managed() -> None:
    api = FakeApi(KafkaConnect=[connect("local", "http://c:8083", enabled=False)])
    assert asyncio.run(find_connect(api, name=None, url="http://c:8083", alias="local")) is None  # type: ignore[arg-type]
    with pytest.raises(StrimziManaged, match="no KafkaConnect missing"):
        asyncio.run(find_connect(api, name="missing", url="http://c:8083", alias="local"))  # type: ignore[arg-type]


def test_an_mm2_connector_is_located_in_its_mirror_with_guarding_tests() -> None:
    api = FakeApi(KafkaMirrorMaker2=[mm2_v1()])
    found = asyncio.run(
        locate(api, ConnectResource("KafkaConnect", "c", None), "east->west.MirrorSourceConnector")  # type: ignore[arg-type]
    )
    assert found.pointer == "/spec/mirrors/1/sourceConnector"
    assert found.spec_state == "paused"  # case-insensitive, as Strimzi reads it
    assert found.spec_patch("state", "stopped") == [
        {"op": "test", "path": "/spec/mirrors/1/source/alias", "value": "east"},
        {"op": "add", "path": "/spec/mirrors/1/sourceConnector/state", "value": "stopped"},
    ]
    assert found.configmap_key() == "east--west.MirrorSourceConnector.json"
    assert found.offsets_annotations("alter") == {
        "strimzi.io/connector-offsets": "alter",
        "strimzi.io/mirrormaker-connector": "east->west.MirrorSourceConnector",
    }
    assert found.restart_annotation(2) == (
        "strimzi.io/restart-connector-task",
        "east->west.MirrorSourceConnector:2",
    )


def test_the_v1beta2_mirror_names_both_clusters_and_both_are_tested() -> None:
    api = FakeApi(KafkaMirrorMaker2=[mm2_v1beta2()])
    found = asyncio.run(
        locate(api, ConnectResource("KafkaConnect", "c", None), "east->west.MirrorSourceConnector")  # type: ignore[arg-type]
    )
    assert [op["path"] for op in found.spec_patch("state", None)] == []  # nothing to remove
    assert [op["path"] for op in found.spec_patch("state", "stopped")] == [
        "/spec/mirrors/0/sourceCluster",
        "/spec/mirrors/0/targetCluster",
        "/spec/mirrors/0/sourceConnector/state",
    ]


def test_a_connector_without_a_resource_or_of_another_cluster_is_named() -> None:
    other = {"metadata": {"name": "s", "labels": {"strimzi.io/cluster": "b"}}, "spec": {}}
    api = FakeApi(KafkaConnector=[other])
    with pytest.raises(StrimziManaged, match="has no KafkaConnector"):
        asyncio.run(locate(api, ConnectResource("KafkaConnect", "a", None), "missing"))  # type: ignore[arg-type]
    with pytest.raises(StrimziManaged, match="belongs to KafkaConnect b, not a"):
        asyncio.run(locate(api, ConnectResource("KafkaConnect", "a", None), "s"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("labels", "annotations", "owner"),
    [
        ({"argocd.argoproj.io/instance": "x"}, {}, "Argo CD (label argocd.argoproj.io/instance)"),
        ({}, {"argocd.argoproj.io/tracking-id": "x"},
         "Argo CD (annotation argocd.argoproj.io/tracking-id)"),
        ({"kustomize.toolkit.fluxcd.io/name": "x"}, {},
         "Flux (label kustomize.toolkit.fluxcd.io/name)"),
        ({"app.kubernetes.io/managed-by": "Helm"}, {}, None),
        ({}, {}, None),
    ],
)  # fmt: skip
def test_gitops_owners_are_recognised(
    labels: dict[str, str], annotations: dict[str, str], owner: str | None
) -> None:
    doc = {"metadata": {"labels": labels, "annotations": annotations}}
    assert gitops_owner(doc) == owner


def test_warnings_of_an_mm2_are_those_naming_the_connector() -> None:
    status = {"conditions": [
        {"type": "Warning", "reason": "AlterOffsets", "message": "a->b.MirrorSourceConnector: no"},
        {"type": "Warning", "reason": "AlterOffsets", "message": "c->b.MirrorSourceConnector: no"},
        {"type": "Ready", "status": "True"},
    ]}  # fmt: skip
    found = ConnectorResource(
        "KafkaMirrorMaker2", "m", "a->b.MirrorSourceConnector", "/spec", {}, {"status": status}
    )
    assert found.warnings() == ["AlterOffsets: a->b.MirrorSourceConnector: no"]


def test_the_prior_states_annotation_reads_back_and_tolerates_garbage() -> None:
    def with_notes(value: str) -> ConnectorResource:
        doc = {"metadata": {"annotations": {PRIOR_STATES: value}}}
        return ConnectorResource("KafkaConnector", "s", "s", "/spec", {}, doc)

    assert _priors(with_notes(json.dumps({"s": None, "t": "paused"}))) == {"s": None, "t": "paused"}
    assert _priors(with_notes("{not json")) == {}


def test_the_backend_is_chosen_from_flags_access_and_config() -> None:
    def name(orchestrator: str, *, offline: bool = False, kubernetes: bool = False) -> str:
        cluster = SimpleNamespace(
            orchestrator=orchestrator, strimzi=StrimziAccess(namespace="ns") if kubernetes else None
        )
        request = BackendRequest.for_cluster(
            "local",
            cluster,
            cast(ConnectClient, None),
            cast(SnapshotStore, None),
            offline=OfflineOptions() if offline else None,
        )
        return backend_name(request)

    assert name("strimzi", offline=True, kubernetes=True) == "offline"
    assert name("none", kubernetes=True) == "strimzi"
    assert name("strimzi") == "strimzi-manual"
    assert name("none") == "rest"
