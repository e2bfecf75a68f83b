"""`scale-tasks` on the real stack through Connect's REST API, the daemon running before the
connector exists: the sink's `tasks.max` goes from 1 to 2 with one PUT of its config, exactly
once — the RUNNING statuses of the new tasks find it scaled already (`not_needed`), the guard
rail against a rule that scales on every event. Through a KafkaConnector's `spec.tasksMax`:
test_scale_tasks_strimzi.py.

The smallest action added through the catalogue (issue 33): its rule model and effects, its
spec and handler, one registry line; everything else — the guards, the Strimzi routing — is
what every writing action gets.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

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
from tests.integration.test_guardrails import Setup, daemon_setup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def scale_rule(folder: Path, prefix: str) -> None:
    """The only rule: every RUNNING task of `<prefix>-*` asks for two tasks."""
    for old in folder.glob("*.yaml"):
        old.unlink()
    rule = {
        "name": "two-tasks",
        "mode": "enforce",
        "description": "Every task of this test's sinks: the connector runs two tasks.",
        "match": {"kind": "task_status", "state": "RUNNING", "connector": f"{prefix}-*"},
        "when": {"count": 1, "within": "10m", "key": ["connector", "task_id"]},
        "actions": [{"type": "scale-tasks", "to": 2}],
        "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
    }
    with (folder / "two-tasks.yaml").open("w") as out:
        YAML().dump(rule, out)


def sink_config(setup: Setup, tmp: Path, name: str) -> dict[str, str]:
    topic = unique(name)
    create_topic(setup.west, topic, partitions=2)
    return json_file_sink(topic, tmp / f"{name}.txt", **{"tasks.max": "1"})


def _two_tasks(connect: ConnectClient, name: str) -> bool:
    """Connect's config and status both say two tasks (asked again while Connect rebalances:
    a config change is one, and it answers 500 meanwhile)."""
    status = connect.status(name)
    config = connect.http.get(connect.path(name, "/config"))
    if status is None or config.status_code != 200:
        return False
    return config.json().get("tasks.max") == "2" and len(status["tasks"]) == 2


def assert_scaled_once(setup: Setup, connect: ConnectClient, name: str) -> list[tuple[str, str]]:
    """Two tasks, one `executed` outcome saying so, then `not_needed`; the PUTs offsetd made."""
    try:
        wait_for(f"{name} to run two tasks", partial(_two_tasks, connect, name), 180)
    except AssertionError as timed_out:  # what the daemon did instead, for CI's log
        done = [(r["outcome"], r.get("guard"), r["message"]) for r in setup.outcomes(name)]
        log = setup.daemon.log()[-4000:] if setup.daemon is not None else ""
        raise AssertionError(f"{timed_out}\noutcomes: {done}\nlog:\n{log}") from None
    setup.wait_outcome(name, "not_needed")  # the new tasks' RUNNING: scaled already
    executed = [r for r in setup.outcomes(name) if r["outcome"] == "executed"]
    assert len(executed) == 1, [(r["outcome"], r["message"]) for r in setup.outcomes(name)]
    assert executed[0]["message"] == "tasks.max 1 -> 2", executed[0]
    return [
        (c["method"], c["path"])
        for r in setup.audit()
        if r.get("connector") == name
        for c in r.get("http_calls") or []
        if c["method"] == "PUT"
    ]


def test_scale_tasks_through_connects_rest_api(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        scale_rule(Path(setup.data["daemon"]["rules_dir"]), setup.prefix)
        setup.start()  # before the connector: its first RUNNING is read live
        name = f"{setup.prefix}-rest".lower()
        connect.create(name, sink_config(setup, tmp_path, name))
        try:
            puts = assert_scaled_once(setup, connect, name)
            assert puts == [("PUT", f"/connectors/{name}/config")]
        finally:
            connect.delete(name)
