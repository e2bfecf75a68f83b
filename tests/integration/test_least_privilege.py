"""offsetd's least privilege, proven on the secure stack.

A principal of its own gets exactly offsetd's ACLs (`devstack.security.OFFSETD_ACLS`, the
least-privilege table of docs/security.md) on both clusters. With them every toolkit feature
works; then each ACL is removed in turn and the feature that needs it fails with one line
naming the operation and the topic or group, exit code 58 (`KafkaAccessDenied`), in seconds.

The daemon runs on these ACLs in `test_secure_stack.py` (the stack grants them to `offsetd`,
and the demo heals a poison record as that principal); here it is shown waiting, unready and
naming the ACL, without READ on its own group, and starting once it is granted.

The principal here is a SCRAM user; `test_mtls.py` proves the same for a client certificate's
principal on the mTLS stack. What both run (the principal of either kind, the connectors, `NEEDS`
and the features, the refusal's checks, the daemon's wait) is `leastpriv`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from offsetd.devstack import mm2
from offsetd.devstack.security import OFFSETD_ACLS, Acl
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import wait_for
from tests.integration.leastpriv import (
    NEEDS,
    Connectors,
    Principal,
    checkpointed,
    daemon_waits_for_group_read,
    every_feature_passes,
    grant,
    made_connectors,
    made_principal,
    refused_without,
    revoke,
    run,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def principal(
    secure_stack: StackInfo, secure_yaml: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Principal]:
    """A SCRAM user with offsetd's ACLs only (`leastpriv.made_principal`)."""
    folder = tmp_path_factory.mktemp("least-privilege")
    with made_principal("scram", secure_stack, secure_yaml, folder) as made:
        yield made


@pytest.fixture(scope="module")
def connectors(
    secure_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Connectors]:
    """The offline toolkit's subjects, STOPPED (`leastpriv.made_connectors`)."""
    with made_connectors(secure_stack, tmp_path_factory.mktemp("lp-connectors")) as made:
        yield made


def test_every_acl_is_tested() -> None:
    tested = {index for index, _words in NEEDS.values()}
    untested = [a for i, a in enumerate(OFFSETD_ACLS) if i not in tested]
    # the daemon's own groups: test_the_daemon_without_read_on_its_group_waits_and_says_so
    assert untested == [Acl("offsetd", "group", "offsetd", "READ", prefixed=True)]


def test_offsetds_acls_are_enough_for_every_feature(
    principal: Principal, connectors: Connectors
) -> None:
    every_feature_passes(principal, connectors)


@pytest.mark.parametrize("which", list(NEEDS))
def test_each_acl_removed_is_named_in_one_line(
    secure_stack: StackInfo, principal: Principal, connectors: Connectors, which: str
) -> None:
    refused_without(secure_stack, principal, connectors, which)


# -- the daemon: READ on its own groups -----------------------------------------------------------


def test_the_daemon_without_read_on_its_group_waits_and_says_so(
    secure_stack: StackInfo, principal: Principal, tmp_path: Path
) -> None:
    """Without READ on its consumer group the daemon is unready and names the ACL (faust's join
    alone would wait in silence); once the ACL is granted it starts, without a restart."""
    daemon_waits_for_group_read(secure_stack, principal, tmp_path)


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
    wait_for("MM2 to checkpoint the mirrored group", lambda: checkpointed(principal, group))
    args = ("mm2", "failover", group, "--from", "east", "--to", "west")
    dry = run(principal, *args, "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    (move,) = json.loads(dry.stdout)["groups"][0]["partitions"]
    assert move["target_topic"] == f"{mm2.SOURCE}.{mm2.HEARTBEATS_TOPIC}"

    refused = run(principal, *args)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 58, refused.stderr
    assert len(errors) == 1, refused.stderr
    assert f"READ on group '{group}'" in errors[0]
    assert principal.name in errors[0]
    assert _group_commits(secure_stack, "west", group) == {}

    read = Acl(principal.name, "group", "lp-mirrored", "READ", prefixed=True)
    delete = Acl(principal.name, "group", "lp-mirrored", "DELETE", prefixed=True)
    grant(secure_stack, [read])
    try:
        done = run(principal, *args, "-o", "json")
        assert done.returncode == 0, done.stderr
        moved = json.loads(done.stdout)
        (outcome,) = moved["outcomes"]
        assert outcome["status"] == "applied"
        target = moved["groups"][0]["partitions"][0]
        assert _group_commits(secure_stack, "west", group) == {
            (target["target_topic"], 0): target["target_offset"]
        }
        undo = ("offsets", "undo", outcome["snapshot_id"], "--kafka-cluster", "west")
        no_delete = run(principal, *undo)
        assert no_delete.returncode == 58, no_delete.stderr
        assert f"DELETE on group '{group}'" in no_delete.stderr
        grant(secure_stack, [delete])
        undone = run(principal, *undo)
        assert undone.returncode == 0, undone.stderr
        assert _group_commits(secure_stack, "west", group) == {}
    finally:
        revoke(secure_stack, [read, delete])
