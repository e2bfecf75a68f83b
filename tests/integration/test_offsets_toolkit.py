"""`offsetd offsets` against the real stack: alter, skip, pause/stop preserved, undo, dry-run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from offsetd.devstack.stack import StackInfo
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    json_file_sink,
    produce,
    string_file_source,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _state(connect: ConnectClient, name: str) -> tuple[str, list[str]]:
    status = connect.status(name)
    assert status is not None
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def _status_records(west: str, stack: StackInfo, name: str) -> int:
    """How many status records Connect wrote for the connector (a stop always writes some)."""
    topic = stack.connect["status.storage.topic"]
    wanted = {f"status-connector-{name}".encode()}
    return sum(
        1
        for partition in range(5)
        for m in consume_all(west, topic, partition)
        if (m.key() or b"") in wanted
        or (m.key() or b"").startswith(f"status-task-{name}-".encode())
    )


def _sink(connect: ConnectClient, name: str, topic: str, out: Path, **extra: str) -> None:
    connect.create(name, json_file_sink(topic, out, **extra))


def _sink_offset(connect: ConnectClient, name: str) -> int | None:
    entries = connect.offsets(name)["offsets"]
    return entries[0]["offset"]["kafka_offset"] if entries else None


def _records(n: int, start: int = 0) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(start, start + n)]


def test_filestream_source_set_to_byte_10_is_shown_and_reread_from_there(
    connect: ConnectClient, west: str, tmp_path: Path, offsetd_yaml: Path
) -> None:
    content = "".join(f"line-{i:02d}\n" for i in range(6))
    source = tmp_path / "source.txt"
    source.write_text(content)
    topic, name = unique("fs-rewind"), unique("fs-rewind")
    create_topic(west, topic)
    connect.create(name, string_file_source(source, topic))
    try:
        connect.wait_running(name)
        end = {"filename": str(source)}
        wait_for(
            "the whole file read",
            lambda: (
                connect.offsets(name)["offsets"]
                == [{"partition": end, "offset": {"position": len(content)}}]
            ),
        )
        connect.http.put(connect.path(name, "/stop"))
        wait_for("STOPPED", lambda: _state(connect, name) == ("STOPPED", []))
        doc = {name: [{"partition": end, "offset": {"position": 10}}]}
        result = offsetd(
            offsetd_yaml, "offsets", "alter", name, "--file", "-", input=json.dumps(doc)
        )
        assert result.exit_code == 0, result.output
        assert "is STOPPED" in result.stdout  # a STOPPED connector stays STOPPED
        assert connect.offsets(name)["offsets"] == [{"partition": end, "offset": {"position": 10}}]
        connect.http.put(connect.path(name, "/resume"))
        expected = content[10:].splitlines()

        def reread() -> list[bytes | None] | None:
            values = [m.value() for m in consume_all(west, topic)]
            return values if values[6:] == [x.encode() for x in expected] else None

        got = wait_for("the re-read lines", reread)
        assert len(got) == 6 + len(expected)
        assert expected[0] == "ne-01"  # byte 10 is inside the second line
    finally:
        connect.delete(name)


def test_skip_a_poison_record_from_n_to_n_plus_1_then_shift_a_paused_sink(
    connect: ConnectClient, west: str, tmp_path: Path, offsetd_yaml: Path
) -> None:
    topic, name, out = unique("skip"), unique("skip-sink"), tmp_path / "sink.txt"
    create_topic(west, topic)
    produce(west, topic, _records(5))
    _sink(connect, name, topic, out)
    try:
        connect.wait_running(name)
        wait_for("5 records committed", lambda: _sink_offset(connect, name) == 5)
        poison_offset = produce(west, topic, [(b"bad", b"{not json")])[0]
        produce(west, topic, _records(2, start=6))
        wait_for("the task to fail", lambda: _state(connect, name)[1] == ["FAILED"])
        assert _sink_offset(connect, name) == poison_offset == 5

        doc = {
            name: [
                {
                    "partition": {"kafka_topic": topic, "kafka_partition": 0},
                    "offset": {"kafka_offset": poison_offset + 1},
                }
            ]
        }
        outcome = offsetd_json(
            offsetd_yaml, "offsets", "alter", name, "--file", "-", input=json.dumps(doc)
        )[0]
        assert outcome["final_state"] == "RUNNING"
        assert outcome["diff"] == [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": 0},
                "before": {"kafka_offset": 5},
                "after": {"kafka_offset": 6},
                "change": "changed",
            }
        ]
        assert _state(connect, name) == ("RUNNING", ["RUNNING"])
        lines = wait_for("records 6 and 7", lambda: _lines(out) if len(_lines(out)) == 7 else None)
        # FileStreamSink writes the schemaless JSON value as a Java map.
        assert lines[5:] == ["{n=6}", "{n=7}"]
        wait_for("the group past the poison record", lambda: _sink_offset(connect, name) == 8)

        connect.http.put(connect.path(name, "/pause"))
        wait_for("PAUSED", lambda: _state(connect, name) == ("PAUSED", ["PAUSED"]))
        result = offsetd(offsetd_yaml, "offsets", "alter", name, "--shift-by", "-2")
        assert result.exit_code == 0, result.output
        # Back to PAUSED; Connect creates no tasks for a connector paused from STOPPED.
        assert _state(connect, name) == ("PAUSED", [])
        assert _sink_offset(connect, name) == 6
        connect.http.put(connect.path(name, "/resume"))
        wait_for("6 and 7 re-delivered", lambda: len(_lines(out)) == 9)
    finally:
        connect.delete(name)


def test_dry_run_changes_nothing_and_never_stops_the_connector(
    connect: ConnectClient, west: str, stack: StackInfo, tmp_path: Path, offsetd_yaml: Path
) -> None:
    topic, name = unique("dry"), unique("dry-sink")
    create_topic(west, topic)
    produce(west, topic, _records(4))
    _sink(connect, name, topic, tmp_path / "out.txt")
    try:
        connect.wait_running(name)
        wait_for("committed", lambda: _sink_offset(connect, name) == 4)
        before_offsets = connect.offsets(name)
        before_status = _status_records(west, stack, name)
        plans = offsetd_json(offsetd_yaml, "offsets", "alter", name, "--to-earliest", "--dry-run")
        assert plans[0]["diff"][0]["before"] == {"kafka_offset": 4}
        assert plans[0]["diff"][0]["after"] == {"kafka_offset": 0}
        reset = offsetd(offsetd_yaml, "offsets", "reset", name, "--dry-run")
        assert reset.exit_code == 0
        assert "dry run: nothing was changed" in reset.stdout
        assert connect.offsets(name) == before_offsets
        assert _status_records(west, stack, name) == before_status
        assert _state(connect, name) == ("RUNNING", ["RUNNING"])
    finally:
        connect.delete(name)


def test_undo_restores_the_before_image_after_alter_and_after_reset(
    connect: ConnectClient, west: str, tmp_path: Path, offsetd_yaml: Path
) -> None:
    topic, name = unique("undo"), unique("undo-sink")
    create_topic(west, topic, partitions=3)
    for partition in range(3):
        produce(west, topic, _records(3 + partition), partition=partition)
    _sink(connect, name, topic, tmp_path / "out.txt")
    try:
        connect.wait_running(name)

        def committed() -> dict[int, int]:
            return {
                e["partition"]["kafka_partition"]: e["offset"]["kafka_offset"]
                for e in connect.offsets(name)["offsets"]
            }

        wait_for("all committed", lambda: committed() == {0: 3, 1: 4, 2: 5})
        altered = offsetd_json(
            offsetd_yaml, "offsets", "alter", name, "--to-earliest", "--partition", "1"
        )[0]
        assert committed() == {0: 3, 1: 0, 2: 5} or committed() == {0: 3, 1: 4, 2: 5}
        wait_for("re-consumed", lambda: committed() == {0: 3, 1: 4, 2: 5})
        # The connector consumed partition 1 again, so the offsets moved since the change:
        # undo refuses without --force and shows the three-way diff.
        refused = offsetd(offsetd_yaml, "offsets", "undo", altered["snapshot_id"])
        assert refused.exit_code == 15, refused.output
        assert "moved" in refused.stderr

        reset = offsetd_json(offsetd_yaml, "offsets", "reset", name)[0]
        assert reset["final_state"] == "RUNNING"
        # The sink consumes everything again after the reset, back to the before-image: undoing
        # the reset then has nothing to write, so it neither stops nor patches the connector.
        wait_for("re-consumed after the reset", lambda: committed() == {0: 3, 1: 4, 2: 5})
        connect.http.put(connect.path(name, "/stop"))
        wait_for("STOPPED", lambda: _state(connect, name) == ("STOPPED", []))
        undone = offsetd_json(offsetd_yaml, "offsets", "undo", reset["snapshot_id"], "--force")[0]
        assert undone["undo_of"] == reset["snapshot_id"]
        assert (undone["snapshot_id"], undone["patch"]) == (None, [])
        assert committed() == {0: 3, 1: 4, 2: 5}

        # On the STOPPED connector nothing moves: an alter is undone without --force, and the
        # partition the alter removed comes back.
        doc = {
            name: [
                {
                    "partition": {"kafka_topic": topic, "kafka_partition": 0},
                    "offset": {"kafka_offset": 1},
                },
                {"partition": {"kafka_topic": topic, "kafka_partition": 2}, "offset": None},
            ]
        }
        second = offsetd_json(
            offsetd_yaml, "offsets", "alter", name, "--file", "-", input=json.dumps(doc)
        )[0]
        assert second["final_state"] == "STOPPED"
        assert committed() == {0: 1, 1: 4}
        offsetd_json(offsetd_yaml, "offsets", "undo", second["snapshot_id"])
        assert committed() == {0: 3, 1: 4, 2: 5}

        history = offsetd_json(offsetd_yaml, "offsets", "history", "--connector", name)
        assert [(h["operation"], h["status"]) for h in history][:3] == [
            ("undo", "applied"),
            ("alter", "undone"),
            ("reset", "undone"),
        ]
    finally:
        connect.delete(name)


def test_errors_are_one_sentence_with_distinct_exit_codes(
    connect: ConnectClient, offsetd_yaml: Path, tmp_path: Path
) -> None:
    missing = offsetd(offsetd_yaml, "offsets", "list", "no-such-connector")
    assert missing.exit_code == 4
    assert "connector 'no-such-connector' does not exist" in missing.stderr

    bad: dict[str, Any] = {
        "east->west.MirrorCheckpointConnector": [
            {"partition": {"group": "g", "topic": "t", "partition": 0}, "offset": {"offset": 5}}
        ]
    }
    invalid = offsetd(offsetd_yaml, "offsets", "import", "-", input=json.dumps(bad))
    assert invalid.exit_code == 9
    assert "entry 0" in invalid.stderr
    assert "only be 0 or null" in invalid.stderr

    strimzi = tmp_path / "strimzi.yaml"
    strimzi.write_text(
        offsetd_yaml.read_text().replace("orchestrator: none", "orchestrator: strimzi")
    )
    refused = offsetd(strimzi, "offsets", "reset", "heartbeat-audit")
    assert refused.exit_code == 11
    assert "strimzi.io/connector-offsets=reset" in refused.stderr
    assert _state(connect, "heartbeat-audit") == ("RUNNING", ["RUNNING"])
