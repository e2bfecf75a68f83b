"""Failover readiness per group: every way a group is or is not ready, and which groups appear."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from offsetd.lag.checkpoints import Checkpoint
from offsetd.lag.readiness import (
    UNCOVERED_SHOWN,
    CheckpointFlow,
    GroupReadiness,
    expected_groups,
    flow_readiness,
    is_glob,
)

NOW = 10_000_000
MAX_AGE_MS = 300_000
FLOW = CheckpointFlow("local", "east->west.MirrorCheckpointConnector", "east", "west")
TP = tuple[str, int]


def ckpt(group: str, topic: str, partition: int, upstream: int, age_s: float = 1.0) -> Checkpoint:
    return Checkpoint(
        group, f"east.{topic}", partition, upstream, upstream - 1, NOW - int(age_s * 1000)
    )


def judge(
    checkpoints: Mapping[str, Mapping[TP, Checkpoint]],
    commits: Mapping[str, Mapping[TP, int]],
    *,
    unreadable: Mapping[str, str] | None = None,
    replicated: Collection[str] | None = ("orders", "payments"),
    expected: Collection[str] = (),
) -> dict[str, GroupReadiness]:
    rows = flow_readiness(
        FLOW,
        checkpoints,
        commits,
        unreadable or {},
        replicated,
        expected,
        max_age_ms=MAX_AGE_MS,
        now_ms=NOW,
    )
    assert [r.group for r in rows] == sorted(r.group for r in rows)
    return {r.group: r for r in rows}


def test_every_committed_partition_checkpointed_is_ready() -> None:
    row = judge(
        {
            "g": {
                ("orders", 0): ckpt("g", "orders", 0, 90),
                ("orders", 1): ckpt("g", "orders", 1, 50),
            }
        },
        {"g": {("orders", 0): 95, ("orders", 1): 50}},
        expected={"g"},
    )["g"]
    assert (row.ready, row.expected, row.commits_known) == (True, True, True)
    assert (row.partitions, row.covered, row.uncovered_count, row.stale) == (2, 2, 0, 0)
    assert row.reread_lower_bound == 5  # 95 - 90, and 0 where the checkpoint is current
    assert row.checkpoint_age_max_seconds == 1.0  # only partition 0: the group is past it
    assert row.reason == ""
    assert (row.connect_cluster, row.connector, row.source, row.target) == (
        "local",
        FLOW.connector,
        "east",
        "west",
    )


def test_a_partition_without_a_checkpoint_makes_the_group_not_ready_and_is_named() -> None:
    row = judge(
        {"g": {("orders", 0): ckpt("g", "orders", 0, 10)}},
        {"g": {("orders", 0): 10, ("orders", 2): 7, ("payments", 1): 3}},
    )["g"]
    assert not row.ready
    assert (row.partitions, row.covered, row.uncovered_count) == (3, 1, 2)
    assert row.uncovered == ("orders-2", "payments-1")
    assert row.reason == "2 of 3 partitions have no checkpoint"
    assert not row.expected  # informational: it has checkpoints, no pattern expects it


def test_uncovered_partitions_are_counted_whole_but_named_only_up_to_the_cap() -> None:
    commits = {("orders", p): 1 for p in range(UNCOVERED_SHOWN + 5)}
    row = judge({"g": {}}, {"g": commits}, expected={"g"})["g"]
    assert row.uncovered_count == UNCOVERED_SHOWN + 5
    assert len(row.uncovered) == UNCOVERED_SHOWN
    assert row.uncovered[0] == "orders-0"


def test_a_checkpoint_older_than_the_max_age_while_the_group_moved_past_it_is_stale() -> None:
    row = judge(
        {
            "g": {
                ("orders", 0): ckpt("g", "orders", 0, 100, age_s=301),
                ("orders", 1): ckpt("g", "orders", 1, 100, age_s=30),
            }
        },
        {"g": {("orders", 0): 250, ("orders", 1): 120}},
    )["g"]
    assert not row.ready
    assert (row.covered, row.uncovered_count, row.stale) == (2, 0, 1)
    assert row.checkpoint_age_max_seconds == 301.0
    assert row.reread_lower_bound == 150 + 20
    assert row.reason == "1 checkpoints older than 5m while the group moved past them"


def test_an_old_checkpoint_of_a_group_that_has_not_moved_is_current_and_has_no_age() -> None:
    row = judge(
        {"idle": {("orders", 0): ckpt("idle", "orders", 0, 100, age_s=86_400)}},
        {"idle": {("orders", 0): 100}},
        expected={"idle"},
    )["idle"]
    assert row.ready
    assert row.stale == 0
    assert row.checkpoint_age_max_seconds is None  # the group is not past its checkpoint
    assert row.reread_lower_bound == 0


def test_an_expected_group_without_any_checkpoint_appears_not_ready() -> None:
    rows = judge({}, {"new": {("orders", 0): 42}}, expected={"new"})
    row = rows["new"]
    assert (row.expected, row.ready) == (True, False)
    assert (row.partitions, row.covered, row.uncovered_count) == (1, 0, 1)
    assert row.uncovered == ("orders-0",)
    assert row.reread_lower_bound == 0
    assert row.checkpoint_age_max_seconds is None


def test_an_expected_group_with_no_checkpoint_and_no_commit_still_appears_with_a_reason() -> None:
    row = judge({}, {"ghost": {}}, expected={"ghost"})["ghost"]
    assert (row.expected, row.ready, row.commits_known) == (True, False, True)
    assert row.partitions == 0
    assert row.reason == (
        "nothing committed on east on a topic east -> west replicates, and no checkpoint"
    )


def test_commits_only_on_topics_the_flow_does_not_replicate_are_not_a_failover() -> None:
    row = judge(
        {"g": {("orders", 0): ckpt("g", "orders", 0, 5)}},
        {"g": {("local-only", 0): 9}},
        expected={"g"},
    )["g"]
    assert not row.ready
    assert (row.partitions, row.uncovered_count) == (0, 0)
    assert row.reason == "nothing committed on east on a topic east -> west replicates"


def test_unknown_commits_make_the_group_not_ready_and_leave_the_counts_unknown() -> None:
    rows = judge(
        {"g": {("orders", 0): ckpt("g", "orders", 0, 5)}},
        {},
        unreadable={"g": "group g: no answer in time (its coordinator away?)"},
        expected={"g", "unread"},
    )
    row = rows["g"]
    assert (row.ready, row.commits_known) == (False, False)
    assert (row.reread_lower_bound, row.checkpoint_age_max_seconds) == (None, None)
    assert row.reason == "unknown this cycle: group g: no answer in time (its coordinator away?)"
    assert rows["unread"].reason == "unknown this cycle: its commits on east not read"


def test_without_the_assignment_the_checkpointed_topics_stand_in() -> None:
    rows = judge(
        {
            "a": {("orders", 0): ckpt("a", "orders", 0, 5)},
            "b": {("payments", 0): ckpt("b", "payments", 0, 5)},
        },
        # "payments" has a checkpoint of another group: replicated; "audit" has none: not known
        {"a": {("orders", 0): 5, ("payments", 3): 1, ("audit", 0): 1}, "b": {("payments", 0): 5}},
        replicated=None,
    )
    assert (rows["a"].partitions, rows["a"].uncovered) == (2, ("payments-3",))
    assert rows["b"].ready


def test_groups_are_those_checkpointed_and_those_expected() -> None:
    rows = judge(
        {"seen": {("orders", 0): ckpt("seen", "orders", 0, 5)}},
        {"seen": {("orders", 0): 5}, "wanted": {("orders", 0): 5}},
        expected={"wanted"},
    )
    assert set(rows) == {"seen", "wanted"}
    assert (rows["seen"].ready, rows["seen"].expected) == (True, False)
    assert (rows["wanted"].ready, rows["wanted"].expected) == (False, True)


@pytest.mark.parametrize(
    ("pattern", "glob"), [("orders-*", True), ("g?", True), ("[ab]c", True), ("billing", False)]
)
def test_is_glob(pattern: str, glob: bool) -> None:
    assert is_glob(pattern) is glob


def test_expected_groups_match_globs_and_keep_plain_names_even_unlisted() -> None:
    listed = ["orders-eu", "orders-us", "billing", "Orders-x"]
    assert expected_groups(["orders-*", "payments"], listed) == {
        "orders-eu",
        "orders-us",
        "payments",  # named: expected even when no listing has it (gone, or never made)
    }
    assert expected_groups([], listed) == set()
