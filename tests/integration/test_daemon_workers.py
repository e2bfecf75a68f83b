"""Two `offsetd run` workers share the connectors: one owner per connector, each decision once.

Both workers run the same app (one consumer group, one internal events topic of 4 partitions).
The connectors' names are chosen so that their owner keys (`local/<name>`, murmur2 like the
ingest's producer) cover all 4 partitions, so whichever way the group splits the partitions,
both workers own some of the failing connectors. Every task of those sinks fails at start (its
file's folder does not exist), and a count-1 rule decides on every FAILED task status: the audit
topic must hold exactly one decision per connector, though the second worker joins while the
first is running (a rebalance moves partitions and their state between them), and both workers
must have decided some.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from offsetd.offsets.offline.javahash import java_partition
from tests.integration.daemonproc import Daemon, free_port
from tests.integration.kafkautil import ConnectClient, create_topic, unique, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 4
RULE = {
    "name": "workers-failed",
    "description": "Every FAILED task of the workers test, decided once.",
    "mode": "observe",
    "match": {"kind": ["task_status"], "state": "FAILED"},  # + this run's connector names
    "when": {"count": 1, "within": "10m"},
    "actions": [{"type": "notify", "severity": "warning", "summary": "a task failed"}],
    "limits": {"cooldown": "1h"},
}


def connector_names(run: str) -> tuple[list[str], list[str]]:
    """Two rounds of names, each with one name per partition of the events topic (owner key
    `local/<name>`), so that each round has connectors on every partition."""
    by_partition: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for i in itertools.count():
        name = f"workers-{run}-{i}"
        slot = by_partition[java_partition(f"local/{name}".encode(), PARTITIONS)]
        if len(slot) < 2:
            slot.append(name)
        if all(len(names) == 2 for names in by_partition.values()):
            break
    return [n[0] for n in by_partition.values()], [n[1] for n in by_partition.values()]


def owns_events(worker: Daemon, app_id: str) -> bool:
    """The worker reports its lag on partitions of the events topic: it was assigned some."""
    return f'topic="{app_id}-events"' in worker.metrics()


def worker_config(
    stack: StackInfo, home: Path, shared: dict[str, Any], worker: str
) -> tuple[Path, int]:
    data = stack.offsetd_config()
    port = free_port()
    data["daemon"] = {**shared, "web_port": port, "data_dir": str(home / worker)}
    data["remediation"] = {
        "opt_out": ["*"],
        "sagas_topic": shared["audit_topic"] + ".sagas",
        "control_topic": shared["audit_topic"] + ".control",
        "quarantine_topic": shared["audit_topic"] + ".quarantine",
    }
    data["lag"] = {"enabled": False}
    path = home / f"{worker}.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path, port


def test_two_workers_share_the_connectors_and_decide_each_once(
    stack: StackInfo, tmp_path: Path
) -> None:
    west = stack.clusters["west"]["bootstrap.servers"]
    run = uuid.uuid4().hex[:6]
    rule = {**RULE, "match": {**RULE["match"], "connector": f"workers-{run}-*"}}  # type: ignore[dict-item]
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "workers.yaml").write_text(json.dumps(rule))  # JSON is YAML
    shared = {
        "app_id": unique("offsetd-workers"),
        "partitions": PARTITIONS,
        "rules_dir": str(rules),
        "audit_topic": unique("offsetd.audit"),
    }
    workers: list[Daemon] = []
    for worker in ("a", "b"):
        config, port = worker_config(stack, tmp_path, shared, worker)
        workers.append(Daemon(config, tmp_path / f"{worker}.log", port))
    connect = ConnectClient(stack.connect["url"])
    audit_topic = str(shared["audit_topic"])

    def decisions() -> list[dict[str, Any]]:
        return [
            r
            for r in read_records({"bootstrap.servers": west}, audit_topic)
            if r.get("kind") is None and r.get("rule") == RULE["name"]
        ]

    first, second = connector_names(run)
    names = first + second
    app_id = str(shared["app_id"])
    topic = unique("workers-in")
    create_topic(west, topic)
    try:
        workers[0].start()
        # The first round fails while only worker a runs; b joins (a rebalance hands it some
        # partitions, with the state of the connectors on them); then the second round.
        for name in first:
            connect.create(name, failing_sink(topic, tmp_path))
        wait_for("worker a to decide the first round", lambda: len(decisions()) == len(first))
        workers[1].start()
        wait_for("worker b to own events partitions", lambda: owns_events(workers[1], app_id))
        for name in second:
            connect.create(name, failing_sink(topic, tmp_path))

        wait_for(
            "a decision for every failing connector",
            lambda: {r["connector"] for r in decisions()} == set(names),
            timeout_s=120,
        )
        time.sleep(5)  # any replay after the rebalance would have been decided again by now
        final = decisions()
        per_connector = {n: [r for r in final if r["connector"] == n] for n in names}
        assert {n: len(rs) for n, rs in per_connector.items()} == dict.fromkeys(names, 1)
        assert len({r["id"] for r in final}) == len(names)
        decided = [
            w.metric("offsetd_decisions_total", rule=str(RULE["name"]), outcome="planned")
            for w in workers
        ]
        assert all(count >= 1 for count in decided), decided
        assert sum(decided) == len(names), decided
        matches = [w.metric("offsetd_rule_matches_total", rule=str(rule["name"])) for w in workers]
        assert sum(matches) == len(names), matches
        # `offsetd history` (its table) shows each connector's decision once.
        shown = subprocess.run(
            [sys.executable, "-m", "offsetd", "history", "--config", str(workers[0].config),
             "--rule", str(rule["name"])],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert shown.splitlines()[0].split()[:2] == ["DECIDED", "AT"], shown
        # one row per connector: its decision, with its outcome (observe mode: dry_run) in it
        body = "\n".join(shown.splitlines()[1:])
        seen = {n: len(re.findall(rf"{re.escape(n)}(?!\d)", body)) for n in names}
        assert seen == dict.fromkeys(names, 1), shown
        assert all((" dry_run " in r or " planned " in r) for r in shown.splitlines()[1:]), shown
    finally:
        for daemon in workers:
            daemon.stop()
        for name in names:
            connect.delete(name)


def failing_sink(topic: str, home: Path) -> dict[str, str]:
    """A FileStreamSink whose task fails at start: the folder of its file does not exist."""
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "file": str(home / "no-such-folder" / "out.txt"),
    }
