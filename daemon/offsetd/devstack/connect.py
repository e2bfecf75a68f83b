"""A Kafka Connect distributed worker (one or more in a group) on loopback, and its REST API."""

from __future__ import annotations

import ssl
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.ports import HOST
from offsetd.devstack.security import StackSecurity

__all__ = [
    "JSON_CONVERTER",
    "REQUIRED_PLUGINS",
    "ConnectRest",
    "WorkerGroup",
    "failure",
    "is_ready",
    "running",
]

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

# Plugins the stack promises; each must be loaded exactly once (no classpath + plugin.path twice).
REQUIRED_PLUGINS = (
    "org.apache.kafka.connect.file.FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector",
    "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
    JSON_CONVERTER,
    "org.apache.kafka.connect.transforms.InsertField$Value",
)


@dataclass(frozen=True)
class WorkerGroup:
    """The settings all workers of one Connect cluster share."""

    bootstrap: str
    group_id: str = "connect-cluster"
    offsets_topic: str = "connect-offsets"
    configs_topic: str = "connect-configs"
    status_topic: str = "connect-status"
    flush_interval_ms: int = 1000
    security: StackSecurity | None = None  # None: HTTP REST, PLAINTEXT clients

    @property
    def scheme(self) -> str:
        return "http" if self.security is None else "https"

    def worker_properties(self, rest_port: int) -> dict[str, str | int]:
        props = self._plain_properties(rest_port)
        if self.security is not None:
            props.update(self.security.connect_worker_properties(HOST, rest_port))
        return props

    def jvm_options(self) -> tuple[str, ...]:
        if self.security is None:
            return ()
        return self.security.connect_jvm_options()

    def _plain_properties(self, rest_port: int) -> dict[str, str | int]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.topic": self.offsets_topic,
            "offset.storage.replication.factor": 1,
            "config.storage.topic": self.configs_topic,
            "config.storage.replication.factor": 1,
            "status.storage.topic": self.status_topic,
            "status.storage.replication.factor": 1,
            "offset.flush.interval.ms": self.flush_interval_ms,
            "listeners": f"http://{HOST}:{rest_port}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": rest_port,
            # Plugins come from the classpath only; ServiceLoader manifests skip the slow scan.
            "plugin.discovery": "service_load",
            "connector.client.config.override.policy": "All",
            # A worker that leaves gets its tasks reassigned after 10 s, not the default 5 min.
            "scheduled.rebalance.max.delay.ms": 10000,
        }


class ConnectRest:
    """The few REST calls the stack itself needs (the offsets toolkit has the full client);
    `http` is its client (base URL, credentials, CA) for any other call."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 10.0,
        *,
        auth: tuple[str, str] | None = None,
        ca_file: str | None = None,
        cert: tuple[str, str] | None = None,
    ) -> None:
        """`cert`: a client certificate and its key, as PEM files (the mTLS stack)."""
        self.url = url
        verify: ssl.SSLContext | bool = True
        if ca_file is not None or cert is not None:
            verify = ssl.create_default_context(cafile=ca_file)
            if cert is not None:
                verify.load_cert_chain(*cert)
        self.http = httpx.Client(base_url=url, timeout=timeout_s, auth=auth, verify=verify)

    def close(self) -> None:
        self.http.close()

    def root(self) -> dict[str, Any]:
        response = self.http.get("/")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def plugins(self) -> list[tuple[str, str]]:
        """(class, type) pairs: a class may be both a converter and a header converter."""
        response = self.http.get("/connector-plugins", params={"connectorsOnly": "false"})
        response.raise_for_status()
        return [(p["class"], p["type"]) for p in response.json()]

    def put_config(self, name: str, config: dict[str, str]) -> None:
        """Create or update a connector; idempotent, so a retried start-up is harmless."""
        for attempt in range(10):
            response = self.http.put(f"/connectors/{quote(name, safe='')}/config", json=config)
            if response.status_code != 409:  # 409: the group is rebalancing
                break
            time.sleep(0.5 * (attempt + 1))
        if response.status_code >= 400:
            raise DevStackError(
                f"Connect refused connector {name} ({response.status_code}): {response.text[:300]}"
            )

    def config(self, name: str) -> dict[str, str]:
        response = self.http.get(f"/connectors/{quote(name, safe='')}/config")
        response.raise_for_status()
        return {str(k): str(v) for k, v in response.json().items()}

    def status(self, name: str) -> dict[str, Any] | None:
        response = self.http.get(f"/connectors/{quote(name, safe='')}/status")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def is_ready(rest: ConnectRest, kafka_cluster_id: str) -> bool:
    """`GET /` names our Kafka cluster and `GET /connector-plugins` lists every plugin once."""
    try:
        root = rest.root()
        plugins = Counter(rest.plugins())
    except (httpx.HTTPError, ValueError):
        return False
    if root.get("kafka_cluster_id") != kafka_cluster_id:
        return False
    loaded = Counter(cls for cls, _type in plugins)
    missing = [p for p in REQUIRED_PLUGINS if loaded[p] == 0]
    doubled = [f"{cls} ({kind})" for (cls, kind), n in plugins.items() if n > 1]
    if doubled:
        raise DevStackError(f"Connect loaded plugins more than once: {', '.join(doubled)}")
    return not missing


def running(status: dict[str, Any] | None, min_tasks: int) -> bool:
    if status is None or status["connector"]["state"] != "RUNNING":
        return False
    tasks = status.get("tasks", [])
    return len(tasks) >= min_tasks and all(t["state"] == "RUNNING" for t in tasks)


def failure(status: dict[str, Any] | None) -> str | None:
    """The first line of a FAILED connector's or task's trace, if any."""
    if status is None:
        return None
    for part in [status["connector"], *status.get("tasks", [])]:
        if part.get("state") == "FAILED":
            return str(part.get("trace", "no trace")).splitlines()[0]
    return None
