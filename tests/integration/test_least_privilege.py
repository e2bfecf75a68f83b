"""offsetd's least privilege, proven on the secure stack.

A principal of its own gets exactly offsetd's ACLs (`devstack.security.OFFSETD_ACLS`, the
least-privilege table of docs/security.md) on both clusters. With them every toolkit feature
works; then each ACL is removed in turn and the feature that needs it fails with one line
naming the operation and the topic or group, exit code 58 (`KafkaAccessDenied`), in seconds.

The daemon runs on these ACLs in `test_secure_stack.py` (the stack grants them to `offsetd`,
and the demo heals a poison record as that principal); here it is shown waiting, unready and
naming the ACL, without READ on its own group, and starting once it is granted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in its __all__
    AclBindingFilter,
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewTopic
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.devstack.security import OFFSETD_ACLS, Acl
from offsetd.devstack.stack import StackInfo
from tests.integration.cliutil import leaf_argv
from tests.integration.daemonproc import Daemon, free_port
from tests.integration.kafkautil import json_file_sink, string_file_source, unique, wait_for
from tests.integration.lagutil import OFFSETD
from tests.integration.secureutil import SecureConnect, create_topic, produce

pytestmark = pytest.mark.integration

CLUSTERS = ("east", "west")


@dataclass(frozen=True)
class Principal:
    name: str
    config: Path  # offsetd.yaml as this principal (Connect's REST user stays offsetd's)
    acls: list[Acl]


def _admins(stack: StackInfo) -> list[AdminClient]:
    return [
        AdminClient(dict[str, str | int | float | bool](stack.admin_config(alias)))
        for alias in CLUSTERS
    ]


def _grant(stack: StackInfo, acls: list[Acl]) -> None:
    for admin in _admins(stack):
        for future in admin.create_acls([a.binding() for a in acls]).values():
            future.result(timeout=30)


def _revoke(stack: StackInfo, acls: list[Acl]) -> None:
    for admin in _admins(stack):
        filters = []
        for acl in acls:
            b = acl.binding()
            filters.append(
                AclBindingFilter(
                    b.restype,
                    b.name,
                    b.resource_pattern_type,
                    b.principal,
                    b.host,
                    b.operation,
                    b.permission_type,
                )
            )
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)


def _run(
    principal: Principal, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OFFSETD), *leaf_argv(principal.config, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def principal(
    secure_stack: StackInfo, secure_yaml: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Principal]:
    """A SCRAM user with offsetd's ACLs only, and an offsetd.yaml naming it; its own control and
    snapshot topics (made by the stack's admin, like an operator would), so nothing it does
    touches the stack's `offsetd` principal's state."""
    name = f"offsetd-lp-{uuid.uuid4().hex[:6]}"
    password = uuid.uuid4().hex
    folder = tmp_path_factory.mktemp("least-privilege")
    password_file = folder / "kafka-password"
    password_file.write_text(password)
    for admin in _admins(secure_stack):
        upsert = UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
    acls = [replace(acl, principal=name) for acl in OFFSETD_ACLS]
    _grant(secure_stack, acls)

    suffix = name.removeprefix("offsetd-")
    control, snapshots = f"offsetd.{suffix}.control", f"offsetd.{suffix}.snapshots"
    admin = AdminClient(dict[str, str | int | float | bool](secure_stack.admin_config("west")))
    compact = {"cleanup.policy": "compact"}
    futures = admin.create_topics(
        [NewTopic(control, 1, 1, config=compact), NewTopic(snapshots, 1, 1, config=compact)]
    )
    for future in futures.values():
        future.result(timeout=30)

    yaml = YAML()
    doc = yaml.load(secure_yaml.read_text())
    for cluster in doc["kafka_clusters"].values():
        cluster["sasl"]["username"] = name
        cluster["sasl"]["password"] = {"file": str(password_file)}
    doc.setdefault("remediation", {})["control_topic"] = control
    doc.setdefault("offsets", {})["snapshots_topic"] = snapshots
    config = folder / "offsetd.yaml"
    with config.open("w") as out:
        yaml.dump(doc, out)
    try:
        yield Principal(name, config, acls)
    finally:
        _revoke(secure_stack, acls)
        for admin in _admins(secure_stack):
            gone = UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_512)
            for future in admin.alter_user_scram_credentials([gone]).values():
                future.result(timeout=30)


@dataclass(frozen=True)
class Connectors:
    source: str
    source_file: Path
    sink: str  # its group is Connect's default, connect-<name>
    sink_topic: str
    mirrored_group: str  # a group on east that MM2 checkpoints to west: lag reads its offsets


def _stop(connect: SecureConnect, name: str) -> None:
    connect.http.put(connect.path(name, "/stop")).raise_for_status()

    def stopped() -> bool:
        status = connect.status(name)
        return bool(
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        )

    wait_for(f"{name} STOPPED", stopped)


@pytest.fixture(scope="module")
def connectors(
    secure_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Connectors]:
    """A source with a flushed offset and two sinks with committed groups, all STOPPED: the
    offline toolkit's subjects (made as the stack's admin)."""
    connect = SecureConnect(secure_stack)
    folder = tmp_path_factory.mktemp("lp-connectors")
    west = secure_stack.admin_config("west")
    source_file = folder / "in.txt"
    source_file.write_text("".join(f"row {i}\n" for i in range(6)))
    source, sink = unique("lp-src"), unique("lp-sink")
    source_topic, sink_topic = unique("lp-src"), unique("lp-sink")
    create_topic(west, source_topic)
    create_topic(west, sink_topic)
    produce(west, sink_topic, [(b"k", b'{"a": 1}')] * 4)
    connect.create(source, string_file_source(source_file, source_topic))
    connect.create(sink, json_file_sink(sink_topic, folder / "out.txt"))
    try:
        size = source_file.stat().st_size
        wait_for(
            "the source's flushed offset",
            lambda: (
                connect.offsets(source)["offsets"]
                == [{"partition": {"filename": str(source_file)}, "offset": {"position": size}}]
            ),
        )
        wait_for(
            f"{sink} to commit 4",
            lambda: (
                connect.offsets(sink)["offsets"]
                and connect.offsets(sink)["offsets"][0]["offset"] == {"kafka_offset": 4}
            ),
        )
        for name in (source, sink):
            _stop(connect, name)
        group = unique("lp-mirrored")
        _commit_at_end(secure_stack.admin_config("east"), group, mm2.HEARTBEATS_TOPIC)
        yield Connectors(source, source_file, sink, sink_topic, group)
    finally:
        for name in (source, sink):
            connect.delete(name)


def _commit_at_end(conf: dict[str, str], group: str, topic: str) -> None:
    """`group` has read `topic` to its end: MM2's checkpoint connector will translate it."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        _low, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.commit(offsets=[TopicPartition(topic, 0, high)], asynchronous=False)
    finally:
        consumer.close()


def _checkpointed(p: Principal, group: str) -> bool:
    done = _run(p, "lag", "-o", "json")
    return done.returncode == 0 and any(
        c["group"] == group for c in json.loads(done.stdout)["checkpoints"]
    )


# -- what each feature asks of Kafka, as the CLI runs it --------------------------------------


def _source_doc(c: Connectors, position: int) -> str:
    partition = {"filename": str(c.source_file)}
    return json.dumps({c.source: [{"partition": partition, "offset": {"position": position}}]})


def _sink_doc(c: Connectors, offset: int | None) -> str:
    partition = {"kafka_topic": c.sink_topic, "kafka_partition": 0}
    entry = {"partition": partition, "offset": None if offset is None else {"kafka_offset": offset}}
    return json.dumps({c.sink: [entry]})


def _feature(p: Principal, c: Connectors, which: str) -> subprocess.CompletedProcess[str]:
    """Run one feature as `p`: the command that needs the ACL of the same key."""
    if which == "read topics":
        return _run(p, "offsets", "list", c.source, "--offline", "-o", "json")
    if which == "write the offsets topic":
        doc = _source_doc(c, 2)
        return _run(p, "offsets", "alter", c.source, "--offline", "--file", "-", stdin=doc)
    if which == "create own topics":
        fresh = f"offsetd.lp-{uuid.uuid4().hex[:6]}.control"
        config = p.config.with_name(f"fresh-{fresh}.yaml")
        config.write_text(p.config.read_text().replace(_control_topic(p), fresh))
        return _run(replace(p, config=config), "approvals")
    if which == "write own topics":
        return _run(p, "pause", "--reason", "least privilege")
    if which == "describe own topics' configs":
        return _run(
            p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=_sink_doc(c, 3)
        )
    if which == "describe groups":
        return _run(p, "lag", "-o", "json")  # the checkpointed group's committed offsets
    if which == "read Connect's groups":
        return _run(
            p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=_sink_doc(c, 1)
        )
    if which == "delete Connect's groups' offsets":
        doc = _sink_doc(c, None)
        return _run(p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=doc)
    raise AssertionError(which)


def _control_topic(p: Principal) -> str:
    return str(YAML(typ="safe").load(p.config.read_text())["remediation"]["control_topic"])


# the ACL each feature needs (by its index in OFFSETD_ACLS), and the words its error must say
NEEDS = {
    "read topics": (0, "READ on topic 'connect-offsets'"),
    "write the offsets topic": (1, "WRITE on topic 'connect-offsets'"),
    "create own topics": (2, "CREATE on topic 'offsetd.lp-"),
    "write own topics": (3, "WRITE on topic 'offsetd.lp-"),
    "describe own topics' configs": (4, "DESCRIBE_CONFIGS on topic 'offsetd.lp-"),
    "describe groups": (6, "DESCRIBE on group '"),  # the first checkpointed group
    "read Connect's groups": (7, "READ on group 'connect-lp-sink-"),
    "delete Connect's groups' offsets": (8, "DELETE on group 'connect-lp-sink-"),
}


def test_every_acl_is_tested() -> None:
    tested = {index for index, _words in NEEDS.values()}
    untested = [a for i, a in enumerate(OFFSETD_ACLS) if i not in tested]
    # the daemon's own groups: test_the_daemon_without_read_on_its_group_waits_and_says_so
    assert untested == [Acl("offsetd", "group", "offsetd", "READ", prefixed=True)]


def test_offsetds_acls_are_enough_for_every_feature(
    principal: Principal, connectors: Connectors
) -> None:
    wait_for(
        "MM2 to checkpoint the mirrored group",
        lambda: _checkpointed(principal, connectors.mirrored_group),
    )
    for which in NEEDS:
        done = _feature(principal, connectors, which)
        assert done.returncode == 0, (which, done.stdout, done.stderr)
        if which == "write own topics":
            resumed = _run(principal, "resume-automation")
            assert resumed.returncode == 0, resumed.stderr
    for command in (("history",), ("quarantine", "list"), ("offsets", "history")):
        done = _run(principal, *command)
        assert done.returncode == 0, (command, done.stderr)
    lag = _run(principal, "lag", "-o", "json")
    assert lag.returncode == 0, lag.stderr
    assert not json.loads(lag.stdout)["errors"]


@pytest.mark.parametrize("which", list(NEEDS))
def test_each_acl_removed_is_named_in_one_line(
    secure_stack: StackInfo, principal: Principal, connectors: Connectors, which: str
) -> None:
    index, words = NEEDS[which]
    acl = principal.acls[index]
    _revoke(secure_stack, [acl])
    try:
        deadline = time.monotonic() + 20  # an ACL change reaches every broker within moments
        while True:
            started = time.monotonic()
            done = _feature(principal, connectors, which)
            took = time.monotonic() - started
            if done.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        _grant(secure_stack, [acl])
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode == 58, (which, done.stderr)
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert words in errors[0], errors[0]
    assert principal.name in errors[0], errors[0]
    assert took < 30, f"{which}: {took:.1f} s"


# -- the daemon: READ on its own groups -----------------------------------------------------------


def _readyz(port: int) -> tuple[int, str]:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=3)
    except httpx.HTTPError:
        return 0, ""
    return answer.status_code, answer.text


def _readyz_saying(port: int, words: str) -> tuple[int, str] | None:
    page = _readyz(port)
    return page if words in page[1] else None


def test_the_daemon_without_read_on_its_group_waits_and_says_so(
    secure_stack: StackInfo, principal: Principal, tmp_path: Path
) -> None:
    """Without READ on its consumer group the daemon is unready and names the ACL (faust's join
    alone would wait in silence); once the ACL is granted it starts, without a restart."""
    port = free_port()
    app_id = f"offsetd-{principal.name.removeprefix('offsetd-')}-daemon"
    yaml = YAML()
    doc = yaml.load(principal.config.read_text())
    doc["daemon"] = {"web_port": port, "app_id": app_id}
    config = tmp_path / "offsetd.yaml"
    with config.open("w") as out:
        yaml.dump(doc, out)
    acl = principal.acls[5]
    assert (acl.resource, acl.name, acl.operation) == ("group", "offsetd", "READ")
    _revoke(secure_stack, [acl])
    daemon = Daemon(
        config,
        tmp_path / "daemon.log",
        port,
        args=["run", "--config", str(config), "--rules", "rules/examples"],
    )
    daemon.start(wait=False)
    granted = False
    try:
        status, body = wait_for(
            "/readyz to name the missing ACL",
            lambda: _readyz_saying(port, "READ on group"),
            timeout_s=60,
        )
        assert status == 503, body
        assert f"needs READ on group '{app_id}" in body, body
        assert daemon.proc is not None
        assert daemon.proc.poll() is None, daemon.log()
        _grant(secure_stack, [acl])
        granted = True
        wait_for("the daemon to become ready", lambda: _readyz(port)[0] == 200, timeout_s=120)
    finally:
        if not granted:
            _grant(secure_stack, [acl])
        daemon.kill(signal.SIGTERM)
    text = daemon.log()
    said = [line for line in text.splitlines() if "not ready:" in line]
    assert len(said) == 1, text
    assert "READ on group" in said[0]
    assert "Traceback" not in text


# -- mm2 failover: READ (and, to undo, DELETE) on the groups it moves -----------------------------


def _group_commits(stack: StackInfo, alias: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient(dict[str, str | int | float | bool](stack.admin_config(alias)))
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    result = future.result(timeout=30)
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or []
        if tp.offset >= 0
    }


def test_failover_needs_read_on_the_groups_it_moves_and_delete_to_undo(
    secure_stack: StackInfo, principal: Principal, connectors: Connectors
) -> None:
    """On SASL_SSL with ACLs: offsetd's ACLs read everything a failover plans from (checkpoints,
    offset syncs, both clusters' groups); committing the group on the target needs READ on it,
    and an undo that removes the commits again DELETE. Each refusal is one line naming the ACL,
    with nothing changed; granted, the group is moved and restored exactly."""
    group = connectors.mirrored_group
    wait_for("MM2 to checkpoint the mirrored group", lambda: _checkpointed(principal, group))
    args = ("mm2", "failover", group, "--from", "east", "--to", "west")
    dry = _run(principal, *args, "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    (move,) = json.loads(dry.stdout)["groups"][0]["partitions"]
    assert move["target_topic"] == f"{mm2.SOURCE}.{mm2.HEARTBEATS_TOPIC}"

    refused = _run(principal, *args)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 58, refused.stderr
    assert len(errors) == 1, refused.stderr
    assert f"READ on group '{group}'" in errors[0]
    assert principal.name in errors[0]
    assert _group_commits(secure_stack, "west", group) == {}

    read = Acl(principal.name, "group", "lp-mirrored", "READ", prefixed=True)
    delete = Acl(principal.name, "group", "lp-mirrored", "DELETE", prefixed=True)
    _grant(secure_stack, [read])
    try:
        done = _run(principal, *args, "-o", "json")
        assert done.returncode == 0, done.stderr
        moved = json.loads(done.stdout)
        (outcome,) = moved["outcomes"]
        assert outcome["status"] == "applied"
        target = moved["groups"][0]["partitions"][0]
        assert _group_commits(secure_stack, "west", group) == {
            (target["target_topic"], 0): target["target_offset"]
        }
        undo = ("offsets", "undo", outcome["snapshot_id"], "--kafka-cluster", "west")
        no_delete = _run(principal, *undo)
        assert no_delete.returncode == 58, no_delete.stderr
        assert f"DELETE on group '{group}'" in no_delete.stderr
        _grant(secure_stack, [delete])
        undone = _run(principal, *undo)
        assert undone.returncode == 0, undone.stderr
        assert _group_commits(secure_stack, "west", group) == {}
    finally:
        _revoke(secure_stack, [read, delete])
