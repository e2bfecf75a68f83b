"""`offsetd dev` as a person runs it: a second, two-worker stack beside the session's stack."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from offsetd.config import load_settings
from offsetd.devstack import procs
from offsetd.devstack.mm2 import SOURCE_CONNECTOR
from offsetd.devstack.stack import Stack
from tests.integration.kafkautil import ConnectClient, wait_for

pytestmark = pytest.mark.integration


def offsetd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "offsetd", *args],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        check=False,
    )


def test_detached_two_worker_stack_env_config_and_down(tmp_path: Path) -> None:
    run_dir = str(tmp_path / "stack")
    started = offsetd("dev", "up", "--detach", "--workers", "2", "--run-dir", run_dir)
    try:
        assert started.returncode == 0, started.stderr
        env = json.loads(offsetd("dev", "env", "--json", "--run-dir", run_dir).stdout)
        assert set(env["clusters"]) == {"east", "west"}
        assert env["connect"]["url"] == env["connect"]["urls"][0]
        assert len(env["connect"]["urls"]) == 2

        # Both workers answer for the same group: each lists the MM2 set.
        for url in env["connect"]["urls"]:
            assert SOURCE_CONNECTOR in ConnectClient(url).http.get("/connectors").json()

        # The connectors and tasks are spread over both workers (a real group, not two clusters).
        def worker_ids() -> set[str] | None:
            ids = set()
            for entry in (
                ConnectClient(env["connect"]["url"])
                .http.get("/connectors", params={"expand": "status"})
                .json()
                .values()
            ):
                status = entry["status"]
                ids |= {status["connector"]["worker_id"]} | {
                    t["worker_id"] for t in status["tasks"]
                }
            return ids if len(ids) == 2 else None

        ids = wait_for("work on both workers", worker_ids)
        assert {f"127.0.0.1:{u.rsplit(':', 1)[1]}" for u in env["connect"]["urls"]} == ids

        config_path = tmp_path / "offsetd.yaml"
        written = offsetd("dev", "env", "--run-dir", run_dir, "--write-config", str(config_path))
        assert written.returncode == 0, written.stderr
        settings = load_settings(config_path, environ={})
        assert (
            settings.kafka_clusters["west"].bootstrap_servers
            == (env["clusters"]["west"]["bootstrap.servers"])
        )
        local = settings.connect_clusters["local"]
        assert str(local.url).rstrip("/") == env["connect"]["url"]
        assert local.kafka_cluster == "west"
        assert local.offsets_topic == "connect-offsets"
        # the lag statuses assume the flush interval the stack's workers really run with
        worker = (Path(run_dir) / "config" / "connect-worker-1.properties").read_text()
        flush_ms = int(worker.split("offset.flush.interval.ms=", 1)[1].split()[0])
        assert settings.lag.flush_interval == flush_ms == 1000

        records = procs.load(Path(run_dir) / "processes.json")
        assert sorted(r.name for r in records) == [
            "connect-1",
            "connect-2",
            "kafka-east",
            "kafka-west",
        ]
        assert all(r.matches_live_process() for r in records)
    finally:
        stopped = offsetd("dev", "down", "--run-dir", run_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(r.matches_live_process() for r in records)
    assert offsetd("dev", "env", "--run-dir", run_dir).returncode != 0


def test_a_taken_port_is_one_clear_sentence_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        result = offsetd(
            "dev", "up", "--detach", "--base-port", str(taken - 2), "--run-dir", str(tmp_path)
        )
    assert result.returncode == 3
    # Another program on the machine may hold a neighbour of the block too; ours is named.
    assert "127.0.0.1 cannot be bound" in result.stderr
    assert re.search(rf"\b{taken}\b", result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    assert procs.load(tmp_path / "processes.json") == []


def test_missing_java_names_the_problem(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python and offsetd, but no java
    result = offsetd("dev", "up", "--detach", "--run-dir", str(tmp_path), env=env)
    assert result.returncode == 3
    assert "java was not found on PATH: install Java 17 or newer" in result.stderr
    assert "Traceback" not in result.stderr


def _signal_masks(pid: int) -> dict[str, int]:
    """A process's caught, ignored and blocked signals (its main thread's), from /proc."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {name: int(fields[name], 16) for name in ("SigCgt", "SigIgn", "SigBlk")}


def test_foreground_up_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    run_dir = tmp_path / "fg"
    proc = subprocess.Popen(
        [sys.executable, "-m", "offsetd", "dev", "up", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the foreground stack", (run_dir / "stack.json").exists, 240)
        records = procs.load(run_dir / "processes.json")
        assert len(records) == 3
        assert all(r.matches_live_process() for r in records)
        # the stack catches Ctrl-C, neither ignored nor blocked, whatever the test process
        # passed down (a run once left it unanswered for 2 minutes: it now installs its own)
        masks = _signal_masks(proc.pid)
        bit = 1 << (signal.SIGINT - 1)
        assert (masks["SigCgt"] & bit, masks["SigIgn"] & bit, masks["SigBlk"] & bit) == (
            bit,
            0,
            0,
        ), masks
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            Stack(run_dir).down()
    assert proc.returncode == 0, stderr
    assert "stopping connect-1, kafka-east, kafka-west" in stderr
    assert not any(r.matches_live_process() for r in records)


def test_dev_up_k8s_gives_a_usable_strimzi_stack_and_down_stops_all_of_it(tmp_path: Path) -> None:
    """`--k8s` by hand: the v1beta2 CRDs, the resources, offsetd through them, the stand-in."""
    run_dir = tmp_path / "stack"
    started = offsetd(
        "dev", "up", "--detach", "--k8s", "--strimzi-crds", "0.45.0",
        "--reconcile-interval", "3", "--run-dir", str(run_dir),
    )  # fmt: skip
    kube_records: list[procs.ProcessRecord] = []
    records: list[procs.ProcessRecord] = []
    try:
        assert started.returncode == 0, started.stderr
        assert "stand-in operator every 3 s" in started.stdout
        env = json.loads(offsetd("dev", "env", "--json", "--run-dir", str(run_dir)).stdout)
        assert env["kubernetes"]["strimzi_api"] == "v1beta2"
        config = tmp_path / "strimzi.yaml"
        written = offsetd(
            "dev", "env", "--run-dir", str(run_dir), "--write-config", str(config), "--strimzi"
        )
        assert written.returncode == 0, written.stderr
        listed = offsetd("offsets", "list", "heartbeat-audit", "--config", str(config))
        assert listed.returncode == 0, listed.stderr
        assert "managed by Strimzi (KafkaConnect kafka/local)" in listed.stderr
        assert "heartbeats" in listed.stdout

        # The stand-in runs the resources: a REST-only stop is resumed within a reconcile.
        rest = ConnectClient(env["connect"]["url"])
        assert rest.http.put("/connectors/heartbeat-audit/stop").status_code == 204
        wait_for(
            "the stand-in to resume heartbeat-audit",
            lambda: (
                (s := rest.status("heartbeat-audit")) is not None
                and s["connector"]["state"] == "RUNNING"
            ),
            30,
        )
        records = procs.load(run_dir / "processes.json")
        kube_records = procs.load(run_dir / "k8s" / "processes.json")
        assert "strimzi-standin" in {r.name for r in records}
        assert sorted(r.name for r in kube_records) == ["etcd", "kube-apiserver"]
    finally:
        stopped = offsetd("dev", "down", "--run-dir", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert not any(r.matches_live_process() for r in [*records, *kube_records])
