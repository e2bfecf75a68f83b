"""Skipping a record of a Strimzi-managed sink: offsetd's strimzi backend vs. a bare script.

    .venv/bin/offsetd dev up --detach --k8s --run-dir /tmp/bench-k8s
    .venv/bin/python bench/bench_strimzi.py --run-dir /tmp/bench-k8s [--pairs 5]

Both sides make the same change on the same KafkaConnector (a FileStreamSink of the stack,
created here): move its committed offset to the next record ("skip"), alternating between two
targets so each run changes something, with the stack's stand-in operator at its default 120 s
interval (it acts on the resource events). Both poll at 50 ms (the daemon's poll interval) and
use the `offsetd` service account's token.

- offsetd: the `strimzi` backend's `plan_alter` + `apply`: snapshot, prior-state annotation,
  `spec.state: stopped`, wait STOPPED, ConfigMap, `alterOffsets` + annotation, wait, read back
  through `listOffsets`, restore `spec.state`, wait RUNNING.
- bare: merge patches with httpx straight to the API server, as `kubectl patch` does:
  `spec.state: stopped`, poll REST until STOPPED, create/replace the ConfigMap, patch
  `alterOffsets` and the annotation, poll until the annotation is gone, remove `spec.state`,
  poll REST until RUNNING. No snapshot, no read-back.

Runs alternate offsetd, bare; the overhead of a pair is (offsetd - bare) / offsetd. Also timed:
one API-server round trip (GET of the KafkaConnector with the service account), 200 times.
Not a pytest test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from lightkube import Client, KubeConfig

from offsetd.config import load_settings
from offsetd.connect.client import ConnectClient
from offsetd.devstack.stack import Stack
from offsetd.devstack.strimzi_resources import apply_resource, kafka_connector
from offsetd.offsets.backend import BackendRequest, Timeouts
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.registry import stepwise_backend_for
from offsetd.offsets.snapshots.files import FileSnapshotStore

POLL_S = 0.05


def _until(done: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("the bare script waited in vain (is the stand-in operator running?)")
        time.sleep(POLL_S)


class Bare:
    """The hand-written way: httpx merge patches to the API server and Connect's REST."""

    def __init__(self, kubeconfig: Path, namespace: str, connect_url: str, version: str) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        token = config["users"][0]["user"]["token"]
        verify = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.kube = httpx.Client(
            base_url=cluster["server"],
            verify=verify,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        self.connect = httpx.Client(base_url=connect_url, timeout=30)
        self.base = f"/apis/kafka.strimzi.io/{version}/namespaces/{namespace}/kafkaconnectors"
        self.cm = f"/api/v1/namespaces/{namespace}/configmaps"

    def patch(self, name: str, body: dict[str, Any]) -> None:
        response = self.kube.patch(
            f"{self.base}/{name}",
            content=json.dumps(body),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        response.raise_for_status()

    def get(self, name: str) -> dict[str, Any]:
        response = self.kube.get(f"{self.base}/{name}")
        response.raise_for_status()
        return dict(response.json())

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.get(name)["metadata"].get("annotations") or {})

    def state(self, name: str) -> tuple[str, list[str]]:
        status = self.connect.get(f"/connectors/{quote(name, safe='')}/status").json()
        return status["connector"]["state"], [t["state"] for t in status["tasks"]]

    def skip(self, name: str, topic: str, offset: int) -> None:
        self.patch(name, {"spec": {"state": "stopped"}})
        _until(lambda: self.state(name) == ("STOPPED", []))
        doc = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                            "offset": {"kafka_offset": offset}}]}  # fmt: skip
        cm_name = f"{name}-bare-alter"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm_name},
                "data": {"offsets.json": json.dumps(doc)}}  # fmt: skip
        created = self.kube.post(self.cm, json=body)
        if created.status_code == 409:  # the Role grants create and patch, not update
            self.kube.patch(
                f"{self.cm}/{cm_name}",
                content=json.dumps({"data": body["data"]}),
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()
        else:
            created.raise_for_status()
        self.patch(
            name,
            {
                "metadata": {"annotations": {"strimzi.io/connector-offsets": "alter"}},
                "spec": {"alterOffsets": {"fromConfigMap": {"name": cm_name}}},
            },
        )
        while "strimzi.io/connector-offsets" in (
            self.get(name)["metadata"].get("annotations") or {}
        ):
            time.sleep(POLL_S)
        self.patch(name, {"spec": {"state": None}})
        _until(lambda: self.state(name) == ("RUNNING", ["RUNNING"]))


def _setup(stack_dir: Path) -> tuple[Any, str, str, Path]:
    info = Stack(stack_dir).info()
    if not info.kubernetes:
        raise SystemExit("start the stack with `offsetd dev up --detach --k8s`")
    west = info.clusters["west"]["bootstrap.servers"]
    name, topic = f"bench-sz-{uuid.uuid4().hex[:8]}", f"bench-sz-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": west})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": west})
    for i in range(20):
        producer.produce(topic, json.dumps({"n": i}).encode(), f"k{i}".encode())
    producer.flush(30)
    config = stack_dir / "bench-strimzi.yaml"
    config.write_text(json.dumps(info.offsetd_config(strimzi=True)))
    return info, name, topic, config


def _connector(info: Any, name: str, topic: str, out: Path) -> None:
    client = Client(config=KubeConfig.from_file(info.kubernetes["admin_kubeconfig"]))
    apply_resource(
        client,
        info.kubernetes["namespace"],
        kafka_connector(
            name,
            info.kubernetes["strimzi_api"],
            "local",
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "topics": topic,
                "file": str(out),
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                "consumer.override.auto.offset.reset": "earliest",
            },
        ),
    )
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    info, name, topic, config = _setup(args.run_dir)
    _connector(info, name, topic, args.run_dir / f"{name}.txt")
    kube = info.kubernetes
    bare = Bare(Path(kube["offsetd_kubeconfig"]), kube["namespace"], info.connect["url"],
                kube["strimzi_api"])  # fmt: skip
    while bare.connect.get(f"/connectors/{name}/status").status_code != 200 or bare.state(name) != (
        "RUNNING",
        ["RUNNING"],
    ):
        time.sleep(0.2)
    settings = load_settings(config, {})
    cluster = settings.connect_clusters["local"]

    async def offsetd_skip(offset: int) -> None:
        backend = stepwise_backend_for(
            BackendRequest.for_cluster(
                "local",
                cluster,
                ConnectClient.for_cluster(cluster),
                FileSnapshotStore(args.run_dir / "bench-snapshots"),
                settings=settings,
                timeouts=Timeouts(poll_s=POLL_S),
            )
        )
        assert backend.name == "strimzi"
        patch = [
            OffsetEntry({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": offset})
        ]
        await backend.apply(await backend.plan_alter(name, patch))

    rows = []
    for pair in range(1, args.pairs + 1):
        started = time.monotonic()
        asyncio.run(offsetd_skip(10 + pair % 2))
        ours = time.monotonic() - started
        started = time.monotonic()
        bare.skip(name, topic, 12 + pair % 2)
        theirs = time.monotonic() - started
        rows.append((pair, ours, theirs))
        print(f"pair {pair}: offsetd {ours:.2f} s, bare {theirs:.2f} s, overhead "
              f"{(ours - theirs) / ours:.0%}")  # fmt: skip
    trips = []
    for _ in range(200):
        started = time.perf_counter()
        bare.get(name)
        trips.append(time.perf_counter() - started)
    ours_med = statistics.median(r[1] for r in rows)
    bare_med = statistics.median(r[2] for r in rows)
    print(f"median: offsetd {ours_med:.2f} s, bare {bare_med:.2f} s, "
          f"overhead {(ours_med - bare_med) / ours_med:.0%} of offsetd's total")  # fmt: skip
    print(f"one API-server round trip (GET KafkaConnector): median "
          f"{statistics.median(trips) * 1000:.1f} ms, p90 "
          f"{statistics.quantiles(trips, n=10)[-1] * 1000:.1f} ms")  # fmt: skip
    bare.kube.delete(f"{bare.base}/{name}")
    bare.connect.delete(f"/connectors/{name}")


if __name__ == "__main__":
    main()
