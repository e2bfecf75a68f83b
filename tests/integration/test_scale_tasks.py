"""`scale-tasks` on the real stack, the daemon running before the connectors exist: a sink made
through Connect's REST API gets its `tasks.max` through REST, a Strimzi-managed one through its
KafkaConnector's `spec.tasksMax` (the stand-in operator applies it at its reconcile; a REST PUT
would be put back), and each is scaled exactly once — the RUNNING statuses of the new tasks
find it scaled already (`not_needed`), the guard rail against a rule that scales on every event.

The smallest action added through the catalogue (issue 33): its rule model and effects, its
spec and handler, one registry line; everything else — the guards, the Strimzi routing — is
what every writing action gets.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    unique,
    wait_for,
)
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_guardrails import daemon_setup
from tests.integration.test_skip_without_dlq import config_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def _scale_rule(folder: Path, prefix: str) -> None:
    for old in folder.glob("*.yaml"):
        old.unlink()
    rule = {
        "name": "two-tasks",
        "description": "Every task of this test's sinks: the connector runs two tasks.",
        "match": {"kind": "task_status", "state": "RUNNING", "connector": f"{prefix}-*"},
        "when": {"count": 1, "within": "10m", "key": ["connector", "task"]},
        "actions": [{"type": "scale-tasks", "to": 2}],
        "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
    }
    with (folder / "two-tasks.yaml").open("w") as out:
        YAML().dump(rule, out)


def _two_tasks(connect: ConnectClient, name: str) -> bool:
    status = connect.status(name)
    tasks = status["tasks"] if status is not None else []
    return config_of(connect, name).get("tasks.max") == "2" and len(tasks) == 2


def test_scale_tasks_through_rest_and_through_the_kafkaconnector(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path, strimzi_ns: Any
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=3.0)
    access = YAML(typ="safe").load(ns.config.read_text())["connect_clusters"]["local"]["strimzi"]
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(
        stack, tmp_path, mode="enforce", remediation=remediation, strimzi=access
    ) as setup:
        _scale_rule(Path(setup.data["daemon"]["rules_dir"]), setup.prefix)
        setup.start()  # before the connectors: their first RUNNING is read live
        names = {}
        for way in ("rest", "strimzi"):
            topic = unique(f"{setup.prefix}-{way}")
            create_topic(setup.west, topic, partitions=2)
            name = names[way] = f"{setup.prefix}-{way}".lower()
            config = json_file_sink(topic, tmp_path / f"{name}.txt", **{"tasks.max": "1"})
            if way == "rest":
                connect.create(name, config)
            else:
                ns.connector(name, config)
        for name in names.values():
            wait_for(f"{name} to run two tasks", partial(_two_tasks, connect, name), timeout_s=180)
        resource = ns.get("KafkaConnector", names["strimzi"])
        assert resource["spec"]["tasksMax"] == 2, resource["spec"]
        assert "tasks.max" not in (resource["spec"].get("config") or {})
        for way, name in names.items():
            executed = [r for r in setup.outcomes(name) if r["outcome"] == "executed"]
            assert len(executed) == 1, [(r["outcome"], r["message"]) for r in setup.outcomes(name)]
            assert executed[0]["message"] == "tasks.max 1 -> 2", executed[0]
            setup.wait_outcome(name, "not_needed")  # the new tasks' RUNNING: scaled already
            puts = [
                (c["method"], c["path"])
                for r in setup.audit()
                if r.get("connector") == name
                for c in r.get("http_calls") or []
                if c["method"] == "PUT"
            ]
            # REST: the one PUT of the config; Strimzi: none, the resource was changed
            assert puts == ([("PUT", f"/connectors/{name}/config")] if way == "rest" else [])
