"""The rewind plan job on a real Spark standalone cluster equals its local-mode plan (issue 18,
item 9).

A master and two workers (1 core and 1 GiB each) on loopback, from pyspark's own distribution
(`offsetd dev spark-cluster up`, `offsetd.devstack.spark_cluster`). The same job file
(`cli/spark_submit.py`) is submitted twice with the real `spark-submit`: `--master local[2]`,
then `--master spark://...` with the Kafka source's jars given as `--jars` (the driver serves
them to the executors). The input is four partitions of 20,000 JSON records, three with a known
bad window, read by a sink whose committed offsets are the log ends; the scan is split into
Spark tasks of 5,000 records, so both executors read Kafka and the per-partition aggregation is
shuffled between them. Both plans must equal each other and what the produced data implies, and
the master and both workers must have run the application. Both wall times are printed
(`pytest -s` shows them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyspark
import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError, Message, Producer

from offsetd.cli.spark_cluster import spark_cluster
from offsetd.devstack.spark_cluster import SparkClusterInfo, master_status
from offsetd.offsets.rewind_plan import summary_path
from offsetd.spark.jars import ensure_spark_kafka_jars
from tests.conftest import lane_dir
from tests.integration.conftest import REPO
from tests.integration.kafkautil import ConnectClient, create_topic, offset_of, unique, wait_for

PARTITIONS = 4
PER_PARTITION = 20_000
PER_TASK = 5_000  # 16 Spark tasks
BAD = {0: range(2_000, 2_300), 1: range(9_000, 9_050), 2: range(15_000, 15_001)}  # 3: none
SCHEMA = "p INT, i INT, status STRING"
PREDICATE = "value.status = 'bad'"
RUN_DIR = lane_dir() / "test-spark"  # the cluster is in its spark-cluster/ folder


@dataclass(frozen=True)
class Input:
    topic: str
    first_bad: dict[int, int]  # partition -> offset of its first bad record
    ends: dict[int, int]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkClusterInfo]:
    """A fresh cluster, through its command group (`offsetd dev spark-cluster`); one left behind
    by a killed run (same folder) is stopped first."""
    where = ["--run-dir", str(RUN_DIR)]
    CliRunner().invoke(spark_cluster, ["down", *where])
    started = CliRunner().invoke(spark_cluster, ["up", *where])
    assert started.exit_code == 0, started.output
    assert "spark-submit --master spark://127.0.0.1:" in started.output  # how to use it
    described = CliRunner().invoke(spark_cluster, ["env", "--json", *where])
    assert described.exit_code == 0, described.output
    info = SparkClusterInfo(**json.loads(described.stdout))
    print(f"spark cluster: {info.master_url}, 2 workers, up in {info.started_in_s} s")
    try:
        yield info
    finally:
        stopped = CliRunner().invoke(spark_cluster, ["down", *where])
        assert stopped.stdout == "stopped spark-worker-1, spark-worker-2, spark-master\n"


@pytest.fixture(scope="module")
def produced(west: str) -> Input:
    topic = unique("cluster-orders")
    create_topic(west, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": west, "linger.ms": 20, "enable.idempotence": True})
    offsets: dict[int, dict[int, int]] = {p: {} for p in range(PARTITIONS)}  # p -> i -> offset
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
            return
        body = json.loads(msg.value() or b"{}")
        offsets[body["p"]][body["i"]] = offset_of(msg)

    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            status = "bad" if i in BAD.get(p, ()) else "ok"
            value = json.dumps({"p": p, "i": i, "status": status}).encode()
            producer.produce(topic, value=value, partition=p, on_delivery=delivered)
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return Input(
        topic,
        {p: offsets[p][BAD[p][0]] for p in BAD},
        {p: max(offsets[p].values()) + 1 for p in range(PARTITIONS)},
    )


@pytest.fixture(scope="module")
def sink(
    produced: Input, connect: ConnectClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A sink created STOPPED whose committed offsets are the log ends (only its plan matters)."""
    name = unique("cluster-sink")
    out = tmp_path_factory.mktemp("sink") / "out.txt"
    response = connect.http.post(
        "/connectors",
        json={
            "name": name,
            "initial_state": "STOPPED",
            "config": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "topics": produced.topic,
                "file": str(out),
                "tasks.max": "1",
            },
        },
    )
    assert response.status_code == 201, response.text
    body = {
        "offsets": [
            {
                "partition": {"kafka_topic": produced.topic, "kafka_partition": p},
                "offset": {"kafka_offset": end},
            }
            for p, end in produced.ends.items()
        ]
    }
    wait_for(
        "the sink's offsets at the log ends",
        lambda: connect.http.patch(connect.path(name, "/offsets"), json=body).is_success or None,
        60,
    )
    yield name
    connect.delete(name)


@dataclass(frozen=True)
class Run:
    wall_s: float
    scan_s: float
    said: str
    plan: Path


def _submit(options: list[str], config: Path, connector: str, out: Path, cwd: Path) -> Run:
    jars = ",".join(str(p) for p in ensure_spark_kafka_jars(pyspark.__version__))
    venv_bin = Path(sys.executable).parent
    command = [str(venv_bin / "spark-submit"), *options, "--jars", jars]
    command += [str(REPO / "daemon" / "offsetd" / "cli" / "spark_submit.py")]
    command += ["--config", str(config), "--connector", connector, "--out", str(out)]
    command += ["--predicate", PREDICATE, "--value-schema", SCHEMA, "--mode", "first-match"]
    command += ["--max-records-per-task", str(PER_TASK)]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )
    wall = time.monotonic() - started
    said = done.stdout + done.stderr  # spark-submit hands the driver's stderr to stdout
    assert done.returncode == 0, said[-6000:]
    scanned = re.search(r"scanned [\d,]+ records in ([\d.]+) s", said)
    assert scanned, said[-3000:]
    return Run(wall, float(scanned.group(1)), said, out)


def _comparable(plan: Path) -> dict[str, Any]:
    """The plan's document and summary, without what differs between any two runs."""
    summary = json.loads(summary_path(plan).read_text())
    for key in ("created_at",):
        summary.pop(key)
    for key in ("elapsed_s", "records_per_s"):
        summary["totals"].pop(key)
    return {"document": json.loads(plan.read_text()), "summary": summary}


def test_the_plan_on_a_standalone_cluster_equals_the_local_plan(
    cluster: SparkClusterInfo,
    offsetd_yaml: Path,
    produced: Input,
    sink: str,
    tmp_path: Path,
) -> None:
    apps_before = {a["id"] for a in master_status(cluster.master_web_url)["completedapps"]}

    local = _submit(["--master", "local[2]"], offsetd_yaml, sink, tmp_path / "local.json", tmp_path)
    on_cluster = _submit(
        cluster.submit_options(), offsetd_yaml, sink, tmp_path / "cluster.json", tmp_path
    )
    print(
        f"\nrewind plan of {PARTITIONS * PER_PARTITION:,} records, spark-submit wall time: "
        f"local[2] {local.wall_s:.1f} s (scan {local.scan_s:.1f} s), standalone cluster "
        f"(2 workers x 1 core) {on_cluster.wall_s:.1f} s (scan {on_cluster.scan_s:.1f} s)"
    )

    # Each ran where it was told to, over the same 16 tasks.
    assert f"starting Spark {pyspark.__version__} (local[2])" in local.said
    assert f"starting Spark {pyspark.__version__} ({cluster.master_url})" in on_cluster.said
    tasks = f"scanning {PARTITIONS * PER_PARTITION:,} records in 4 of 4 partitions on west"
    for run in (local, on_cluster):
        assert tasks in run.said
        assert (
            f"({PARTITIONS * PER_PARTITION // PER_TASK} Spark tasks of at most 5,000)" in run.said
        )

    # The same plan, and the one the data implies.
    assert _comparable(on_cluster.plan) == _comparable(local.plan)
    document = json.loads(on_cluster.plan.read_text())
    targets = {
        e["partition"]["kafka_partition"]: e["offset"]["kafka_offset"] for e in document[sink]
    }
    assert targets == produced.first_bad
    totals = json.loads(summary_path(on_cluster.plan).read_text())["totals"]
    assert (totals["scanned"], totals["matched"]) == (
        PARTITIONS * PER_PARTITION,
        sum(len(r) for r in BAD.values()),
    )
    assert (totals["changed"], totals["unchanged"]) == (3, 1)

    # The master ran it as an application, with an executor on each worker.
    status = master_status(cluster.master_web_url)
    apps = [a for a in status["completedapps"] if a["id"] not in apps_before]
    assert [a["name"] for a in apps] == ["offsetd-rewind-plan"], status["completedapps"]
    app_id = apps[0]["id"]
    for worker in cluster.workers:
        seen = httpx.get(f"{worker['web_url']}/json/", timeout=10).json()
        ran = [e for e in seen["finishedexecutors"] + seen["executors"] if e["appid"] == app_id]
        assert ran, (worker["name"], seen)
