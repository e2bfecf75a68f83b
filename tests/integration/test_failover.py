"""`offsetd mm2 failover` / `failback` on the real stack, proven by real consumers.

A group reads part of a mirrored topic on east and commits; MM2 checkpoints it into west;
`failover` commits the translated offsets on west, and a real consumer of that group on west
resumes there: it reads every record after the group's east commit (nothing lost) and re-reads
no more than the plan's bound. Around it: the dry run and a group with a live member on west
change nothing, `offsets undo` restores west exactly, and `failback` brings the group home after
it read more on west, with the east -> west flow's offset syncs read in reverse.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.failoverutil import (
    CHECKPOINTS,
    checkpointed,
    consume_and_commit,
    group_commits,
    member,
    mirrored_count,
    read_as_group,
    records,
)
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_failover_resumes_a_real_consumer_on_west_undo_and_failback(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    topic, group = unique("fo"), unique("fo-app")
    mirrored = f"{mm2.SOURCE}.{topic}"
    create_topic(east, topic)
    produce(east, topic, records(0, 300))
    consume_and_commit(east, group, topic, 250)
    wait_for(f"300 records of {mirrored} on west", lambda: mirrored_count(west, mirrored, 300), 90)
    wait_for("the group's checkpoint at 250", lambda: checkpointed(west, group, mirrored, 250), 90)
    args = ("mm2", "failover", group, "--from", "east", "--to", "west")

    # The dry run plans one partition and changes nothing.
    dry = offsetd_json(offsetd_yaml, *args, "--dry-run")
    (plan,) = dry["groups"]
    (move,) = plan["partitions"]
    assert (move["source_topic"], move["target_topic"], move["source_offset"]) == (
        topic,
        mirrored,
        250,
    )
    assert move["via"] in ("checkpoint", "offset-sync")
    assert move["action"] == "commit"
    assert plan["refusal"] is None
    assert dry["outcomes"] == []
    assert group_commits(west, group) == {}

    # A live member on west: refused in one line naming it, nothing changed.
    with member(west, group, mirrored):
        refused = offsetd(offsetd_yaml, *args)
        assert refused.exit_code != 0
        assert "active member" in refused.stderr
        assert "live-member" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert group_commits(west, group) == {}

    # Failover: committed, read back, snapshotted; a real consumer resumes there.
    done = offsetd_json(offsetd_yaml, *args)
    (outcome,) = done["outcomes"]
    assert outcome["status"] == "applied", outcome
    translated = done["groups"][0]["partitions"][0]["target_offset"]
    bound = done["groups"][0]["reread_max"]
    assert group_commits(west, group) == {(mirrored, 0): translated}
    keys = read_as_group(west, group, mirrored, 299)
    assert set(range(250, 300)) <= set(keys), "a record after the east commit was lost"
    reread = [k for k in keys if k < 250]
    assert len(reread) <= bound, (len(reread), bound, translated)

    # Undo restores west exactly: the group had no commits there.
    undo = offsetd_json(
        offsetd_yaml, "offsets", "undo", outcome["snapshot_id"], "--kafka-cluster", "west"
    )
    assert undo["outcome"]["status"] == "applied"
    assert group_commits(west, group) == {}
    history = offsetd_json(offsetd_yaml, "offsets", "history", "--kafka-cluster", "west")
    mine = {h["id"]: h["status"] for h in history if h["connector"] == group}
    assert mine[outcome["snapshot_id"]] == "undone"

    # Failover again; the group reads everything on west and commits there.
    again = offsetd_json(offsetd_yaml, *args)
    assert again["outcomes"][0]["status"] == "applied"
    read_as_group(west, group, mirrored, 299, commit=True)
    assert group_commits(west, group) == {(mirrored, 0): 300}

    # Failback: west's commit (300 of east.<topic>) goes home through the east -> west flow's
    # offset syncs read in reverse; records written meanwhile on east are all read there.
    produce(east, topic, records(300, 330))
    back = offsetd_json(offsetd_yaml, "mm2", "failback", group, "--from", "west", "--to", "east")
    (home,) = back["groups"][0]["partitions"]
    assert (home["source_topic"], home["target_topic"], home["source_offset"]) == (
        mirrored,
        topic,
        300,
    )
    assert home["via"] == "inverse-sync", home
    assert home["action"] in ("commit", "keep"), home  # east had 250: never backwards
    resumed = max(home["target_offset"], 250)
    assert group_commits(east, group) == {(topic, 0): resumed}
    keys = read_as_group(east, group, topic, 329)
    assert set(range(300, 330)) <= set(keys), "a record after the west commit was lost"
    assert len([k for k in keys if k < 300]) <= back["groups"][0]["reread_max"]


def test_bad_input_is_one_line_and_changes_nothing(
    east: str, west: str, offsetd_yaml: Path, tmp_path: Path
) -> None:
    """An unknown group, a pattern matching none, an unknown alias, a pair no flow connects:
    one line each, a non-zero exit, and no commit anywhere."""

    yaml = YAML()
    doc = yaml.load(offsetd_yaml.read_text())
    # other names for the two clusters: no flow (nor any other test's) names them
    doc["kafka_clusters"]["south"] = dict(doc["kafka_clusters"]["east"])
    doc["kafka_clusters"]["north"] = dict(doc["kafka_clusters"]["west"])
    config = tmp_path / "offsetd.yaml"
    with config.open("w") as out:
        yaml.dump(doc, out)
    missing = unique("no-such-group")
    cases = {
        (missing, "--from", "east", "--to", "west"): f"group '{missing}' matches no consumer group",
        ("zz-none-*", "--from", "east", "--to", "west"): "pattern 'zz-none-*' matches no",
        ("x", "--from", "east", "--to", "mars"): "--to 'mars' is not a cluster in kafka_clusters",
        (
            "x",
            "--from",
            "south",
            "--to",
            "north",
        ): "no MirrorMaker 2 flow translates south to north",
    }
    for args, words in cases.items():
        done = offsetd(config, "mm2", "failover", *args)
        lines = [line for line in done.stderr.strip().splitlines() if line]
        assert done.exit_code != 0, (args, done.stdout)
        assert len(lines) == 1, (args, done.stderr)
        assert words in lines[0], (args, lines[0])
    assert group_commits(west, missing) == {}

    # A record on the checkpoints topic that is not a checkpoint: skipped, counted, located.
    produce(west, CHECKPOINTS, [(b"not-a-checkpoint", b"junk")])
    plan = offsetd_json(
        offsetd_yaml, "mm2", "failover", mm2.AUDIT_GROUP, "--from", "east", "--to", "west",
        "--dry-run",
    )  # fmt: skip
    said = " ".join(plan["notes"])
    assert "malformed record(s) skipped (the first at partition 0 offset" in said, said
