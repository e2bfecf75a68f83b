"""`offsetd mm2 failover` / `failback` on the real stack, proven by real consumers.

A group reads part of a mirrored topic on east and commits; MM2 checkpoints it into west;
`failover` commits the translated offsets on west, and a real consumer of that group on west
resumes there: it reads every record after the group's east commit (nothing lost) and re-reads
no more than the plan's bound. Around it: the dry run and a group with a live member on west
change nothing, `offsets undo` restores west exactly, and `failback` brings the group home after
it read more on west, with the east -> west flow's offset syncs read in reverse.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.lag.checkpoints import CheckpointError, decode_checkpoint
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

CHECKPOINTS = f"{mm2.SOURCE}.checkpoints.internal"


def _records(start: int, stop: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, stop)]


def _commits(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    result = future.result(timeout=30)
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or []
        if tp.offset >= 0
    }


@contextmanager
def _member(bootstrap: str, group: str, topic: str) -> Iterator[Consumer]:
    """A consumer of `group` that joined and holds its partitions until the block ends."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "client.id": "live-member",
        }
    )
    consumer.subscribe([topic])
    try:

        def joined() -> bool:
            consumer.poll(0.5)  # errors (no offset: "error" reset) are fine, the join is not
            return bool(consumer.assignment())

        wait_for(f"{group} joined on {bootstrap}", joined)
        yield consumer
    finally:
        consumer.close()


def _read_as_group(
    bootstrap: str, group: str, topic: str, until_key: int, commit: bool = False
) -> list[int]:
    """The keys a real consumer of `group` reads from its committed offset up to `k<until_key>`
    ("error" when there is no commit: the group must resume where it was put). Assigned, not
    subscribed: the committed offset is fetched all the same, without a rebalance's wait."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    consumer.assign([TopicPartition(topic, 0)])  # no offset: the group's committed one
    keys: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while not keys or keys[-1] < until_key:
            assert time.monotonic() < deadline, f"{group} read only {keys[-3:]} of {topic}"
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                keys.append(int((msg.key() or b"k-1")[1:]))
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return keys


def _consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    """A real consumer of `group` reads `count` records from the start and commits after them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    try:
        while seen < count:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen += 1
        consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
    finally:
        consumer.close()


def _mirrored(west: str, topic: str, count: int) -> bool:
    try:
        return len(consume_all(west, topic)) >= count
    except Exception:  # MM2 creates it at its next topic refresh
        return False


def _checkpointed(west: str, group: str, topic: str, upstream: int) -> bool:
    try:
        records = consume_all(west, CHECKPOINTS)
    except Exception:  # a loaded broker may not know it at the first metadata request
        return False
    for msg in records:
        try:
            c = decode_checkpoint(msg.key(), msg.value(), 0)
        except CheckpointError:
            continue
        if (c.group, c.topic, c.upstream_offset) == (group, topic, upstream):
            return True
    return False


def _json(result: Any) -> Any:
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def test_failover_resumes_a_real_consumer_on_west_undo_and_failback(
    connect: ConnectClient, east: str, west: str, offsetd_yaml: Path
) -> None:
    topic, group = unique("fo"), unique("fo-app")
    mirrored = f"{mm2.SOURCE}.{topic}"
    create_topic(east, topic)
    produce(east, topic, _records(0, 300))
    _consume_and_commit(east, group, topic, 250)
    wait_for(f"300 records of {mirrored} on west", lambda: _mirrored(west, mirrored, 300), 90)
    wait_for("the group's checkpoint at 250", lambda: _checkpointed(west, group, mirrored, 250), 90)
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
    assert _commits(west, group) == {}

    # A live member on west: refused in one line naming it, nothing changed.
    with _member(west, group, mirrored):
        refused = offsetd(offsetd_yaml, *args)
        assert refused.exit_code != 0
        assert "active member" in refused.stderr
        assert "live-member" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert _commits(west, group) == {}

    # Failover: committed, read back, snapshotted; a real consumer resumes there.
    done = offsetd_json(offsetd_yaml, *args)
    (outcome,) = done["outcomes"]
    assert outcome["status"] == "applied", outcome
    translated = done["groups"][0]["partitions"][0]["target_offset"]
    bound = done["groups"][0]["reread_max"]
    assert _commits(west, group) == {(mirrored, 0): translated}
    keys = _read_as_group(west, group, mirrored, 299)
    assert set(range(250, 300)) <= set(keys), "a record after the east commit was lost"
    reread = [k for k in keys if k < 250]
    assert len(reread) <= bound, (len(reread), bound, translated)

    # Undo restores west exactly: the group had no commits there.
    undo = offsetd_json(
        offsetd_yaml, "offsets", "undo", outcome["snapshot_id"], "--kafka-cluster", "west"
    )
    assert undo["outcome"]["status"] == "applied"
    assert _commits(west, group) == {}
    history = offsetd_json(offsetd_yaml, "offsets", "history", "--kafka-cluster", "west")
    mine = {h["id"]: h["status"] for h in history if h["connector"] == group}
    assert mine[outcome["snapshot_id"]] == "undone"

    # Failover again; the group reads everything on west and commits there.
    again = offsetd_json(offsetd_yaml, *args)
    assert again["outcomes"][0]["status"] == "applied"
    _read_as_group(west, group, mirrored, 299, commit=True)
    assert _commits(west, group) == {(mirrored, 0): 300}

    # Failback: west's commit (300 of east.<topic>) goes home through the east -> west flow's
    # offset syncs read in reverse; records written meanwhile on east are all read there.
    produce(east, topic, _records(300, 330))
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
    assert _commits(east, group) == {(topic, 0): resumed}
    keys = _read_as_group(east, group, topic, 329)
    assert set(range(300, 330)) <= set(keys), "a record after the west commit was lost"
    assert len([k for k in keys if k < 300]) <= back["groups"][0]["reread_max"]


def _config_of(connect: ConnectClient, name: str) -> dict[str, str]:
    """A connector's config, asked again while Connect rebalances (another test's connectors
    coming and going answer 409 or 500 for a moment)."""

    def probe() -> dict[str, str] | None:
        response = connect.http.get(connect.path(name, "/config"))
        return response.json() if response.status_code == 200 else None

    return wait_for(f"the config of {name}", probe, 60)


def _create(connect: ConnectClient, name: str, config: dict[str, str]) -> None:
    """`connect.create`, asked again while Connect rebalances."""

    def probe() -> bool:
        response = connect.http.put(connect.path(name, "/config"), json=config)
        assert response.status_code in (200, 201, 409, 500), response.text
        return response.status_code in (200, 201)

    wait_for(f"{name} created", probe, 60)


IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _with_dead_source(config: Path, folder: Path) -> Path:
    """The config with east's bootstrap and Connect's URL at a port nothing listens on: east
    gone, and the Connect cluster that ran MM2 with it."""
    yaml = YAML()
    doc = yaml.load(config.read_text())
    doc["kafka_clusters"]["east"]["bootstrap_servers"] = "127.0.0.1:9"  # discard: refused
    for cluster in doc["connect_clusters"].values():  # Connect went down with it
        cluster["url"] = "http://127.0.0.1:9"
    out_path = folder / "east-gone.yaml"
    with out_path.open("w") as out:
        yaml.dump(doc, out)
    return out_path


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
    produce(east, topic, _records(0, 300))
    produce(east, other, _records(0, 20))
    produce(west, other, _records(0, 7))
    _consume_and_commit(east, group, topic, 250)
    _consume_and_commit(east, group, other, 12)
    base = _config_of(connect, mm2.SOURCE_CONNECTOR)
    cbase = _config_of(connect, mm2.CHECKPOINT_CONNECTOR)
    identity = {
        "replication.policy.class": IDENTITY,
        "offset-syncs.topic.location": "target",
    }
    source_name, checkpoint_name = f"{topic}-source", f"{topic}-checkpoint"
    try:
        _create(
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
        _create(
            connect,
            checkpoint_name,
            {**cbase, **identity, "name": checkpoint_name, "groups": group, "topics": topic},
        )
        wait_for(f"300 records of {topic} on west", lambda: _mirrored(west, topic, 300), 90)
        wait_for("the identity checkpoint", lambda: _checkpointed(west, group, topic, 250), 90)
        args = (
            "mm2", "failover", group, "--from", "east", "--to", "west",
            "--policy", "identity", "--offset-syncs-location", "target",
        )  # fmt: skip

        # Refused by default: one line naming the partition and the choice; nothing changed.
        refused = offsetd(offsetd_yaml, *args)
        assert refused.exit_code != 0
        assert f"{other}-0" in refused.stderr
        assert "--missing" in refused.stderr
        assert _commits(west, group) == {}

        # earliest (dry) and latest (applied): west's own log start and end.
        early = offsetd_json(offsetd_yaml, *args, "--missing", "earliest", "--dry-run")
        rows = {m["target_topic"]: m for m in early["groups"][0]["partitions"]}
        assert (rows[other]["via"], rows[other]["target_offset"]) == ("earliest", 0)
        assert rows[topic]["via"] in ("checkpoint", "offset-sync")
        assert _commits(west, group) == {}
        late = offsetd_json(offsetd_yaml, *args, "--missing", "latest")
        assert late["outcomes"][0]["status"] == "applied"
        translated = {
            m["target_topic"]: m["target_offset"] for m in late["groups"][0]["partitions"]
        }
        assert translated[other] == 7
        assert _commits(west, group) == {(t, 0): offset for t, offset in translated.items()}
        keys = _read_as_group(west, group, topic, 299)
        assert set(range(250, 300)) <= set(keys)
        assert len([k for k in keys if k < 250]) <= late["groups"][0]["reread_max"]
        offsetd_json(
            offsetd_yaml,
            "offsets", "undo", late["outcomes"][0]["snapshot_id"], "--kafka-cluster", "west",
        )  # fmt: skip
        assert _commits(west, group) == {}

        # The source gone (its address answers nothing): after --source-timeout its commits
        # are unknown and each partition comes from its newest checkpoint, said so.
        dead = _with_dead_source(offsetd_yaml, tmp_path)
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
        connect.delete(checkpoint_name)
        connect.delete(source_name)


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
    assert _commits(west, missing) == {}


def _reverse_flow(connect: ConnectClient, names: list[str], topics: str, group: str) -> None:
    """A west -> east flow (source and checkpoint connectors, `names`) for `topics` and
    `group`: the reverse flow a DR cluster runs while it takes writes."""
    for name, forward in zip(names, (mm2.SOURCE_CONNECTOR, mm2.CHECKPOINT_CONNECTOR), strict=True):
        config = _config_of(connect, forward)
        east_bootstrap = config["source.cluster.bootstrap.servers"]
        west_bootstrap = config["target.cluster.bootstrap.servers"]
        config.update(
            {
                "name": name,
                "source.cluster.alias": mm2.TARGET,
                "target.cluster.alias": mm2.SOURCE,
                "source.cluster.bootstrap.servers": west_bootstrap,
                "target.cluster.bootstrap.servers": east_bootstrap,
                # the worker's producer writes to west: the replicas and checkpoints go to east
                "producer.override.bootstrap.servers": east_bootstrap,
                "topics": topics,
                "groups": group,
            }
        )
        _create(connect, name, config)


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
    produce(east, topic, _records(0, 100))
    _consume_and_commit(east, group, topic, 100)
    wait_for(f"{mirrored} on west", lambda: _mirrored(west, mirrored, 100), 90)
    wait_for("the group's checkpoint", lambda: _checkpointed(west, group, mirrored, 100), 90)
    done = offsetd_json(offsetd_yaml, "mm2", "failover", group, "--from", "east", "--to", "west")
    assert done["outcomes"][0]["status"] == "applied"

    # the outage: the group reads on west, including a topic only west has
    create_topic(west, local)
    produce(west, local, _records(0, 40))
    _consume_and_commit(west, group, local, 30)
    assert _commits(west, group) == {(mirrored, 0): 100, (local, 0): 30}
    names = [f"{local}-back-source", f"{local}-back-checkpoint"]
    try:
        _reverse_flow(connect, names, f"{local}.*", group)
        replica = f"{mm2.TARGET}.{local}"
        wait_for(f"{replica} on east", lambda: _mirrored(east, replica, 40), 90)

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
        produce(east, topic, _records(100, 110))  # east is back and takes writes again
        args = ("mm2", "failback", group, "--from", "west", "--to", "east")
        back = offsetd_json(offsetd_yaml, *args)
        rows = {m["target_topic"]: m for m in back["groups"][0]["partitions"]}
        assert rows[topic]["via"] == "inverse-sync", rows[topic]
        assert rows[replica]["via"] == "checkpoint", rows[replica]
        assert back["outcomes"][0]["status"] == "applied"
        commits = _commits(east, group)
        assert commits[(replica, 0)] == rows[replica]["target_offset"]
        dr_keys = _read_as_group(east, group, replica, 39)
        assert set(range(30, 40)) <= set(dr_keys), "a record written on west was lost"
        assert len([k for k in dr_keys if k < 30]) <= rows[replica]["reread_max"]
        keys = _read_as_group(east, group, topic, 109)
        assert set(range(100, 110)) <= set(keys), "a record written on east since was lost"
    finally:
        for name in names:
            connect.delete(name)


def consume_all_safe(bootstrap: str, topic: str) -> list[Any]:
    try:
        return consume_all(bootstrap, topic)
    except Exception:  # not there yet, or not known at the first metadata request
        return []


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
    produce(east, topic, _records(0, 200))
    _consume_and_commit(east, group, topic, 100)
    wait_for(f"{mirrored} on west", lambda: _mirrored(west, mirrored, 200), 90)
    name = f"{topic}-checkpoint"
    config = {
        **_config_of(connect, mm2.CHECKPOINT_CONNECTOR),
        "name": name,
        "groups": group,
        "groups.exclude": "",
        "emit.checkpoints.interval.seconds": "2",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "2",
    }
    try:
        _create(connect, name, config)
        synced = wait_for("MM2 to commit the group on west", lambda: _commits(west, group), 90)
        args = ("mm2", "failover", group, "--from", "east", "--to", "west")
        plan = offsetd_json(offsetd_yaml, *args, "--dry-run")
        (move,) = plan["groups"][0]["partitions"]
        assert move["current"] == synced[(mirrored, 0)]
        assert "sync.group.offsets" in " ".join(move["notes"]), move
        assert move["action"] in ("unchanged", "commit"), move
    finally:
        connect.delete(name)
    wait_for(f"{name} gone", lambda: connect.status(name) is None)
    _consume_and_commit(east, group, topic, 150)  # no checkpoint follows it now
    time.sleep(2)
    # offset syncs where none lives (a flow with `emit.offset-syncs.enabled=false` reads so)
    stale_args = (*args, "--max-checkpoint-age", "1s", "--offset-syncs-location", "target")
    refused = offsetd(offsetd_yaml, *stale_args)
    assert refused.exit_code != 0
    assert "stale" in refused.stderr, refused.stderr
    assert _commits(west, group) == synced
    allowed = offsetd_json(offsetd_yaml, *stale_args, "--allow-stale", "--dry-run")
    (move,) = allowed["groups"][0]["partitions"]
    assert (move["via"], move["source_offset"], move["reread_min"]) == ("checkpoint", 150, 50)
