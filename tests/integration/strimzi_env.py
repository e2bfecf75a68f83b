"""A namespace of the real API server wired to the real Connect cluster, for the Strimzi tests.

Each `StrimziNamespace` holds a KafkaConnect `local` (with connector resources on) whose REST
URL is the test stack's Connect, offsetd's service account bound to exactly the shipped Role
(`offsetd.kubeconfig` of the namespace: never admin), and its own process of the stand-in
operator (`offsetd.devstack.strimzi_standin`, started and stopped by PID), so tests choose the
reconcile interval and never see each other's resources.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType
from ruamel.yaml import YAML

from offsetd.devstack import strimzi_resources
from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.stack import StackInfo
from offsetd.kube.api import GROUP, KINDS, Kind
from tests.integration.kafkautil import unique, wait_for

MM2_RESOURCE = "mirror"


@dataclass
class StrimziNamespace:
    kube: KubeCluster
    stack: StackInfo
    namespace: str
    version: str
    config: Path
    admin: Client
    offsetd_kubeconfig: Path
    log: Path
    standin: subprocess.Popen[bytes] | None = None
    created: list[str] = field(default_factory=list)

    # -- resources ---------------------------------------------------------------------------

    def kind(self, kind: Kind) -> Any:
        return create_namespaced_resource(GROUP, self.version, kind, KINDS[kind])

    def apply(self, doc: dict[str, Any]) -> None:
        strimzi_resources.apply_resource(self.admin, self.namespace, doc)

    def get(self, kind: Kind, name: str) -> dict[str, Any]:
        return dict(self.admin.get(self.kind(kind), name, namespace=self.namespace).to_dict())

    def patch(self, kind: Kind, name: str, body: Any, *, json_patch: bool = False) -> None:
        self.admin.patch(
            self.kind(kind),
            name,
            body,
            namespace=self.namespace,
            patch_type=PatchType.JSON if json_patch else PatchType.MERGE,
        )

    def configmap(self, name: str) -> dict[str, str] | None:
        try:
            found = self.admin.get(ConfigMap, name, namespace=self.namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return dict(found.data or {})

    def connector(self, name: str, config: dict[str, str], **extra_spec: Any) -> dict[str, Any]:
        """A KafkaConnector for `config`; the stand-in creates the connector on Connect."""
        doc = strimzi_resources.kafka_connector(
            name, self.version, "local", config, extra_spec=extra_spec
        )
        self.apply(doc)
        self.created.append(name)
        return doc

    # -- the stand-in operator ---------------------------------------------------------------------

    def start_standin(self, interval_s: float) -> None:
        self.stop_standin()
        url = self.stack.connect["url"]
        with self.log.open("ab") as out:
            self.standin = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "offsetd.devstack.strimzi_standin",
                    f"--kubeconfig={self.kube.info().admin_kubeconfig}",
                    f"--namespace={self.namespace}",
                    f"--connect=local={url}",
                    f"--connect={MM2_RESOURCE}={url}",
                    f"--interval={interval_s}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(
            "the stand-in's first reconcile",
            lambda: (self.get("KafkaConnect", "local").get("status") or {}).get("url"),
            30,
        )

    def stop_standin(self) -> None:
        if self.standin is not None and self.standin.poll() is None:
            self.standin.terminate()
            try:
                self.standin.wait(10)
            except subprocess.TimeoutExpired:
                self.standin.kill()
                self.standin.wait(10)
        self.standin = None

    def standin_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def new_namespace(
    kube: KubeCluster, stack: StackInfo, tmp: Path, *, prefix: str = "t"
) -> StrimziNamespace:
    namespace = unique(prefix).lower().replace("_", "-")[:40]
    offsetd_kubeconfig = kube.grant(namespace)
    version = kube.info().strimzi_api
    admin = kube.admin_client()
    topics = {
        "config": stack.connect["config.storage.topic"],
        "status": stack.connect["status.storage.topic"],
        "offset": stack.connect["offset.storage.topic"],
        "group": stack.connect["group.id"],
    }
    strimzi_resources.apply_resource(
        admin,
        namespace,
        strimzi_resources.kafka_connect(
            "local",
            version,
            bootstrap=stack.clusters["west"]["bootstrap.servers"],
            group_id=topics["group"],
            topics=topics,
        ),
    )
    config = stack.offsetd_config()
    config["connect_clusters"]["local"]["strimzi"] = {
        "namespace": namespace,  # the KafkaConnect is found by its status URL (detection)
        "kubeconfig": str(offsetd_kubeconfig),
        "operator_timeout": "60s",
    }
    path = tmp / f"offsetd-{namespace}.yaml"
    with path.open("w") as out:
        YAML().dump(config, out)
    return StrimziNamespace(
        kube, stack, namespace, version, path, admin, offsetd_kubeconfig, tmp / f"{namespace}.log"
    )


def wait_state(connect: Any, name: str, state: str, timeout_s: float = 60) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        status = connect.status(name)
        return status if status and status["connector"]["state"] == state else None

    return wait_for(f"{name} {state}", probe, timeout_s)


def offsets_json(connect: Any, name: str) -> str:
    return json.dumps(connect.offsets(name), sort_keys=True)


def hold(seconds: float) -> None:
    time.sleep(seconds)
