"""`/healthz` and `/readyz` of `offsetd run` on a real stack, through a Kafka stop and start and
a Connect stop and start.

The daemon's Kafka cluster is stopped for real (its broker process, by PID) while the daemon
runs: `/readyz` must turn 503 naming Kafka, `/healthz` stay 200 and the process stay up (unready,
not dead); after the broker is started again from the same data, `/readyz` is 200 again with the
same process. A stack of its own: stopping the shared stack's broker would disturb other tests.

About 2.5 minutes in one lane: its own stack starts (~25 s), its broker is stopped for 40 s and
started again, and Connect is stopped and started.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack import procs
from offsetd.devstack.stack import Stack, StackInfo
from tests.integration.daemonproc import Daemon, decide_only_config
from tests.integration.kafkautil import unique, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

OUTAGE_S = 40  # longer than the probes' staleness and faust's request timeouts' first retries


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, StackInfo]]:
    stack = Stack(tmp_path_factory.mktemp("health-stack"), log=print)
    info = stack.up(workers=1)
    try:
        yield stack, info
    finally:
        stack.down()


def _get(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(url, timeout=5)
    return response.status_code, response.json()


def _config(info: StackInfo, tmp_path: Path) -> tuple[Path, int]:
    rules = tmp_path / "rules"
    rules.mkdir()
    data = decide_only_config(
        info,
        tmp_path / "offsetd.yaml",
        app_id=unique("health"),
        rules_dir=rules,
        partitions=2,
        audit_topic=unique("offsetd.audit"),
        data_dir=tmp_path / "state",
    )
    data["daemon"]["health_probe_interval"] = "1s"
    with (tmp_path / "offsetd.yaml").open("w") as out:
        YAML().dump(data, out)
    return tmp_path / "offsetd.yaml", int(data["daemon"]["web_port"])


def test_readyz_follows_kafka_and_connect_while_healthz_stays_up(
    own_stack: tuple[Stack, StackInfo], tmp_path: Path
) -> None:
    stack, info = own_stack
    config, port = _config(info, tmp_path)
    base = f"http://127.0.0.1:{port}"
    daemon = Daemon(config, tmp_path / "daemon.log", port)
    daemon.start()
    try:
        assert daemon.proc is not None
        wait_for("/readyz 200", lambda: _get(f"{base}/readyz")[0] == 200, timeout_s=60)
        _, body = _get(f"{base}/readyz")
        assert body["ready"] is True
        assert set(body["checks"]) == {"kafka", "stream", "ingest", "connect:local"}
        assert all(check["ok"] for check in body["checks"].values()), body
        assert _get(f"{base}/healthz") == (200, {"alive": True, "detail": "ok"})

        [broker] = [r for r in stack.live_processes() if r.name == "kafka-west"]
        procs.stop([broker])
        outage_start = time.monotonic()

        def kafka_down() -> bool:
            code, page = _get(f"{base}/readyz")
            return code == 503 and not page["checks"]["kafka"]["ok"]

        wait_for("/readyz 503 naming Kafka", kafka_down, timeout_s=30)
        became_unready_s = time.monotonic() - outage_start
        _, page = _get(f"{base}/readyz")
        assert info.clusters["west"]["bootstrap.servers"] in page["checks"]["kafka"]["detail"]
        while time.monotonic() - outage_start < OUTAGE_S:  # the outage goes on: alive, unready
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            assert _get(f"{base}/healthz")[0] == 200
            assert _get(f"{base}/readyz")[0] == 503
            time.sleep(2)

        stack.spawn_extra("kafka-west", list(broker.argv))
        wait_for("/readyz 200 again", lambda: _get(f"{base}/readyz")[0] == 200, timeout_s=180)
        assert daemon.proc.poll() is None, "the daemon must live through the outage"
        _, page = _get(f"{base}/readyz")
        assert all(check["ok"] for check in page["checks"].values()), page
        print(f"unready {became_unready_s:.1f}s after the broker stopped")

        # Connect down: unready naming it, Kafka still fine; back when it is
        [worker] = [r for r in stack.live_processes() if r.name == "connect-1"]
        procs.stop([worker])

        def connect_down() -> bool:
            code, page = _get(f"{base}/readyz")
            checks = page["checks"]
            return code == 503 and not checks["connect:local"]["ok"] and checks["kafka"]["ok"]

        wait_for("/readyz 503 naming Connect", connect_down, timeout_s=30)
        _, page = _get(f"{base}/readyz")
        assert info.connect["url"].split("//")[1] in page["checks"]["connect:local"]["detail"]
        assert _get(f"{base}/healthz")[0] == 200
        stack.spawn_extra("connect-1", list(worker.argv))
        wait_for("/readyz 200 after Connect", lambda: _get(f"{base}/readyz")[0] == 200, 180)
        assert daemon.proc.poll() is None, "the daemon must live through the outage"
    finally:
        daemon.stop()


def test_a_daemon_started_while_kafka_is_down_waits_for_it(
    own_stack: tuple[Stack, StackInfo], tmp_path: Path
) -> None:
    """Pods start in any order: `offsetd run` before its Kafka cluster waits, saying so, rather
    than exit into a restart loop; it is ready once the broker answers."""
    stack, info = own_stack
    config, port = _config(info, tmp_path)
    [broker] = [r for r in stack.live_processes() if r.name == "kafka-west"]
    procs.stop([broker])
    daemon = Daemon(config, tmp_path / "daemon.log", port)
    try:
        try:
            daemon.start(wait=False)
            assert daemon.proc is not None
            wait_for("the daemon to say it waits", lambda: "not ready: " in daemon.log(), 90)
            time.sleep(10)
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
        finally:
            stack.spawn_extra("kafka-west", list(broker.argv))
        base = f"http://127.0.0.1:{port}"
        wait_for("/readyz 200", lambda: _ready(base), timeout_s=180)
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()  # also when a wait above failed: no daemon outlives its test


def _ready(base: str) -> bool:
    try:
        return _get(f"{base}/readyz")[0] == 200
    except httpx.HTTPError:
        return False
