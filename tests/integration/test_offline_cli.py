"""`offsetd offsets ... --offline` through the CLI, on STOPPED connectors of the shared worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsetd.devstack import mm2
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    string_file_source,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def _stop(connect: ConnectClient, name: str) -> None:
    connect.http.put(connect.path(name, "/stop"))

    def stopped() -> bool:
        status = connect.status(name)
        return (
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        )

    wait_for(f"{name} STOPPED", stopped)


def test_offline_list_agrees_with_rest_and_shows_history(
    connect: ConnectClient, offsetd_yaml: Path
) -> None:
    name = mm2.HEARTBEAT_CONNECTOR
    online = offsetd_json(offsetd_yaml, "offsets", "list", name)
    offline = offsetd_json(offsetd_yaml, "offsets", "list", name, "--offline")
    assert (
        offline
        == online
        == {
            name: [
                {
                    "partition": {"sourceClusterAlias": "west", "targetClusterAlias": "east"},
                    "offset": {"offset": 0},
                }
            ]
        }
    )
    history = offsetd(offsetd_yaml, "offsets", "list", name, "--from-beginning")
    assert history.exit_code == 0, history.output
    assert "connect-offsets-" in history.stdout
    assert name in history.stdout


def test_offline_alter_of_a_stopped_source_and_undo(
    connect: ConnectClient, west: str, tmp_path: Path, offsetd_yaml: Path
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(f"row {i}\n" for i in range(8)))
    topic, name = unique("offline-src"), unique("offline-src")
    create_topic(west, topic)
    connect.create(name, string_file_source(source, topic))
    try:
        connect.wait_running(name)
        size = source.stat().st_size
        partition = {"filename": str(source)}
        wait_for(
            "the flushed offset",
            lambda: (
                connect.offsets(name)["offsets"]
                == [{"partition": partition, "offset": {"position": size}}]
            ),
        )
        # Refused while the worker runs the task.
        doc = json.dumps({name: [{"partition": partition, "offset": {"position": 10}}]})
        refused = offsetd(
            offsetd_yaml, "offsets", "alter", name, "--offline", "--file", "-", input=doc
        )
        assert refused.exit_code == 14, refused.output
        _stop(connect, name)
        done = offsetd_json(
            offsetd_yaml, "offsets", "alter", name, "--offline", "--file", "-", input=doc
        )[0]
        assert done["report"]["kind"] == "source"
        # The worker tails its offsets topic, so REST sees the offline write.
        wait_for(
            "REST to show position 10",
            lambda: (
                connect.offsets(name)["offsets"]
                == [{"partition": partition, "offset": {"position": 10}}]
            ),
        )
        undone = offsetd(offsetd_yaml, "offsets", "undo", done["snapshot_id"], "--offline")
        assert undone.exit_code == 0, undone.output
        wait_for(
            "REST to show the original position",
            lambda: (
                connect.offsets(name)["offsets"]
                == [{"partition": partition, "offset": {"position": size}}]
            ),
        )
    finally:
        connect.delete(name)


def test_offline_alter_of_a_stopped_sink_group(
    connect: ConnectClient, west: str, tmp_path: Path, offsetd_yaml: Path
) -> None:
    topic, name = unique("offline-sink"), unique("offline-sink")
    create_topic(west, topic)
    produce(west, topic, [(b"k", b'{"a": 1}')] * 4)
    connect.create(name, json_file_sink(topic, tmp_path / "out.txt"))
    try:
        connect.wait_running(name)
        wait_for(
            "committed 4",
            lambda: (
                connect.offsets(name)["offsets"]
                and connect.offsets(name)["offsets"][0]["offset"] == {"kafka_offset": 4}
            ),
        )
        _stop(connect, name)
        doc = json.dumps(
            {
                name: [
                    {
                        "partition": {"kafka_topic": topic, "kafka_partition": 0},
                        "offset": {"kafka_offset": 1},
                    }
                ]
            }
        )
        dry = offsetd(
            offsetd_yaml,
            "offsets",
            "alter",
            name,
            "--offline",
            "--file",
            "-",
            "--dry-run",
            input=doc,
        )
        assert dry.exit_code == 0, dry.output
        assert "dry run: nothing was changed" in dry.stdout
        assert connect.offsets(name)["offsets"][0]["offset"] == {"kafka_offset": 4}
        done = offsetd_json(
            offsetd_yaml, "offsets", "alter", name, "--offline", "--file", "-", input=doc
        )[0]
        assert done["report"]["kind"] == "sink"
        assert connect.offsets(name)["offsets"][0]["offset"] == {"kafka_offset": 1}
    finally:
        connect.delete(name)
