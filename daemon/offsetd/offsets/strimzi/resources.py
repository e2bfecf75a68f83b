"""The Strimzi resource behind a connector, and the patches that drive it.

A connector of a Strimzi-run Connect cluster is described by a KafkaConnector named after it
(label `strimzi.io/cluster=<KafkaConnect>`), or — a MirrorMaker 2 connector — by one mirror's
`sourceConnector` / `checkpointConnector` in a KafkaMirrorMaker2 (v1: `target.alias` and
`mirrors[].source.alias`; v1beta2: `mirrors[].sourceCluster/targetCluster`). `ConnectorResource`
holds where that connector's spec lives, so `spec.state`, `alterOffsets` and `listOffsets` are
patched at exactly that place (JSON patch with a `test` of the mirror's aliases, so a mirror
list edited meanwhile fails the patch instead of changing the wrong connector).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from offsetd.errors import KubernetesError, StrimziManaged
from offsetd.kube.api import Kind, KubeApi

__all__ = [
    "GITOPS_MARKS",
    "OFFSETS_ANNOTATION",
    "PRIOR_STATES",
    "USE_CONNECTOR_RESOURCES",
    "ConnectResource",
    "ConnectorResource",
    "find_connect",
    "gitops_owner",
    "locate",
    "reread",
    "with_doc",
]

OFFSETS_ANNOTATION = "strimzi.io/connector-offsets"
MM2_CONNECTOR_ANNOTATION = "strimzi.io/mirrormaker-connector"
USE_CONNECTOR_RESOURCES = "strimzi.io/use-connector-resources"
# On the resource while offsetd holds a connector stopped: {connector: its spec.state before}.
PRIOR_STATES = "offsetd.io/prior-spec-state"
# Labels and annotations by which Argo CD and Flux mark what they own and would re-sync.
GITOPS_MARKS = (
    ("label", "argocd.argoproj.io/instance", "Argo CD"),
    ("annotation", "argocd.argoproj.io/tracking-id", "Argo CD"),
    ("label", "app.kubernetes.io/managed-by=argocd", "Argo CD"),
    ("label", "kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("label", "helm.toolkit.fluxcd.io/name", "Flux"),
    ("label", "app.kubernetes.io/managed-by=flux", "Flux"),
)


@dataclass(frozen=True)
class ConnectResource:
    """The KafkaConnect (or KafkaMirrorMaker2) that runs a Connect cluster."""

    kind: Kind
    name: str
    url: str | None


@dataclass(frozen=True)
class ConnectorResource:
    """Where one connector's spec lives in a resource, and what that spec says now."""

    kind: Kind
    name: str
    connector: str
    pointer: str  # JSON pointer of the connector's spec: "/spec" or "/spec/mirrors/0/..."
    spec: dict[str, Any]
    resource: dict[str, Any]
    guards: tuple[dict[str, Any], ...] = ()  # JSON patch `test` operations for the pointer

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}" + (
            f" (connector {self.connector})" if self.kind == "KafkaMirrorMaker2" else ""
        )

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.resource.get("metadata", {}).get("annotations") or {})

    @property
    def spec_state(self) -> str | None:
        state = self.spec.get("state")
        return str(state).lower() if state is not None else None

    @property
    def auto_restart(self) -> bool:
        """Strimzi restarts this connector itself (`autoRestart.enabled`, true when present)."""
        auto = self.spec.get("autoRestart")
        return isinstance(auto, dict) and auto.get("enabled", True) is not False

    def configmap_key(self) -> str:
        if self.kind == "KafkaMirrorMaker2":
            return self.connector.replace("->", "--") + ".json"
        return "offsets.json"

    def spec_patch(self, field: str, value: Any) -> list[dict[str, Any]]:
        """JSON patch setting (or, with None, removing) one field of the connector's spec."""
        path = f"{self.pointer}/{field}"
        if value is None:
            if field not in self.spec:
                return []
            return [*self.guards, {"op": "remove", "path": path}]
        return [*self.guards, {"op": "add", "path": path, "value": value}]

    def offsets_annotations(self, operation: str | None) -> dict[str, str | None]:
        """The annotations that ask Strimzi to list/alter/reset (None: take them away)."""
        notes: dict[str, str | None] = {OFFSETS_ANNOTATION: operation}
        if self.kind == "KafkaMirrorMaker2":
            notes[MM2_CONNECTOR_ANNOTATION] = None if operation is None else self.connector
        return notes

    def restart_annotation(self, task: int | None) -> tuple[str, str]:
        """The annotation that restarts the connector (None) or one task, for this kind."""
        if self.kind == "KafkaMirrorMaker2":
            if task is None:
                return "strimzi.io/restart-connector", self.connector
            return "strimzi.io/restart-connector-task", f"{self.connector}:{task}"
        if task is None:
            return "strimzi.io/restart", "true"
        return "strimzi.io/restart-task", str(task)

    def warnings(self) -> list[str]:
        """This connector's warning conditions in the resource's status."""
        status = self.resource.get("status") or {}
        found = []
        for condition in status.get("conditions") or []:
            if condition.get("type") != "Warning":
                continue
            message = str(condition.get("message", ""))
            if self.kind == "KafkaMirrorMaker2" and self.connector not in message:
                continue
            found.append(f"{condition.get('reason', '')}: {message}")
        return found


async def find_connect(
    api: KubeApi, *, name: str | None, url: str, alias: str
) -> ConnectResource | None:
    """The KafkaConnect that manages this Connect cluster through connector resources: the one
    named `name`, else the one whose status URL is `url`, else one named like the alias."""
    candidates = await api.list("KafkaConnect")

    def uses_connector_resources(doc: dict[str, Any]) -> bool:
        notes = doc.get("metadata", {}).get("annotations") or {}
        return str(notes.get(USE_CONNECTOR_RESOURCES, "")).lower() == "true"

    def url_of(doc: dict[str, Any]) -> str | None:
        found = (doc.get("status") or {}).get("url")
        return str(found) if found else None

    wanted = url.rstrip("/")
    chosen = None
    if name is not None:
        chosen = next((d for d in candidates if d["metadata"]["name"] == name), None)
        if chosen is None:
            raise StrimziManaged(f"no KafkaConnect {name} in namespace {api.namespace}")
    else:
        chosen = next(
            (d for d in candidates if (url_of(d) or "").rstrip("/") == wanted),
            next((d for d in candidates if d["metadata"]["name"] == alias), None),
        )
    if chosen is None or not uses_connector_resources(chosen):
        return None
    return ConnectResource("KafkaConnect", chosen["metadata"]["name"], url_of(chosen))


async def locate(api: KubeApi, connect: ConnectResource, connector: str) -> ConnectorResource:
    """The resource that describes `connector`; StrimziManaged naming what is missing."""
    if "->" in connector:
        for doc in await api.list("KafkaMirrorMaker2"):
            found = _in_mirror_maker(doc, connector)
            if found is not None:
                return found
    try:
        doc = await api.get("KafkaConnector", connector)
    except KubernetesError as exc:
        if exc.status != 404:
            raise
        raise StrimziManaged(
            f"{connector} runs on the Strimzi-managed Connect cluster {connect.name}, but "
            f"namespace {api.namespace} has no KafkaConnector (or KafkaMirrorMaker2 mirror) "
            "for it; Strimzi deletes connectors without one — create it first"
        ) from None
    cluster = (doc["metadata"].get("labels") or {}).get("strimzi.io/cluster")
    if cluster != connect.name:
        raise StrimziManaged(
            f"KafkaConnector {connector} belongs to KafkaConnect {cluster}, not {connect.name}"
        )
    return ConnectorResource(
        "KafkaConnector", connector, connector, "/spec", dict(doc.get("spec") or {}), doc
    )


def with_doc(found: ConnectorResource, doc: dict[str, Any]) -> ConnectorResource:
    """The same connector's place in a newer version of its resource (a patch's answer, or a
    read while the operator works): no second search."""
    if found.kind == "KafkaMirrorMaker2":
        again = _in_mirror_maker(doc, found.connector)
        if again is None:
            raise StrimziManaged(f"{found.label} no longer describes {found.connector}")
        return again
    return replace(found, spec=dict(doc.get("spec") or {}), resource=doc)


async def reread(api: KubeApi, found: ConnectorResource) -> ConnectorResource:
    """The resource as it is now: one GET of the resource already found."""
    return with_doc(found, await api.get(found.kind, found.name))


def _in_mirror_maker(doc: dict[str, Any], connector: str) -> ConnectorResource | None:
    spec = doc.get("spec") or {}
    target_alias = (spec.get("target") or {}).get("alias")
    fields = {"MirrorSourceConnector": "sourceConnector",
              "MirrorCheckpointConnector": "checkpointConnector"}  # fmt: skip
    for index, mirror in enumerate(spec.get("mirrors") or []):
        source = (mirror.get("source") or {}).get("alias") or mirror.get("sourceCluster")
        target = target_alias or mirror.get("targetCluster")
        for kind, field in fields.items():
            if f"{source}->{target}.{kind}" != connector or mirror.get(field) is None:
                continue
            base = f"/spec/mirrors/{index}"
            guards: tuple[dict[str, Any], ...]
            if target_alias:
                guards = ({"op": "test", "path": f"{base}/source/alias", "value": source},)
            else:
                guards = (
                    {"op": "test", "path": f"{base}/sourceCluster", "value": source},
                    {"op": "test", "path": f"{base}/targetCluster", "value": target},
                )
            return ConnectorResource(
                "KafkaMirrorMaker2",
                doc["metadata"]["name"],
                connector,
                f"{base}/{field}",
                dict(mirror[field]),
                doc,
                guards,
            )
    return None


def gitops_owner(resource: dict[str, Any]) -> str | None:
    """'Argo CD (label argocd.argoproj.io/instance)' when a GitOps controller owns it."""
    meta = resource.get("metadata", {})
    where = {"label": meta.get("labels") or {}, "annotation": meta.get("annotations") or {}}
    for place, mark, controller in GITOPS_MARKS:
        key, _, value = mark.partition("=")
        present = where[place].get(key)
        if present is not None and (not value or str(present).lower() == value):
            return f"{controller} ({place} {mark})"
    return None
