"""MM2 through `offsetd offsets`: rewind to a time, reset with --mm2, checkpoints live on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Message

from offsetd.devstack import mm2
from tests.integration.cliutil import offsetd_json
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

MIRRORED = f"{mm2.SOURCE}." + "{}"


def _replicated(west: str, topic: str, count: int) -> list[Message]:
    def probe() -> list[Message] | None:
        try:
            got = consume_all(west, MIRRORED.format(topic))
        except Exception:  # the mirrored topic may not exist yet
            return None
        return got if len(got) >= count else None

    got = wait_for(f"{count} records of {topic} on west", probe, timeout_s=90)
    assert len(got) == count, f"expected exactly {count}, got {len(got)}"
    return got


def test_rewind_to_a_timestamp_replicates_exactly_the_records_after_it(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    topic = unique("rewind")
    create_topic(east, topic)
    before = [(f"a{i}".encode(), f"before-{i}".encode()) for i in range(5)]
    after = [(f"b{i}".encode(), f"after-{i}".encode()) for i in range(5)]
    produce(east, topic, before)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(east, topic, after)
    _replicated(west, topic, 10)
    wait_for(
        "MM2 offset 9",
        lambda: any(
            e["partition"]["topic"] == topic and e["offset"] == {"offset": 9}
            for e in connect.offsets(mm2.SOURCE_CONNECTOR)["offsets"]
        ),
    )

    args = ("offsets", "alter", mm2.SOURCE_CONNECTOR, "--to-timestamp", str(cut), "--topic", topic)
    plan = offsetd_json(offsetd_yaml, *args, "--dry-run")[0]
    # The first record at or after the cut is source offset 5: MM2 must store 4 (last replicated).
    assert [d for d in plan["diff"] if d["change"] != "unchanged"] == [
        {
            "partition": {"cluster": "east", "partition": 0, "topic": topic},
            "before": {"offset": 9},
            "after": {"offset": 4},
            "change": "changed",
        }
    ]
    assert any("N-1" in note for note in plan["notes"])

    outcome = offsetd_json(offsetd_yaml, *args)[0]
    assert outcome["final_state"] == "RUNNING"
    records = _replicated(west, topic, 15)
    assert [(m.key(), m.value()) for m in records] == before + after + after


def test_mm2_reset_replays_and_checkpoints_keep_flowing_without_touching_offset_syncs(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    topic = unique("mm2reset")
    create_topic(east, topic)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
    produce(east, topic, records)
    _replicated(west, topic, 3)
    checkpoints = f"{mm2.SOURCE}.checkpoints.internal"
    checkpoints_before = len(consume_all(west, checkpoints))

    plan = offsetd_json(
        offsetd_yaml, "offsets", "reset", mm2.SOURCE_CONNECTOR, "--mm2", "--dry-run"
    )[0]
    assert any("offset-syncs topic is left alone" in note for note in plan["notes"])
    outcome = offsetd_json(offsetd_yaml, "offsets", "reset", mm2.SOURCE_CONNECTOR, "--mm2")[0]
    assert outcome["final_state"] == "RUNNING"
    # A reset makes MM2 start again from the log start: every record is replicated once more.
    again = _replicated(west, topic, 6)
    assert [(m.key(), m.value()) for m in again] == records + records

    # The checkpoint connector was not disturbed: it runs and emits new checkpoints.
    status = connect.wait_running(mm2.CHECKPOINT_CONNECTOR)
    assert status["connector"]["state"] == "RUNNING"
    wait_for(
        "new checkpoints after the reset",
        lambda: len(consume_all(west, checkpoints)) > checkpoints_before,
        timeout_s=60,
    )
    syncs = consume_all(east, f"mm2-offset-syncs.{mm2.TARGET}.internal")
    assert syncs, "MM2 keeps emitting offset syncs"
    assert all(m.value() is not None for m in syncs), "offsetd never tombstones offset-syncs"
