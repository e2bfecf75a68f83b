"""A STAND-IN for Strimzi's cluster operator, for the local stack and the tests only.

Strimzi's operator is published to no registry reachable here, so this small reconciler plays
exactly the part of its documented behaviour that offsetd relies on (facts in
`shared/reference/connect-offsets.md` §5 and Strimzi's `AbstractConnectOperator`), against the
real API server and the real Connect REST API:

- every reconcile drives each connector's REST state to the resource's `spec.state`
  (absent: running): a connector stopped or paused through REST alone is resumed;
- it puts the resource's config back over config changed through REST (a KafkaConnector's whole
  config: `spec.config` + `class` + `tasksMax`; a KafkaMirrorMaker2 connector's `config` keys);
  a connector with a resource but none on Connect is created;
- `strimzi.io/connector-offsets=list` writes `GET .../offsets` into `listOffsets.toConfigMap`
  (key `offsets.json`, or `<connector with -> as -->.json` on a KafkaMirrorMaker2, whose
  connector is named by `strimzi.io/mirrormaker-connector`), merged into an existing ConfigMap,
  with an owner reference; `alter`/`reset` are refused with a warning condition unless REST says
  STOPPED, then PATCH/DELETE; the annotation is removed only on success, failures are warning
  conditions retried at the next reconcile;
- `strimzi.io/restart` and `strimzi.io/restart-task` (KafkaMirrorMaker2:
  `strimzi.io/restart-connector`, `strimzi.io/restart-connector-task=<name>:<id>`) restart
  through REST and are removed;
- `strimzi.io/pause-reconciliation: "true"` leaves the connector alone, only its status moves;
- status keeps `conditions`, `observedGeneration`, `connectorStatus` (KafkaMirrorMaker2:
  `connectors`), and the KafkaConnect / KafkaMirrorMaker2 `url`.

Reconciles run on resource events and every `--interval` seconds (Strimzi's
`STRIMZI_FULL_RECONCILIATION_INTERVAL_MS`, default 120 s). Deliberately NOT played: deleting
connectors that have no resource (the shared test stack holds many such connectors),
`autoRestart`, and everything about deploying Connect itself. offsetd's product code never
imports this module (an import-linter contract says so); it only sees the API server.

Why one module of over 500 lines: it runs as `python -m` and is the whole stand-in,
one reconcile loop read top to bottom; splitting it would spread the operator's behaviour that
the tests rely on over files nobody else imports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

__all__ = ["ConnectorTarget", "StandIn", "main"]

log = logging.getLogger("strimzi-standin")

GROUP = "kafka.strimzi.io"
OFFSETS = "strimzi.io/connector-offsets"
MM2_CONNECTOR = "strimzi.io/mirrormaker-connector"
PAUSE_RECONCILIATION = "strimzi.io/pause-reconciliation"
_FIELD_MANAGER = "strimzi-cluster-operator"
_STATES = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}


@dataclass
class ConnectorTarget:
    """One connector a resource describes: where its REST API is and what the spec wants."""

    resource_kind: str
    resource_name: str
    connector: str
    url: str
    spec: dict[str, Any]  # class, tasksMax, config, state, listOffsets, alterOffsets
    desired_config: dict[str, str]
    replace_config: bool  # KafkaConnector: the whole config; MM2: the listed keys


class StandIn:
    """Reconciles KafkaConnector and KafkaMirrorMaker2 resources of one namespace."""

    def __init__(
        self, client: Client, namespace: str, connect_urls: dict[str, str], version: str
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.connect_urls = connect_urls
        self.version = version
        self.kinds = {
            kind: create_namespaced_resource(GROUP, version, kind, plural)
            for kind, plural in (
                ("KafkaConnect", "kafkaconnects"),
                ("KafkaConnector", "kafkaconnectors"),
                ("KafkaMirrorMaker2", "kafkamirrormaker2s"),
            )
        }
        self.http = httpx.Client(timeout=30)
        self.wake = threading.Event()

    # -- the loop -----------------------------------------------------------------------------

    def run(self, interval_s: float) -> None:
        for kind in ("KafkaConnector", "KafkaMirrorMaker2"):
            threading.Thread(target=self._watch, args=(kind,), daemon=True).start()
        while True:
            self.wake.clear()
            try:
                self.reconcile_all()
            except Exception:
                log.exception("reconcile failed; next one in at most %s s", interval_s)
            self.wake.wait(interval_s)

    def _watch(self, kind: str) -> None:
        """Spec and annotation changes wake the loop (status changes, ours, do not)."""
        seen: dict[str, Any] = {}
        while True:
            try:
                for _type, obj in self.client.watch(self.kinds[kind], namespace=self.namespace):
                    meta = _doc(obj)["metadata"]
                    notes = json.dumps(meta.get("annotations") or {}, sort_keys=True)
                    key = (meta.get("generation"), notes)
                    if seen.get(meta["name"]) != key:
                        seen[meta["name"]] = key
                        self.wake.set()
            except Exception:  # the watch ended or failed: start a new one
                time.sleep(1)

    def reconcile_all(self) -> None:
        for name, url in self.connect_urls.items():
            self._mark_connect(name, url)
        for target, resource in self._targets():
            try:
                self.reconcile(target, resource)
            except Exception as exc:
                log.exception("reconciling %s failed", target.connector)
                self._status(target, resource, [_condition("Warning", "Reconcile", str(exc))])

    # -- one connector --------------------------------------------------------------------------

    def reconcile(self, target: ConnectorTarget, resource: GenericNamespacedResource) -> None:
        annotations = dict(resource.metadata.annotations or {})  # type: ignore[union-attr]
        if annotations.get(PAUSE_RECONCILIATION) == "true":
            self._status(target, resource, [_condition("ReconciliationPaused", "", "")])
            return
        if self._ensure_config(target):
            self.wake.set()  # just created: Connect answers for it only after its rebalance
            return
        self._restarts(target, resource, annotations)
        state = self._rest_state(target)
        self._drive_state(target, state)
        warnings = self._offsets(target, resource, annotations)
        self._status(target, resource, warnings)

    def _ensure_config(self, target: ConnectorTarget) -> bool:
        """Create the connector, or put the resource's config back; True when created."""
        response = self.http.get(f"{target.url}/connectors/{_q(target.connector)}/config")
        if response.status_code == 404:
            log.info("creating %s", target.connector)
            self._put_config(target, target.desired_config)
            time.sleep(0.5)
            return True
        response.raise_for_status()
        current = {k: v for k, v in response.json().items() if k != "name"}
        if target.replace_config:
            wanted = target.desired_config
        else:
            wanted = {**current, **target.desired_config}
        if current != wanted:
            log.info("putting the resource's config back on %s", target.connector)
            self._put_config(target, wanted)
        return False

    def _put_config(self, target: ConnectorTarget, config: dict[str, str]) -> None:
        url = f"{target.url}/connectors/{_q(target.connector)}/config"
        self.http.put(url, json=config).raise_for_status()

    def _rest_state(self, target: ConnectorTarget) -> dict[str, Any]:
        response = self.http.get(f"{target.url}/connectors/{_q(target.connector)}/status")
        response.raise_for_status()
        return dict(response.json())

    def _drive_state(self, target: ConnectorTarget, status: dict[str, Any]) -> None:
        wanted = _STATES.get(str(target.spec.get("state") or "running").lower(), "RUNNING")
        current = status["connector"]["state"]
        base = f"{target.url}/connectors/{_q(target.connector)}"
        if current in ("FAILED", "UNASSIGNED", "RESTARTING") or current == wanted:
            return
        log.info("%s is %s, its resource says %s", target.connector, current, wanted)
        if wanted == "RUNNING":
            self.http.put(f"{base}/resume").raise_for_status()
        elif wanted == "PAUSED":
            self.http.put(f"{base}/pause").raise_for_status()
        else:
            self.http.put(f"{base}/stop").raise_for_status()

    def _restarts(
        self, target: ConnectorTarget, resource: GenericNamespacedResource, notes: dict[str, str]
    ) -> None:
        base = f"{target.url}/connectors/{_q(target.connector)}"
        removals: dict[str, None] = {}
        if target.resource_kind == "KafkaConnector":
            if notes.get("strimzi.io/restart") == "true":
                self.http.post(f"{base}/restart").raise_for_status()
                removals["strimzi.io/restart"] = None
            task = notes.get("strimzi.io/restart-task")
            if task is not None:
                self.http.post(f"{base}/tasks/{int(task)}/restart").raise_for_status()
                removals["strimzi.io/restart-task"] = None
        else:
            if notes.get("strimzi.io/restart-connector") == target.connector:
                self.http.post(f"{base}/restart").raise_for_status()
                removals["strimzi.io/restart-connector"] = None
            named, _, task = notes.get("strimzi.io/restart-connector-task", "").rpartition(":")
            if named == target.connector and task.isdigit():
                self.http.post(f"{base}/tasks/{int(task)}/restart").raise_for_status()
                removals["strimzi.io/restart-connector-task"] = None
        if removals:
            self._annotate(resource, removals)

    def _offsets(
        self, target: ConnectorTarget, resource: GenericNamespacedResource, notes: dict[str, str]
    ) -> list[dict[str, str]]:
        operation = notes.get(OFFSETS)
        if operation in (None, "none"):
            return []
        if target.resource_kind == "KafkaMirrorMaker2" and notes.get(MM2_CONNECTOR) != (
            target.connector
        ):
            return []
        reason = {"list": "ListOffsets", "alter": "AlterOffsets", "reset": "ResetOffsets"}.get(
            str(operation)
        )
        if reason is None:
            return [_condition("Warning", "ManageOffsets", f"invalid {OFFSETS}: {operation}")]
        try:
            message = getattr(self, f"_{operation}_offsets")(target, resource)
        except _Refused as refused:
            return [_condition("Warning", reason, str(refused))]
        removals: dict[str, None] = {OFFSETS: None}
        if target.resource_kind == "KafkaMirrorMaker2":
            removals[MM2_CONNECTOR] = None
        self._annotate(resource, removals)
        log.info("%s offsets of %s: %s", operation, target.connector, message)
        return []

    def _list_offsets(self, target: ConnectorTarget, resource: GenericNamespacedResource) -> str:
        name = ((target.spec.get("listOffsets") or {}).get("toConfigMap") or {}).get("name")
        if not name:
            raise _Refused("listOffsets.toConfigMap.name is not set")
        response = self.http.get(f"{target.url}/connectors/{_q(target.connector)}/offsets")
        if response.status_code != 200:
            raise _Refused(f"GET offsets answered {response.status_code}: {response.text}")
        key = _configmap_key(target)
        owner = OwnerReference(
            apiVersion=f"{GROUP}/{self.version}",
            kind=target.resource_kind,
            name=target.resource_name,
            uid=str(resource.metadata.uid),  # type: ignore[union-attr]
        )
        body = json.dumps(response.json(), indent=2)
        try:
            existing = self.client.get(ConfigMap, name, namespace=self.namespace)
            data = {**(existing.data or {}), key: body}
            self.client.patch(
                ConfigMap,
                name,
                {"data": data, "metadata": {"ownerReferences": [owner.to_dict()]}},
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
                field_manager=_FIELD_MANAGER,
            )
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            self.client.create(
                ConfigMap(
                    metadata=ObjectMeta(name=name, ownerReferences=[owner]), data={key: body}
                ),
                namespace=self.namespace,
                field_manager=_FIELD_MANAGER,
            )
        return f"written to ConfigMap {name} under {key}"

    def _alter_offsets(self, target: ConnectorTarget, _resource: GenericNamespacedResource) -> str:
        self._require_stopped(target)
        name = ((target.spec.get("alterOffsets") or {}).get("fromConfigMap") or {}).get("name")
        if not name:
            raise _Refused("alterOffsets.fromConfigMap.name is not set")
        try:
            configmap = self.client.get(ConfigMap, name, namespace=self.namespace)
        except ApiError as exc:
            raise _Refused(f"ConfigMap {name}: {exc.status.message}") from None
        key = _configmap_key(target)
        raw = (configmap.data or {}).get(key)
        if raw is None:
            raise _Refused(f"ConfigMap {name} has no key {key}")
        url = f"{target.url}/connectors/{_q(target.connector)}/offsets"
        response = self.http.patch(url, content=raw, headers={"Content-Type": "application/json"})
        if response.status_code != 200:
            raise _Refused(f"PATCH offsets answered {response.status_code}: {response.text}")
        return str(response.json().get("message", ""))

    def _reset_offsets(self, target: ConnectorTarget, _resource: GenericNamespacedResource) -> str:
        self._require_stopped(target)
        response = self.http.delete(f"{target.url}/connectors/{_q(target.connector)}/offsets")
        if response.status_code != 200:
            raise _Refused(f"DELETE offsets answered {response.status_code}: {response.text}")
        return str(response.json().get("message", ""))

    def _require_stopped(self, target: ConnectorTarget) -> None:
        if self._rest_state(target)["connector"]["state"] != "STOPPED":
            raise _Refused("Connector is not in STOPPED state")

    # -- the resources ---------------------------------------------------------------------------

    def _targets(self) -> Iterator[tuple[ConnectorTarget, GenericNamespacedResource]]:
        urls = self._connect_urls()
        for resource in self.client.list(self.kinds["KafkaConnector"], namespace=self.namespace):
            doc = _doc(resource)
            cluster = (doc["metadata"].get("labels") or {}).get("strimzi.io/cluster", "")
            if cluster not in urls:
                continue
            spec = dict(doc.get("spec") or {})
            desired = {k: str(v) for k, v in (spec.get("config") or {}).items()}
            desired["connector.class"] = str(spec.get("class", ""))
            if spec.get("tasksMax") is not None:
                desired["tasks.max"] = str(spec["tasksMax"])
            name = str(doc["metadata"]["name"])
            target = ConnectorTarget(
                "KafkaConnector", name, name, urls[cluster], spec, desired, replace_config=True
            )
            yield target, resource
        for resource in self.client.list(self.kinds["KafkaMirrorMaker2"], namespace=self.namespace):
            doc = _doc(resource)
            name = str(doc["metadata"]["name"])
            url = self.connect_urls.get(name)
            if url is None:
                continue
            for connector, spec in _mm2_connectors(dict(doc.get("spec") or {})):
                desired = {k: str(v) for k, v in (spec.get("config") or {}).items()}
                if spec.get("tasksMax") is not None:  # a mirror connector's own tasksMax
                    desired["tasks.max"] = str(spec["tasksMax"])
                target = ConnectorTarget(
                    "KafkaMirrorMaker2", name, connector, url, spec, desired, replace_config=False
                )
                yield target, resource

    def _connect_urls(self) -> dict[str, str]:
        urls = {}
        for resource in self.client.list(self.kinds["KafkaConnect"], namespace=self.namespace):
            meta = _doc(resource)["metadata"]
            notes = meta.get("annotations") or {}
            enabled = notes.get("strimzi.io/use-connector-resources") == "true"
            if meta["name"] in self.connect_urls and enabled:
                urls[meta["name"]] = self.connect_urls[meta["name"]]
        return urls

    def _mark_connect(self, name: str, url: str) -> None:
        """A KafkaConnect's status shows its REST URL, as the operator writes it."""
        with contextlib.suppress(ApiError):
            doc = _doc(self.client.get(self.kinds["KafkaConnect"], name, namespace=self.namespace))
            if (doc.get("status") or {}).get("url") != url:
                generation = doc["metadata"].get("generation")
                self._patch_status(
                    "KafkaConnect",
                    name,
                    {
                        "url": url,
                        "observedGeneration": generation,
                        "conditions": [_condition("Ready", "", "")],
                    },
                )

    def _status(
        self,
        target: ConnectorTarget,
        resource: GenericNamespacedResource,
        conditions: list[dict[str, str]],
    ) -> None:
        generation = resource.metadata.generation  # type: ignore[union-attr]
        conditions = conditions or [_condition("Ready", "", "")]
        try:
            connector_status = self._rest_state(target)
        except httpx.HTTPError:
            connector_status = {}
        if target.resource_kind == "KafkaConnector":
            self._patch_status(
                target.resource_kind,
                target.resource_name,
                {
                    "observedGeneration": generation,
                    "conditions": conditions,
                    "connectorStatus": connector_status,
                    "tasksMax": target.spec.get("tasksMax"),
                },
            )
            return
        current = dict(_doc(resource).get("status") or {})
        connectors = [c for c in current.get("connectors", []) if c.get("name") != target.connector]
        connectors.append(connector_status)
        mine = [c for c in current.get("conditions", []) if c.get("reason") != target.connector]
        tagged = [
            {**c, "reason": c["reason"] or target.connector} if c["type"] != "Ready" else c
            for c in conditions
        ]
        self._patch_status(
            target.resource_kind,
            target.resource_name,
            {
                "url": target.url,
                "observedGeneration": generation,
                "connectors": connectors,
                "conditions": [c for c in mine if c["type"] != "Ready"] + tagged,
            },
        )

    def _patch_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        self.client.patch(
            self.kinds[kind].Status,
            name,
            {"status": status},
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
            field_manager=_FIELD_MANAGER,
        )

    def _annotate(self, resource: GenericNamespacedResource, changes: dict[str, None]) -> None:
        self.client.patch(
            type(resource),
            str(resource.metadata.name),  # type: ignore[union-attr]
            {"metadata": {"annotations": changes}},
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
            field_manager=_FIELD_MANAGER,
        )


def _doc(resource: Any) -> dict[str, Any]:
    """A resource as plain data (lightkube's generic resources are loosely typed)."""
    return dict(resource.to_dict())


class _Refused(Exception):
    """An offsets operation the operator refuses: a warning condition, retried later."""


def _q(name: str) -> str:
    return quote(name, safe="")


def _condition(kind: str, reason: str, message: str) -> dict[str, str]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }


def _configmap_key(target: ConnectorTarget) -> str:
    if target.resource_kind == "KafkaMirrorMaker2":
        return target.connector.replace("->", "--") + ".json"
    return "offsets.json"


def _mm2_connectors(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(connector name, its spec) of every mirror: v1 `target` + `mirrors[].source`, or
    v1beta2 `mirrors[].sourceCluster/targetCluster`."""
    target_alias = (spec.get("target") or {}).get("alias")
    for mirror in spec.get("mirrors") or []:
        source = (mirror.get("source") or {}).get("alias") or mirror.get("sourceCluster")
        target = target_alias or mirror.get("targetCluster")
        for field, kind in (
            ("sourceConnector", "MirrorSourceConnector"),
            ("checkpointConnector", "MirrorCheckpointConnector"),
        ):
            if mirror.get(field) is not None:
                yield f"{source}->{target}.{kind}", dict(mirror[field])


def served_version(client: Client) -> str:
    """The kafka.strimzi.io version this API server serves (v1 first, as Strimzi 1.x)."""
    for version in ("v1", "v1beta2"):
        kind = create_namespaced_resource(GROUP, version, "KafkaConnect", "kafkaconnects")
        try:
            list(client.list(kind, namespace="default", chunk_size=1))
        except httpx2.HTTPStatusError as exc:  # ApiError, or an unserved version's plain 404
            if exc.response.status_code == 404:
                continue
            raise
        return version
    raise SystemExit("the API server serves no kafka.strimzi.io version (apply the CRDs)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="strimzi-standin", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument(
        "--connect",
        action="append",
        default=[],
        metavar="RESOURCE=URL",
        help="a KafkaConnect or KafkaMirrorMaker2 resource and its Connect REST URL",
    )
    parser.add_argument("--interval", type=float, default=120.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    client = Client(config=KubeConfig.from_file(args.kubeconfig), field_manager=_FIELD_MANAGER)
    urls = dict(entry.split("=", 1) for entry in args.connect)
    version = served_version(client)
    log.info(
        "stand-in operator on %s (kafka.strimzi.io/%s), every %s s",
        args.namespace,
        version,
        args.interval,
    )
    StandIn(client, args.namespace, urls, version).run(args.interval)


if __name__ == "__main__":
    main()
