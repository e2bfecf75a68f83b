"""`offsetd mm2` with the other shapes of MM2 a DR site has: the identity policy with offset
syncs on the target, partitions nothing translates (each `--missing` choice), the source and its
Connect cluster gone, a reverse flow that checkpoints what the DR cluster wrote, MM2's own group
offset sync, and a stale checkpoint."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from offsetd.devstack import mm2
from offsetd.lag.checkpoints import CheckpointError, decode_checkpoint
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.failoverutil import (
    IDENTITY,
    checkpointed,
    config_of,
    consume_all_safe,
    consume_and_commit,
    create_connector,
    delete_connectors,
    group_commits,
    mirrored_count,
    read_as_group,
    records,
    reverse_flow,
    with_dead_source,
)
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_identity_policy_missing_partitions_and_a_gone_source(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path, tmp_path: Path
) -> None:
    """An identity flow (names kept, offset syncs on the target) next to the default one; a
    group that also read a topic no flow replicates, under each `--missing` choice; and the
    source taken as gone (`--no-source`): translated from the checkpoints alone, said so."""
    topic, other, group = unique("ident"), unique("unmirrored"), unique("ident-app")
    create_topic(east, topic)
    create_topic(east, other)
    create_topic(west, other)  # same name on west, but no flow writes it: nothing translates it
    produce(east, topic, records(0, 300))
    produce(east, other, records(0, 20))
    produce(west, other, records(0, 7))
    consume_and_commit(east, group, topic, 250)
    consume_and_commit(east, group, other, 12)
    base = config_of(connect, mm2.SOURCE_CONNECTOR)
    cbase = config_of(connect, mm2.CHECKPOINT_CONNECTOR)
    identity = {
        "replication.policy.class": IDENTITY,
        "offset-syncs.topic.location": "target",
    }
    source_name, checkpoint_name = f"{topic}-source", f"{topic}-checkpoint"
    try:
        create_connector(
            connect,
            source_name,
            {
                **base,
                **identity,
                "name": source_name,
                "topics": topic,
                "sync.topic.configs.enabled": "false",
            },
        )
        create_connector(
            connect,
            checkpoint_name,
            {**cbase, **identity, "name": checkpoint_name, "groups": group, "topics": topic},
        )
        wait_for(f"300 records of {topic} on west", lambda: mirrored_count(west, topic, 300), 90)
        wait_for("the identity checkpoint", lambda: checkpointed(west, group, topic, 250), 90)
        args = (
            "mm2", "failover", group, "--from", "east", "--to", "west",
            "--policy", "identity", "--offset-syncs-location", "target",
        )  # fmt: skip

        # Refused by default: one line naming the partition and the choice; nothing changed.
        refused = offsetd(offsetd_yaml, *args)
        assert refused.exit_code != 0
        assert f"{other}-0" in refused.stderr
        assert "--missing" in refused.stderr
        assert group_commits(west, group) == {}

        # earliest (dry) and latest (applied): west's own log start and end.
        early = offsetd_json(offsetd_yaml, *args, "--missing", "earliest", "--dry-run")
        rows = {m["target_topic"]: m for m in early["groups"][0]["partitions"]}
        assert (rows[other]["via"], rows[other]["target_offset"]) == ("earliest", 0)
        assert rows[topic]["via"] in ("checkpoint", "offset-sync")
        assert group_commits(west, group) == {}
        late = offsetd_json(offsetd_yaml, *args, "--missing", "latest")
        assert late["outcomes"][0]["status"] == "applied"
        translated = {
            m["target_topic"]: m["target_offset"] for m in late["groups"][0]["partitions"]
        }
        assert translated[other] == 7
        assert group_commits(west, group) == {(t, 0): offset for t, offset in translated.items()}
        keys = read_as_group(west, group, topic, 299)
        assert set(range(250, 300)) <= set(keys)
        assert len([k for k in keys if k < 250]) <= late["groups"][0]["reread_max"]
        offsetd_json(
            offsetd_yaml,
            "offsets", "undo", late["outcomes"][0]["snapshot_id"], "--kafka-cluster", "west",
        )  # fmt: skip
        assert group_commits(west, group) == {}

        # The source gone (its address answers nothing): after --source-timeout its commits
        # are unknown and each partition comes from its newest checkpoint, said so.
        dead = with_dead_source(offsetd_yaml, tmp_path)
        started = time.monotonic()
        away = offsetd_json(dead, *args, "--source-timeout", "3", "--dry-run")
        assert time.monotonic() - started < 30
        assert any("east did not answer in 3 s" in note for note in away["notes"]), away["notes"]
        assert any("no Connect cluster answered" in note for note in away["notes"])
        rows = {m["target_topic"]: m for m in away["groups"][0]["partitions"]}
        assert (rows[topic]["source_offset"], rows[topic]["via"]) == (None, "checkpoint")
        gone = offsetd_json(offsetd_yaml, *args, "--no-source", "--dry-run")
        # (the default flow checkpoints the group into the same topic, as east.<topic>)
        rows = {m["target_topic"]: m for m in gone["groups"][0]["partitions"]}
        assert (rows[topic]["source_offset"], rows[topic]["via"]) == (None, "checkpoint")
        assert rows[topic]["target_offset"] == translated[topic]
        assert any("--no-source" in note for note in gone["notes"])
    finally:
        delete_connectors(connect, [checkpoint_name, source_name])


def test_failback_uses_the_reverse_flows_checkpoints_for_what_the_dr_cluster_wrote(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    """The group failed over to west and, during the outage, also read `dr-*`, a topic written
    on west; a reverse flow (west -> east) replicates it to east as `west.dr-*` and checkpoints
    the group into east. Failback translates both: the replica `east.<topic>` home to `<topic>`
    through the forward flow's offset syncs in reverse, and `dr-*` to `west.dr-*` through the
    reverse flow's checkpoint; real consumers on east lose nothing of either."""
    topic, local, group = unique("fb"), unique("dr"), unique("fb-app")
    mirrored = f"{mm2.SOURCE}.{topic}"
    create_topic(east, topic)
    produce(east, topic, records(0, 100))
    consume_and_commit(east, group, topic, 100)
    wait_for(f"{mirrored} on west", lambda: mirrored_count(west, mirrored, 100), 90)
    wait_for("the group's checkpoint", lambda: checkpointed(west, group, mirrored, 100), 90)
    done = offsetd_json(offsetd_yaml, "mm2", "failover", group, "--from", "east", "--to", "west")
    assert done["outcomes"][0]["status"] == "applied"

    # the outage: the group reads on west, including a topic only west has
    create_topic(west, local)
    produce(west, local, records(0, 40))
    consume_and_commit(west, group, local, 30)
    assert group_commits(west, group) == {(mirrored, 0): 100, (local, 0): 30}
    names = [f"{local}-back-source", f"{local}-back-checkpoint"]
    try:
        reverse_flow(connect, names, f"{local}.*", group)
        replica = f"{mm2.TARGET}.{local}"
        wait_for(f"{replica} on east", lambda: mirrored_count(east, replica, 40), 90)

        def reverse_checkpoint() -> bool:
            for msg in consume_all_safe(east, f"{mm2.TARGET}.checkpoints.internal"):
                try:
                    c = decode_checkpoint(msg.key(), msg.value(), 0)
                except CheckpointError:
                    continue
                if (c.group, c.topic, c.upstream_offset) == (group, replica, 30):
                    return True
            return False

        wait_for("the reverse flow's checkpoint", reverse_checkpoint, 90)
        produce(east, topic, records(100, 110))  # east is back and takes writes again
        args = ("mm2", "failback", group, "--from", "west", "--to", "east")
        back = offsetd_json(offsetd_yaml, *args)
        rows = {m["target_topic"]: m for m in back["groups"][0]["partitions"]}
        assert rows[topic]["via"] == "inverse-sync", rows[topic]
        assert rows[replica]["via"] == "checkpoint", rows[replica]
        assert back["outcomes"][0]["status"] == "applied"
        commits = group_commits(east, group)
        assert commits[(replica, 0)] == rows[replica]["target_offset"]
        dr_keys = read_as_group(east, group, replica, 39)
        assert set(range(30, 40)) <= set(dr_keys), "a record written on west was lost"
        assert len([k for k in dr_keys if k < 30]) <= rows[replica]["reread_max"]
        keys = read_as_group(east, group, topic, 109)
        assert set(range(100, 110)) <= set(keys), "a record written on east since was lost"
    finally:
        delete_connectors(connect, names)


def test_mm2_group_sync_is_named_and_a_stale_checkpoint_is_refused(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    """A checkpoint connector with `sync.group.offsets.enabled` commits the group on west by
    itself: the plan says so instead of committing it again. Then the connector goes, the
    group moves on east, and with no offset sync to translate the new commit the checkpoint is
    stale: refused, nothing changed, unless `--allow-stale` (which shows the re-read's floor).

    The group is named `connect-*`, which the stack's own checkpoint connector excludes (MM2's
    default `groups.exclude`), so only this test's connector checkpoints it."""
    topic, group = unique("sync"), unique("connect-fo-sync")
    mirrored = f"{mm2.SOURCE}.{topic}"
    create_topic(east, topic)
    produce(east, topic, records(0, 200))
    consume_and_commit(east, group, topic, 100)
    wait_for(f"{mirrored} on west", lambda: mirrored_count(west, mirrored, 200), 90)
    name = f"{topic}-checkpoint"
    config = {
        **config_of(connect, mm2.CHECKPOINT_CONNECTOR),
        "name": name,
        "groups": group,
        "groups.exclude": "",
        "emit.checkpoints.interval.seconds": "2",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "2",
    }
    try:
        create_connector(connect, name, config)
        synced = wait_for("MM2 to commit the group on west", lambda: group_commits(west, group), 90)
        args = ("mm2", "failover", group, "--from", "east", "--to", "west")
        plan = offsetd_json(offsetd_yaml, *args, "--dry-run")
        (move,) = plan["groups"][0]["partitions"]
        assert move["current"] == synced[(mirrored, 0)]
        assert "sync.group.offsets" in " ".join(move["notes"]), move
        assert move["action"] in ("unchanged", "commit"), move
    finally:
        delete_connectors(connect, [name])
    consume_and_commit(east, group, topic, 150)  # no checkpoint follows it now
    time.sleep(2)
    # offset syncs where none lives (a flow with `emit.offset-syncs.enabled=false` reads so)
    stale_args = (*args, "--max-checkpoint-age", "1s", "--offset-syncs-location", "target")
    refused = offsetd(offsetd_yaml, *stale_args)
    assert refused.exit_code != 0
    assert "stale" in refused.stderr, refused.stderr
    assert group_commits(west, group) == synced
    allowed = offsetd_json(offsetd_yaml, *stale_args, "--allow-stale", "--dry-run")
    (move,) = allowed["groups"][0]["partitions"]
    assert (move["via"], move["source_offset"], move["reread_min"]) == ("checkpoint", 150, 50)
