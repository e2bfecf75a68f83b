"""The audit topic refuses writes while a connector fails: the daemon writes the planned decision
again until the audit takes it, acts on nothing before, and loses nothing.

A real broker refuses the writes: the test creates the audit topic with `max.message.bytes` far
below a decision record's size (MESSAGE_TOO_LARGE on every write, as a misconfigured or
over-restricted topic gives), starts `offsetd run`, and makes a sink's task fail at start. Its
FAILED status is decided while the audit refuses; once the topic's limit is restored, the
decision must arrive, once. Before this, the frame was given up ("could not decide on a frame;
skipped") and the decision was lost for good: a FAILED task sends no new status.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType as _AlterOp  # type: ignore[attr-defined]
from confluent_kafka.admin import ConfigEntry as _ConfigEntry  # type: ignore[attr-defined]
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from tests.integration.daemonproc import Daemon, decide_only_config
from tests.integration.kafkautil import ConnectClient, create_topic, unique, wait_for
from tests.integration.test_daemon_workers import failing_sink

pytestmark = pytest.mark.integration

RULE_NAME = "outage-failed"
RULE: dict[str, Any] = {
    "name": RULE_NAME,
    "description": "A FAILED task of the audit outage test.",
    "mode": "observe",
    "match": {"kind": ["task_status"], "state": "FAILED"},  # + this run's connector name
    "when": {"count": 1, "within": "10m"},
    "actions": [{"type": "notify", "severity": "warning", "summary": "a task failed"}],
    "limits": {"cooldown": "1h"},
}
REFUSED = "the audit did not take 1 planned decision(s) for local/{name}"


def set_max_message_bytes(admin: AdminClient, topic: str, value: int) -> None:
    entry = _ConfigEntry("max.message.bytes", str(value), incremental_operation=_AlterOp.SET)
    resource = _ConfigResource(_ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_a_decision_the_audit_refuses_is_written_again_until_it_takes_it(
    stack: StackInfo, connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    name = f"outage-{uuid.uuid4().hex[:6]}"
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = {**RULE, "match": {**RULE["match"], "connector": name}}
    (rules / "outage.yaml").write_text(json.dumps(rule))  # JSON is YAML
    audit_topic = unique("offsetd.audit")
    admin = AdminClient({"bootstrap.servers": west})
    config = {"cleanup.policy": "compact", "max.message.bytes": "64"}
    admin.create_topics([NewTopic(audit_topic, 1, 1, config=config)])[audit_topic].result(30)
    path = tmp_path / "offsetd.yaml"
    data = decide_only_config(
        stack,
        path,
        app_id=unique("offsetd-outage"),
        rules_dir=rules,
        partitions=2,
        audit_topic=audit_topic,
        data_dir=tmp_path / "state",
    )
    daemon = Daemon(path, tmp_path / "daemon.log", data["daemon"]["web_port"])
    topic = unique("outage-in")
    create_topic(west, topic)

    def decisions() -> list[dict[str, Any]]:
        return [
            r
            for r in read_records({"bootstrap.servers": west}, audit_topic)
            if r.get("kind") is None and r.get("rule") == RULE_NAME
        ]

    daemon.start()
    try:
        connect.create(name, failing_sink(topic, tmp_path))
        refused = REFUSED.format(name=name)
        wait_for("the audit to refuse the decision twice", lambda: daemon.log().count(refused) >= 2)
        assert decisions() == []
        assert daemon.metric("offsetd_decisions_total", rule=RULE_NAME) == 0
        assert daemon.metric("offsetd_audit_refusals_total") >= 2  # OffsetdAuditRefused reads it
        assert "could not decide on a frame" not in daemon.log()

        set_max_message_bytes(admin, audit_topic, 1 << 20)  # the audit takes records again
        [decision] = wait_for("the decision in the audit", decisions, timeout_s=90)
        assert decision["connector"] == name
        assert decision["outcome"] == "planned"
        time.sleep(3)  # a second copy of it would show up by now
        assert len(decisions()) == 1
        assert daemon.metric("offsetd_decisions_total", rule=RULE_NAME, outcome="planned") == 1
        assert daemon.log().count(refused) >= 2
        assert "could not decide on a frame" not in daemon.log()
    finally:
        daemon.stop()
        connect.delete(name)
