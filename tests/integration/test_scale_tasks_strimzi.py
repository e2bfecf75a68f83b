"""`scale-tasks` on a Strimzi-managed sink, the daemon running before its KafkaConnector exists:
`tasks.max` goes from 1 to 2 through the resource's `spec.tasksMax` (the stand-in operator
applies it at its reconcile; a REST PUT would be put back at the next one, so offsetd makes
none), exactly once. Through REST: test_scale_tasks.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import ConnectClient
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_guardrails import daemon_setup
from tests.integration.test_scale_tasks import assert_scaled_once, scale_rule, sink_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def test_scale_tasks_through_the_kafkaconnector(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path, strimzi_ns: Any
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=3.0)
    access = YAML(typ="safe").load(ns.config.read_text())["connect_clusters"]["local"]["strimzi"]
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(
        stack, tmp_path, mode="enforce", remediation=remediation, strimzi=access
    ) as setup:
        scale_rule(Path(setup.data["daemon"]["rules_dir"]), setup.prefix)
        setup.start()  # before the resource: the connector's first RUNNING is read live
        name = f"{setup.prefix}-strimzi".lower()
        ns.connector(name, sink_config(setup, tmp_path, name))
        puts = assert_scaled_once(setup, connect, name)
        assert puts == []  # the resource was changed, not Connect
        spec = ns.get("KafkaConnector", name)["spec"]
        assert spec["tasksMax"] == 2, spec
        assert "tasks.max" not in (spec.get("config") or {}), spec
