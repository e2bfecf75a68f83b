"""Export of a MirrorSourceConnector with 10k partitions: offsetd vs a bare REST fetch.

Sets up (once) a STOPPED MirrorSourceConnector `bench-mm2-10k` whose offsets are set by PATCH,
then times, in the same run and interleaved, (a) the baseline: one `GET /offsets` with httpx and
`json.loads`, and (b) offsetd's export path: ConnectClient.offsets -> validated entries ->
the KIP-199 document serialised, and the Strimzi ConfigMap rendering. Prints medians and ratios.

    .venv/bin/python bench/bench_export.py --run-dir .offsetd/dev [--partitions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from offsetd.connect.client import ConnectClient
from offsetd.devstack.stack import Stack
from offsetd.offsets import documents

NAME = "bench-mm2-10k"


def setup(url: str, east: str, west: str, partitions: int) -> None:
    http = httpx.Client(base_url=url, timeout=120)
    path = f"/connectors/{quote(NAME, safe='')}"
    if http.get(path).status_code == 404:
        config = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": "east",
            "target.cluster.alias": "west",
            "source.cluster.bootstrap.servers": east,
            "target.cluster.bootstrap.servers": west,
            "topics": "bench-none",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
        }
        response = http.post(
            "/connectors", json={"name": NAME, "config": config, "initial_state": "STOPPED"}
        )
        response.raise_for_status()
    current = http.get(f"{path}/offsets").json()["offsets"]
    if len(current) >= partitions:
        return
    for _ in range(60):
        status = http.get(f"{path}/status")
        if status.status_code == 200 and status.json()["connector"]["state"] == "STOPPED":
            break
        time.sleep(1)
    entries = [
        {
            "partition": {"cluster": "east", "topic": f"bench-t{i // 100}", "partition": i % 100},
            "offset": {"offset": 1000 + i},
        }
        for i in range(partitions)
    ]
    response = http.patch(f"{path}/offsets", json={"offsets": entries})
    response.raise_for_status()


def baseline(url: str) -> int:
    response = httpx.get(f"{url}/connectors/{quote(NAME, safe='')}/offsets", timeout=120)
    response.raise_for_status()
    return len(json.loads(response.content)["offsets"])


async def offsetd_export(url: str) -> tuple[int, int]:
    async with ConnectClient(httpx.AsyncClient(base_url=url, timeout=120)) as client:
        entries = await client.offsets(NAME)
    kip199 = json.dumps(documents.export_document({NAME: entries}), indent=2)
    configmap = documents.configmaps({NAME: entries})
    return len(kip199), len(configmap)


def timed(func: Any) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run-dir", type=Path, default=Path(".offsetd/dev"))
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    info = Stack(args.run_dir).info()
    url = info.connect["url"]
    east, west = (info.clusters[c]["bootstrap.servers"] for c in ("east", "west"))
    setup(url, east, west, args.partitions)
    assert baseline(url) >= args.partitions
    base, ours = [], []
    for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
        base.append(timed(lambda: baseline(url)))
        ours.append(timed(lambda: asyncio.run(offsetd_export(url))))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"partitions: {baseline(url)}  rounds: {args.rounds}")
    print(f"baseline  GET /offsets + json.loads     median {b * 1000:8.1f} ms")
    print(f"offsetd   export (KIP-199 + ConfigMap)   median {o * 1000:8.1f} ms")
    print(f"ratio offsetd / baseline: {o / b:.2f}x")


if __name__ == "__main__":
    main()
