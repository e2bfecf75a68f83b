"""A brand-new deployment hears Connect at once: every start with a new app id decides.

Found in the field: faust created the events topic a few milliseconds before its group leader
read the metadata it assigned partitions on, the broker answering had not applied the topic yet,
and the agent got no events partition until the consumer's next metadata refresh five minutes
later, while /readyz said ready. Starting several daemons at once with new app ids on a broker
provokes it reliably (9 of 12 starts deaf with the old start-up, 4 at a time, on a fresh stack;
4 of 8 on the session's stack): the topic creations and joins race each other on 2 cores.
Here 2 rounds of 4 daemons start at once, each with its own app id and topics (none exist
before), and each must decide on a connector that is FAILED already; /readyz is polled from the
first moment, and must never say ready before the worker holds every events partition.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from tests.integration.daemonproc import Daemon, decide_only_config
from tests.integration.kafkautil import ConnectClient, create_topic, unique, wait_for

pytestmark = pytest.mark.integration

ROUNDS, AT_ONCE = 2, 4
PARTITIONS = 8
# From the process's start to the decision, 4 daemons starting together on 2 cores: ~10 s
# measured (a deaf start takes 5 minutes, the consumer's metadata refresh).
DECIDES_WITHIN_S = 45.0


def _rule(folder: Path, connector: str) -> Path:
    folder.mkdir()
    rule = {
        "name": "first-start-heard",
        "mode": "observe",
        "match": {"kind": "task_status", "state": "FAILED", "connector": connector},
        "when": {"count": 1, "within": "1h"},
        "actions": [{"type": "notify", "severity": "info", "summary": "heard"}],
    }
    with (folder / "heard.yaml").open("w") as out:
        YAML().dump(rule, out)
    return folder


class _Readiness(threading.Thread):
    """Polls /readyz every 50 ms from before the daemon listens; keeps every answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.samples: list[tuple[int, dict[str, Any]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                answer = httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2)
                self.samples.append((answer.status_code, answer.json()))
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.05)


def _decided(west: str, audit_topic: str, connector: str) -> bool:
    return any(
        r.get("rule") == "first-start-heard" and r.get("connector") == connector
        for r in read_records({"bootstrap.servers": west}, audit_topic)
    )


def test_every_new_deployment_decides_at_once_and_is_ready_only_with_its_partitions(
    stack: StackInfo, connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    topic, sink = unique("first-start"), unique("first-start-sink")
    create_topic(west, topic)
    # A sink whose task fails at start: its file's folder does not exist.
    connect.create(
        sink,
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(tmp_path / "missing-folder" / "sink.txt"),
        },
    )
    try:
        wait_for(
            "the sink's task FAILED",
            lambda: (
                [t["state"] for t in (connect.status(sink) or {}).get("tasks", [])] == ["FAILED"]
            ),
        )
        rules = _rule(tmp_path / "rules", sink)
        took: list[float] = []
        for round_no in range(ROUNDS):
            daemons: list[tuple[Daemon, str, _Readiness]] = []
            for i in range(AT_ONCE):
                folder = tmp_path / f"r{round_no}-d{i}"
                folder.mkdir()
                data = decide_only_config(
                    stack,
                    folder / "offsetd.yaml",
                    app_id=unique("offsetd-first"),
                    rules_dir=rules,
                    partitions=PARTITIONS,
                    audit_topic=unique("offsetd.audit"),
                    data_dir=folder / "state",
                )
                port = data["daemon"]["web_port"]
                daemon = Daemon(folder / "offsetd.yaml", folder / "daemon.log", port)
                readiness = _Readiness(port)
                daemons.append((daemon, data["daemon"]["audit_topic"], readiness))
            started = time.monotonic()
            for daemon, _audit, readiness in daemons:
                readiness.start()
                daemon.start(wait=False)
            try:
                for daemon, audit_topic, _readiness in daemons:
                    remaining = DECIDES_WITHIN_S - (time.monotonic() - started)
                    wait_for(
                        f"a decision by {daemon.config.parent.name}",
                        lambda a=audit_topic: _decided(west, a, sink),  # type: ignore[misc]
                        timeout_s=max(remaining, 0.1),
                    )
                    took.append(time.monotonic() - started)
                pollers = [r for _d, _a, r in daemons]
                wait_for(
                    "every daemon ready",
                    lambda p=pollers: all(r.samples and r.samples[-1][0] == 200 for r in p),  # type: ignore[misc]
                    timeout_s=30,
                )
            finally:
                for daemon, _audit, readiness in daemons:
                    readiness.done.set()
                    daemon.stop()
            for daemon, _audit, readiness in daemons:
                events = daemon.config.parent.name
                ready = [body for status, body in readiness.samples if status == 200]
                assert ready, events
                for body in ready:
                    stream = body["checks"]["stream"]["detail"]
                    assert f"holds {PARTITIONS} of the {PARTITIONS} partitions" in stream, body
                    assert body["checks"]["ingest"]["ok"], body
                unready = [body for status, body in readiness.samples if status == 503]
                assert unready, f"{events}: /readyz said ready from its first answer"
        assert len(took) == ROUNDS * AT_ONCE
        print(f"decided after {[round(t, 1) for t in took]} s")
    finally:
        connect.delete(sink)
