"""The README's main job on the local stack: the pipeline healing itself from a poison record.

Brings the stack up if needed, writes `offsetd.yaml` for it (with the daemon section), starts
`offsetd run --enforce` with `rules/examples` as part of the stack (so `offsetd dev down`
stops it), creates a JSON sink connector with a dead letter queue, feeds it good records and one
that is not JSON, plays the operator who restarts the failed task twice, and waits until the
daemon has healed it: the poison record in quarantine, the connector RUNNING past it, and every
following record delivered. It returns the daemon's decisions and outcomes for that connector.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import find_pom
from offsetd.devstack.ports import free_ports
from offsetd.devstack.stack import Stack, StackInfo
from offsetd.remediation.quarantine import read_quarantined

__all__ = ["AUDIT_TOPIC", "QUARANTINE_TOPIC", "run_demo"]

TOPIC, DLQ = "demo-orders", "demo-orders-dlq"
AUDIT_TOPIC = "offsetd.audit"
QUARANTINE_TOPIC = "offsetd.quarantine"


def run_demo(
    stack: Stack,
    config_path: Path,
    say: Callable[[str], None],
    *,
    secure: bool = False,
    keep_daemon: bool = False,
) -> list[dict[str, Any]]:
    """`secure`: start a secure stack when none runs (a running one is used as it is); the
    daemon then runs as offsetd's own principal, the demo itself as the stack's admin.
    `keep_daemon`: the daemon an earlier demo started (with `config_path`) heals this one's
    poison record too, without a restart (a test of a long-running daemon)."""
    try:
        info = stack.info()
        say(f"using the running {'secure ' if info.security else ''}stack in {info.run_dir}")
    except DevStackError:
        say(f"starting the local {'secure ' if secure else ''}stack")
        info = stack.up(secure=secure)
    west = info.admin_config("west")
    if keep_daemon:
        if not any(r.name == "offsetd-run" for r in stack.live_processes()):
            raise DevStackError("keep_daemon: no daemon of an earlier demo runs")
        say("the daemon already running heals this one too")
    else:
        _start_daemon(stack, info, config_path, say)

    http = info.connect_rest(timeout_s=30).http  # the admin over HTTPS on a secure stack
    # A new name each run: a deleted connector's consumer group would resume at the poison record.
    connector = f"demo-orders-sink-{time.strftime('%H%M%S')}"
    path = f"/connectors/{quote(connector, safe='')}"
    http.put(
        f"{path}/config",
        json={
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": TOPIC,
            "file": str(Path(info.run_dir) / "data" / "demo-orders.txt"),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "none",
            "errors.deadletterqueue.topic.name": DLQ,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "consumer.override.auto.offset.reset": "latest",
        },
    ).raise_for_status()
    _wait("the sink to run", lambda: _task_states(http, path) == ["RUNNING"])
    time.sleep(3)  # let the consumer join before the records arrive
    offsets = _produce(west, [json.dumps({"order": 100 + i}).encode() for i in range(3)])
    poison = _produce(west, [b"{this is not json"])[0]
    _produce(west, [json.dumps({"order": 200}).encode()])
    say(f"produced a poison record at {TOPIC}-0@{poison} (after good ones at {offsets})")
    for failure in (1, 2):
        _wait(f"failure {failure}", lambda: _task_states(http, path) == ["FAILED"])
        say(f"the sink task failed ({failure}/3) on the poison record; restarting it")
        http.post(f"{path}/restart", params={"includeTasks": "true", "onlyFailed": "true"})
        time.sleep(2)
    # The third failure is not waited for here: offsetd acts on it within a second or two
    # (stopping the connector), faster than a status poll could be sure to see FAILED.
    conf = west
    say("on its third failure offsetd quarantines the record, skips it and verifies the sink")
    _wait(
        "the skip to be executed and verified",
        lambda: any(
            r.get("connector") == connector
            and r.get("kind") == "remediation"
            and r.get("outcome") == "executed"
            and "skip-record" in [a.get("type") for a in r.get("actions", [])]
            for r in read_records(conf, AUDIT_TOPIC)
        ),
        timeout_s=240,
    )
    sink = Path(info.run_dir) / "data" / "demo-orders.txt"
    _wait("order 200 in the sink", lambda: sink.exists() and "200" in sink.read_text())
    say(f"{connector} is {_task_states(http, path)} and delivered every record after the poison")
    for copy in read_quarantined(conf, QUARANTINE_TOPIC):
        original, ref = copy.original, copy.ref
        if copy.connector == connector and original is not None:
            say(
                f"quarantined: {original.topic}-{original.partition}@{original.offset} -> "
                f"{ref.topic}-{ref.partition}@{ref.offset}, value {copy.stored.value!r}"
            )
    return [r for r in read_records(conf, AUDIT_TOPIC) if r.get("connector") == connector]


def _start_daemon(
    stack: Stack, info: StackInfo, config_path: Path, say: Callable[[str], None]
) -> None:
    """Write the config (the daemon section on a free port) and start `offsetd run`."""
    port = free_ports(1)[0]
    _write_config(info, config_path, port)
    say(f"wrote {config_path}")
    _topics(info.admin_config("west"), [TOPIC, DLQ])
    repo = find_pom().parents[3]
    argv = [
        sys.executable,
        "-m",
        "offsetd",
        "run",
        "--config",
        str(config_path.resolve()),
        "--rules",
        str(repo / "rules" / "examples"),
        "--enforce",
    ]
    stack.spawn_extra("offsetd-run", argv)
    _wait(f"the daemon's /metrics on port {port}", lambda: _up(f"http://127.0.0.1:{port}/metrics"))
    say(f"offsetd run is up (enforce mode), metrics on http://127.0.0.1:{port}/metrics")


def _write_config(info: StackInfo, path: Path, port: int) -> None:
    data = info.offsetd_config()
    data["connect_clusters"]["local"]["dlq_topics"] = [DLQ]
    data["daemon"] = {
        "app_id": "offsetd-demo",
        "partitions": 4,
        "audit_topic": AUDIT_TOPIC,
        "web_port": port,
        "data_dir": str(Path(info.run_dir) / "daemon"),
    }
    data["remediation"] = {"quarantine_topic": QUARANTINE_TOPIC, "verify_stable_for": "10s"}
    with path.open("w") as out:
        out.write("# offsetd configuration for the local stack, written by `offsetd dev demo`.\n")
        YAML().dump(data, out)


def _topics(conf: dict[str, str], names: list[str]) -> None:
    admin = AdminClient(dict(conf))
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _produce(conf: dict[str, str], values: list[bytes]) -> list[int]:
    producer = Producer({**conf, "acks": "all"})
    offsets: list[int] = []
    for value in values:
        producer.produce(
            TOPIC,
            key=b"demo",
            value=value,
            partition=0,
            on_delivery=lambda _e, m: offsets.append(m.offset() or 0),
        )
    producer.flush(30)
    return offsets


def _task_states(http: httpx.Client, path: str) -> list[str]:
    response = http.get(f"{path}/status")
    return [t["state"] for t in response.json().get("tasks", [])] if response.is_success else []


def _up(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(what: str, probe: Callable[[], bool], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise DevStackError(f"the demo timed out waiting for {what}")
        time.sleep(1)
