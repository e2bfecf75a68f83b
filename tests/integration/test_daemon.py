"""`offsetd run` on the real stack: a poison record in a sink, decided on once, across a SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.stack import StackInfo
from tests.integration.daemonproc import Daemon, decide_only_config
from tests.integration.kafkautil import ConnectClient, create_topic, produce, unique, wait_for

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def daemon_config(stack: StackInfo, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    # Part 1's contract (decisions, counted once): its restarts and skips must not act here.
    path = tmp_path / "offsetd.yaml"
    data = decide_only_config(
        stack,
        path,
        app_id=unique("offsetd-test"),
        rules_dir=REPO / "rules" / "examples",
        partitions=4,
        audit_topic=unique("offsetd.audit"),
        data_dir=tmp_path / "state",
        dlq_topics=[unique("dlq-poison")],
    )
    return path, data


def _skips(west: str, topic: str, rule: str = "poison-record-skip") -> list[dict[str, Any]]:
    """The DLQ skip rule's decisions. (The located skip, for sinks without a DLQ, decides on the
    third FAILED status too, and is inhibited by the DLQ skip that came first.)"""
    return [
        r
        for r in read_records({"bootstrap.servers": west}, topic)
        if r.get("kind") is None  # a decision: not an outcome, not a tally of suppressed ones
        and r.get("rule") == rule
        and any(a.get("type") == "skip-record" for a in r.get("actions", []))
    ]


def test_poison_record_is_decided_once_after_the_third_failure_across_a_sigkill(
    connect: ConnectClient, west: str, tmp_path: Path, daemon_config: tuple[Path, dict[str, Any]]
) -> None:
    config, data = daemon_config
    dlq = data["connect_clusters"]["local"]["dlq_topics"][0]
    audit_topic = data["daemon"]["audit_topic"]
    topic, name = unique("poison"), unique("poison-sink")
    create_topic(west, topic)
    create_topic(west, dlq)
    daemon = Daemon(config, tmp_path / "daemon.log", data["daemon"]["web_port"])
    daemon.start()
    try:
        produce(west, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(5)])
        connect.create(
            name,
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "topics": topic,
                "file": str(tmp_path / "sink.txt"),
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "errors.tolerance": "none",
                "errors.deadletterqueue.topic.name": dlq,
                "errors.deadletterqueue.topic.replication.factor": "1",
                "errors.deadletterqueue.context.headers.enable": "true",
                "consumer.override.auto.offset.reset": "earliest",
            },
        )
        connect.wait_running(name)
        wait_for(
            "5 records committed",
            lambda: (
                (o := connect.offsets(name)["offsets"]) and o[0]["offset"] == {"kafka_offset": 5}
            ),
        )
        poison = produce(west, topic, [(b"bad", b"{not json")])[0]
        produce(west, topic, [(b"k6", b'{"n": 6}'), (b"k7", b'{"n": 7}')])

        def failed() -> bool:
            status = connect.status(name)
            return status is not None and [t["state"] for t in status["tasks"]] == ["FAILED"]

        def fail_again() -> None:
            response = connect.http.post(
                connect.path(name, "/restart"),
                params={"includeTasks": "true", "onlyFailed": "true"},
            )
            assert response.status_code in (200, 202, 204), response.text
            time.sleep(2)
            wait_for("the task to fail again", failed)

        # A record nobody can decode (no headers, not Connect's) is counted and skipped.
        produce(west, dlq, [(b"junk", b"\xff\xfe not a DLQ record")])
        wait_for("failure 1", failed)
        fail_again()  # failure 2
        time.sleep(5)  # let the daemon see failure 2 before it is killed
        assert _skips(west, audit_topic) == []
        assert f'offsetd_malformed_records_total{{topic="{dlq}"}} 1.0' in daemon.metrics()
        daemon.kill(signal.SIGKILL)
        daemon.start()
        time.sleep(5)
        assert _skips(west, audit_topic) == [], "nothing may fire before the third failure"
        fail_again()  # failure 3
        skips = wait_for("the skip decision", lambda: _skips(west, audit_topic), timeout_s=90)
        time.sleep(5)  # anything duplicated would show up by now
        skips = _skips(west, audit_topic)
        assert len(skips) == 1, skips
        decision = skips[0]
        assert decision["connector"] == name
        assert decision["record"] == {"topic": topic, "partition": 0, "offset": poison}
        assert decision["record_status"] == "exact"
        assert decision["rule"] == "poison-record-skip"

        # The FAILED status after the DLQ record: the located skip is inhibited by the DLQ skip,
        # which then does not run (every connector is opted out here), so it is decided again
        # (offsetd.engine.later) - and opted out in its turn. When the restarted daemon did not
        # know the connector's type yet (the located rule needs it), that FAILED status waited
        # for it (offsetd.engine.later) and may be decided only after the DLQ skip's release:
        # planned at once. Either way: one planned located skip, none run.
        def located_of_ours() -> list[dict[str, Any]]:
            found = _skips(west, audit_topic, "poison-record-skip-located")
            return [d for d in found if d["connector"] == name]

        def planned_located() -> list[dict[str, Any]] | None:
            found = located_of_ours()
            return found if any(d["outcome"] == "planned" for d in found) else None

        try:
            located = wait_for("the located skip decided (again)", planned_located, timeout_s=60)
        except AssertionError as timed_out:  # what was decided instead, readable from CI's output
            seen = [
                (r.get("rule"), r.get("kind"), r.get("outcome"), r.get("reason"))
                for r in read_records({"bootstrap.servers": west}, audit_topic)
                if r.get("connector") == name
            ]
            raise AssertionError(f"{timed_out}\naudit: {seen}\n{daemon.log()[-8000:]}") from None
        assert [(d["outcome"], d["reason"]) for d in located] == [("planned", None)], located
        # the inhibition, when it came first: counted, and tied to the DLQ skip that caused it
        held_back = [
            (r["outcome"], r["count"], r["incident"])
            for r in read_records({"bootstrap.servers": west}, audit_topic)
            if r.get("kind") == "suppressed"
            and r["connector"] == name
            and r["rule"] == "poison-record-skip-located"
        ]
        assert held_back in ([], [("suppressed_inhibited", 1, decision["id"])]), held_back
        metrics = daemon.metrics()
        assert "offsetd_events_total" in metrics
        skip_counter = 'mode="approve",outcome="planned",rule="poison-record-skip"} 1.0'
        assert f"offsetd_decisions_total{{{skip_counter}" in metrics
        shown = subprocess.run(
            [
                sys.executable,
                "-m",
                "offsetd",
                "history",
                "--config",
                str(config),
                "-o",
                "json",
                "--rule",
                "poison-record-skip",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        shown_records = json.loads(shown.stdout)
        assert [h["id"] for h in shown_records if h.get("kind") is None] == [decision["id"]]
        # Its outcome record: opted out (this test runs the decisions, not the remediation).
        outcomes = [h for h in shown_records if h.get("kind") == "remediation"]
        assert [(h["decision_id"], h["outcome"]) for h in outcomes] == [
            (decision["id"], "suppressed_opt_out")
        ]
    finally:
        daemon.kill(signal.SIGTERM)
        connect.delete(name)


def test_run_refuses_a_connect_cluster_on_another_kafka_cluster(
    stack: StackInfo, tmp_path: Path
) -> None:
    data = stack.offsetd_config()
    data["connect_clusters"]["local"]["kafka_cluster"] = "east"  # Connect really lives on west
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    result = subprocess.run(
        [sys.executable, "-m", "offsetd", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 20, result.stderr
    east_id, west_id = stack.clusters["east"]["cluster.id"], stack.clusters["west"]["cluster.id"]
    assert f"reports Kafka cluster id {west_id}" in result.stderr
    assert f"is {east_id}" in result.stderr
