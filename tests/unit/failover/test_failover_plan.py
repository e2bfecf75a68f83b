"""The failover translation: every source of translation, every refusal, the re-read bounds."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from offsetd.failover.plan import FlowInputs, GroupInputs, PlanOptions, plan_group, target_topic
from offsetd.failover.policy import ReplicationPolicy, policy_of_config
from offsetd.failover.syncs import OffsetSync, SyncIndex, decode_offset_sync
from offsetd.lag.checkpoints import Checkpoint, CheckpointError

NOW = 1_000_000_000
DEFAULT = ReplicationPolicy()


def cp(group: str, topic: str, p: int, up: int, down: int, age_s: float = 10) -> Checkpoint:
    return Checkpoint(group, topic, p, up, down, int(NOW - age_s * 1000))


def flow(
    checkpoints: list[Checkpoint] = (),  # type: ignore[assignment]
    syncs: list[OffsetSync] | None = None,
    inverse: list[OffsetSync] | None = None,
    marks: dict[tuple[str, int], tuple[int, int]] | None = None,
    policy: ReplicationPolicy = DEFAULT,
    source: str = "east",
    target: str = "west",
) -> FlowInputs:
    return FlowInputs(
        source,
        target,
        policy,
        {(c.group, c.topic, c.partition): c for c in checkpoints},
        None if syncs is None else SyncIndex(syncs),
        None if inverse is None else SyncIndex(inverse),
        marks if marks is not None else {("east.t", 0): (0, 300), ("east.t", 1): (0, 300)},
        NOW,
    )


def group(
    commits: dict[tuple[str, int], int] | None,
    target: dict[tuple[str, int], int] | None = None,
    **kw: Any,
) -> GroupInputs:
    return GroupInputs("g", commits, target or {}, **kw)


def test_a_checkpoint_translates_and_bounds_the_reread_by_the_target_log() -> None:
    plan = plan_group(flow([cp("g", "east.t", 0, 250, 250)]), group({("t", 0): 250}), PlanOptions())
    (move,) = plan.moves
    assert (move.target_topic, move.target_offset, move.via, move.action) == (
        "east.t",
        250,
        "checkpoint",
        "commit",
    )
    assert (move.reread_min, move.reread_max) == (0, 50)  # no sync: only the log end bounds it
    assert plan.refusal is None
    assert plan.commits == {("east.t", 0): 250}


def test_an_offset_sync_translates_a_commit_newer_than_its_checkpoint() -> None:
    syncs = [OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 200, 200)]
    plan = plan_group(
        flow([cp("g", "east.t", 0, 150, 101)], syncs),
        group({("t", 0): 270}),
        PlanOptions(),
    )
    (move,) = plan.moves
    assert (move.target_offset, move.via) == (201, "offset-sync")  # the sync + 1, past 101
    assert move.reread_max == 69  # at most 270 - 200 records between the sync and the commit
    assert move.reread_min == 0


def test_a_sync_exactly_at_the_commit_translates_exactly() -> None:
    plan = plan_group(
        flow([], [OffsetSync("t", 0, 250, 250)]), group({("t", 0): 250}), PlanOptions()
    )
    assert (plan.moves[0].target_offset, plan.moves[0].reread_max) == (250, 0)


def test_a_checkpoint_ahead_of_a_group_that_went_back_is_not_used() -> None:
    plan = plan_group(flow([cp("g", "east.t", 0, 250, 250)]), group({("t", 0): 100}), PlanOptions())
    (move,) = plan.moves
    assert move.action == "refuse"
    assert "went back" in " ".join(move.notes)
    assert plan.refusal is not None
    assert "t-0" in plan.refusal


@pytest.mark.parametrize(
    ("missing", "offset", "action"), [("earliest", 5, "commit"), ("latest", 300, "commit")]
)
def test_a_partition_nothing_translates_follows_missing(
    missing: str, offset: int, action: str
) -> None:
    marks = {("east.t", 0): (0, 300), ("east.t", 1): (5, 300)}
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)], marks=marks),
        group({("t", 0): 250, ("t", 1): 40}),
        PlanOptions(missing=missing),  # type: ignore[arg-type]
    )
    second = plan.moves[1]
    assert (second.target_offset, second.via, second.action) == (offset, missing, action)
    assert plan.refusal is None


def test_a_partition_nothing_translates_refuses_the_whole_group_by_default() -> None:
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)]),
        group({("t", 0): 250, ("t", 1): 40}),
        PlanOptions(),
    )
    assert plan.refusal is not None
    assert "t-1" in plan.refusal
    assert [m.action for m in plan.moves] == ["commit", "refuse"]


def test_members_on_the_target_refuse_the_group_naming_them() -> None:
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)]),
        group({("t", 0): 250}, target_state="STABLE", target_members=("app-1@10.0.0.1",)),
        PlanOptions(),
    )
    assert plan.refusal is not None
    assert "app-1@10.0.0.1" in plan.refusal


def test_never_backwards_unless_asked() -> None:
    inputs = group({("t", 0): 250}, {("east.t", 0): 280})
    kept = plan_group(flow([cp("g", "east.t", 0, 250, 250)]), inputs, PlanOptions())
    assert kept.moves[0].action == "keep"
    assert "already at 280" in " ".join(kept.moves[0].notes)
    assert kept.commits == {}
    assert kept.refusal is None
    back = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)]), inputs, PlanOptions(allow_backwards=True)
    )
    assert back.moves[0].action == "commit"
    assert back.commits == {("east.t", 0): 250}


def test_what_mm2_sync_group_offsets_committed_is_named() -> None:
    synced = group({("t", 0): 250}, {("east.t", 0): 250})
    same = plan_group(flow([cp("g", "east.t", 0, 250, 250)]), synced, PlanOptions())
    assert same.moves[0].action == "unchanged"
    assert "sync.group.offsets.enabled" in " ".join(same.moves[0].notes)
    moved_on = group({("t", 0): 270}, {("east.t", 0): 250})
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)], [OffsetSync("t", 0, 260, 260)]),
        moved_on,
        PlanOptions(),
    )
    assert (plan.moves[0].action, plan.moves[0].target_offset) == ("commit", 261)
    assert "moved on from it" in " ".join(plan.moves[0].notes)


def test_unchanged_when_the_target_already_has_it() -> None:
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)]),
        group({("t", 0): 250}, {("east.t", 0): 250}),
        PlanOptions(),
    )
    assert plan.moves[0].action == "unchanged"
    assert plan.commits == {}


def test_a_stale_checkpoint_is_refused_unless_allowed() -> None:
    old = [cp("g", "east.t", 0, 200, 200, age_s=900)]
    stale = plan_group(flow(old), group({("t", 0): 260}), PlanOptions(max_checkpoint_age_s=300))
    assert stale.refusal is not None
    assert "stale" in stale.refusal
    allowed = plan_group(
        flow(old), group({("t", 0): 260}), PlanOptions(max_checkpoint_age_s=300, allow_stale=True)
    )
    assert allowed.refusal is None
    assert allowed.moves[0].reread_min == 60
    # an old checkpoint the group has not moved past is not stale: an idle group
    idle = plan_group(flow(old), group({("t", 0): 200}), PlanOptions(max_checkpoint_age_s=300))
    assert idle.refusal is None


def test_without_the_source_the_checkpoints_are_the_groups_partitions() -> None:
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250), cp("other", "east.t", 0, 1, 1)]),
        group(None),
        PlanOptions(),
    )
    (move,) = plan.moves
    assert (move.source_topic, move.source_offset, move.target_offset) == ("t", None, 250)
    assert any("did not answer" in n for n in plan.notes)


def test_retention_and_log_end_clamp_the_offset() -> None:
    marks = {("east.t", 0): (260, 300)}
    plan = plan_group(
        flow([cp("g", "east.t", 0, 250, 250)], marks=marks), group({("t", 0): 250}), PlanOptions()
    )
    assert plan.moves[0].target_offset == 260
    assert "retention" in plan.moves[0].notes[-1]


def test_a_topic_missing_on_the_target_is_refused_or_left_out() -> None:
    plan = plan_group(flow([], marks={}), group({("t", 0): 5}), PlanOptions())
    assert plan.refusal is not None
    left = plan_group(flow([], marks={}), group({("t", 0): 5}), PlanOptions(missing="earliest"))
    assert left.moves[0].action == "leave-out"
    assert left.refusal is None
    assert left.commits == {}


def test_failback_inverts_the_other_flows_syncs() -> None:
    # The group is on west reading east.t (a replica); the east -> west flow's syncs, keyed by
    # east's topic, translate it back to t on east.
    inverse = [OffsetSync("t", 0, 100, 100), OffsetSync("t", 0, 280, 280)]
    back = flow([], None, inverse, marks={("t", 0): (0, 330)}, source="west", target="east")
    assert target_topic(back, "east.t") == "t"
    plan = plan_group(back, group({("east.t", 0): 300}, {("t", 0): 270}), PlanOptions())
    (move,) = plan.moves
    assert (move.target_topic, move.target_offset, move.via) == ("t", 281, "inverse-sync")
    assert move.action == "commit"
    assert move.reread_max == 330 - 281
    # a later sync bounds the re-read
    inverse.append(OffsetSync("t", 0, 320, 320))
    plan = plan_group(
        flow([], None, inverse, marks={("t", 0): (0, 330)}, source="west", target="east"),
        group({("east.t", 0): 300}),
        PlanOptions(),
    )
    assert plan.moves[0].reread_max == 320 - 281


def test_identity_policy_keeps_names_and_knows_replicas_from_the_other_flow() -> None:
    identity = ReplicationPolicy("identity")
    f = flow([cp("g", "t", 0, 250, 250)], policy=identity, marks={("t", 0): (0, 300)})
    assert target_topic(f, "t") == "t"
    plan = plan_group(f, group({("t", 0): 250}), PlanOptions())
    assert plan.moves[0].target_offset == 250
    assert plan.moves[0].via == "checkpoint"
    back = flow(
        [], None, [OffsetSync("t", 0, 10, 10)], {("t", 0): (0, 300)}, identity, "west", "east"
    )
    plan = plan_group(back, group({("t", 0): 50}), PlanOptions())
    assert (plan.moves[0].target_offset, plan.moves[0].via) == (11, "inverse-sync")


def test_policy_of_config_and_internal_topic_names() -> None:
    assert policy_of_config({}) == ReplicationPolicy()
    p = policy_of_config(
        {
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "replication.policy.separator": "_",
        }
    )
    assert (p.kind, p.checkpoints_topic("east"), p.offset_syncs_topic("west")) == (
        "identity",
        "east_checkpoints_internal",
        "mm2-offset-syncs_west_internal",
    )
    with pytest.raises(ValueError, match="--policy"):
        policy_of_config({"replication.policy.class": "com.example.Custom"})
    assert ReplicationPolicy().origin("east.t") == ("east", "t")
    assert ReplicationPolicy().origin("t") is None


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def test_offset_sync_records_decode_and_bad_ones_are_named() -> None:
    key = _string("orders") + struct.pack(">i", 3)
    sync = decode_offset_sync(key, struct.pack(">qq", 120, 118))
    assert sync == OffsetSync("orders", 3, 120, 118)
    for bad_key, bad_value, why in [
        (None, b"", "no key"),
        (key + b"x", struct.pack(">qq", 1, 1), "wrong length"),
        (key, struct.pack(">q", 1), "two offsets"),
        (key, struct.pack(">qq", -1, 1), "negative"),
    ]:
        with pytest.raises(CheckpointError, match=why):
            decode_offset_sync(bad_key, bad_value)


def test_sync_index_searches_both_ways() -> None:
    index = SyncIndex([OffsetSync("t", 0, 10, 12), OffsetSync("t", 0, 50, 55)])
    assert index.forward(("t", 0), 9) is None
    assert index.forward(("t", 0), 10) == (12, 10, 12)
    assert index.forward(("t", 0), 30) == (13, 10, 12)
    assert index.inverse(("t", 0), 60) == (51, 50, 55)
    assert index.next_upstream_after(("t", 0), 20) == 50
    assert index.next_upstream_after(("t", 0), 55) is None
    assert len(index) == 2
    assert index.count(("t", 0)) == 2
