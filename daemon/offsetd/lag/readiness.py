"""Failover readiness: could a consumer group move to an MM2 flow's target now? (pure, no I/O)

A group fails over by starting on the target at the offsets MirrorCheckpointConnector wrote for
it (its checkpoints, translated: `checkpoints`). That works for the partitions it consumes only
where a checkpoint exists: a partition without one starts wherever the group's
`auto.offset.reset` says (the whole log again, or nothing of it), which is why one uncovered
partition makes the group not ready, however many are covered. A checkpoint that exists but fell
behind the group (older than `lag.failover_max_checkpoint_age` while the group's commit on the
source is past it: MM2 stopped following) makes it not ready too; an old checkpoint of a group
that has not moved is current, not stale (MM2 writes none while nothing changes).

Which partitions count: the group's committed partitions on the source, of the topics the flow
replicates. Those are the topics of the MirrorSourceConnectors on the same source -> target
pair (`task.assigned.partitions`); while none is known (stopped, not read yet) the topics that
have a checkpoint of any group in the flow stand in. A commit on a topic MM2 does not replicate
is not the flow's to carry, and is left out rather than read as uncovered.

Which groups: every group with a checkpoint in the flow (informational), and every group
expected to fail over (`lag.failover_groups` globs, matched against the groups listed on the
source; a pattern without glob characters names its group even when no listing has it), with
a reason whenever it is not ready. One pass over the checkpoints and commits: O(partitions).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from offsetd.durations import format_duration
from offsetd.lag import checkpoints as cp

__all__ = [
    "UNCOVERED_SHOWN",
    "CheckpointFlow",
    "GroupReadiness",
    "expected_groups",
    "flow_readiness",
    "is_glob",
]

TP = tuple[str, int]
#: Uncovered partitions named in a row (the count is always whole): enough to act on, and a
#: group of 10,000 partitions does not put 10,000 names into every snapshot.
UNCOVERED_SHOWN = 10


@dataclass(frozen=True, slots=True)
class CheckpointFlow:
    """A MirrorCheckpointConnector: where its checkpoints come from and go."""

    connect_cluster: str
    connector: str
    source: str
    target: str


@dataclass(frozen=True, slots=True)
class GroupReadiness:
    """One group on one checkpoint flow: could it fail over to the target now, and at what cost."""

    connect_cluster: str  # the MirrorCheckpointConnector's
    connector: str
    source: str
    target: str
    group: str
    expected: bool  # matches lag.failover_groups
    commits_known: bool  # its committed offsets on the source were read this cycle
    partitions: int  # committed on the source, of replicated topics
    covered: int  # of those, with a checkpoint
    uncovered_count: int
    uncovered: tuple[str, ...]  # "topic-partition", the first UNCOVERED_SHOWN in order
    stale: int  # checkpoints older than the max age while the group is past them
    checkpoint_age_max_seconds: float | None  # only over checkpoints the group is past
    reread_lower_bound: int | None  # summed over covered partitions; None: commits unknown
    ready: bool
    reason: str  # why not ready; "" when ready

    def as_json(self) -> dict[str, Any]:
        return {
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "source": self.source,
            "target": self.target,
            "group": self.group,
            "expected": self.expected,
            "ready": self.ready,
            "reason": self.reason,
            "commits_known": self.commits_known,
            "partitions": self.partitions,
            "covered": self.covered,
            "uncovered_count": self.uncovered_count,
            "uncovered": list(self.uncovered),
            "stale": self.stale,
            "checkpoint_age_max_seconds": self.checkpoint_age_max_seconds,
            "reread_records_lower_bound": self.reread_lower_bound,
        }


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def expected_groups(patterns: Collection[str], candidates: Iterable[str]) -> set[str]:
    """The candidates any pattern matches, and every pattern that is a plain name."""
    named = {p for p in patterns if not is_glob(p)}
    globs = [p for p in patterns if is_glob(p)]
    found = set(named)
    for group in candidates:
        if group not in found and any(fnmatchcase(group, g) for g in globs):
            found.add(group)
    return found


def flow_readiness(
    flow: CheckpointFlow,
    checkpoints: Mapping[str, Mapping[TP, cp.Checkpoint]],
    commits: Mapping[str, Mapping[TP, int]],
    unreadable: Mapping[str, str],
    replicated: Collection[str] | None,
    expected: Collection[str],
    *,
    max_age_ms: int,
    now_ms: int,
) -> list[GroupReadiness]:
    """Each group of one flow, by name: those with a checkpoint and those expected.

    `checkpoints`: group -> source (topic, partition) -> its newest checkpoint; `commits`: the
    groups read on the source; `unreadable`: group -> why it could not be read; `replicated`:
    the topics the flow replicates (None: unknown, the checkpointed topics stand in).
    """
    topics = (
        replicated
        if replicated is not None
        else {topic for per_group in checkpoints.values() for topic, _p in per_group}
    )
    empty: Mapping[TP, cp.Checkpoint] = {}
    return [
        _one(
            flow,
            group,
            group in expected,
            checkpoints.get(group, empty),
            commits.get(group),
            unreadable.get(group),
            topics,
            max_age_ms,
            now_ms,
        )
        for group in sorted(checkpoints.keys() | set(expected))
    ]


def _one(
    flow: CheckpointFlow,
    group: str,
    expected: bool,
    checkpoints: Mapping[TP, cp.Checkpoint],
    committed: Mapping[TP, int] | None,
    unreadable: str | None,
    topics: Collection[str],
    max_age_ms: int,
    now_ms: int,
) -> GroupReadiness:
    where = (flow.connect_cluster, flow.connector, flow.source, flow.target, group, expected)
    if committed is None:
        reason = f"unknown this cycle: {unreadable or f'its commits on {flow.source} not read'}"
        return GroupReadiness(*where, False, 0, 0, 0, (), 0, None, None, False, reason)
    partitions = covered = stale = reread = 0
    oldest: float | None = None
    uncovered: list[TP] = []
    for tp, offset in committed.items():
        if tp[0] not in topics:
            continue
        partitions += 1
        checkpoint = checkpoints.get(tp)
        if checkpoint is None:
            uncovered.append(tp)
            continue
        covered += 1
        reread += cp.reconsume_lower_bound(offset, checkpoint)
        age = cp.checkpoint_age_seconds(offset, checkpoint, now_ms)
        if age is None:  # the group is not past it: current, however old
            continue
        if oldest is None or age > oldest:
            oldest = age
        if age * 1000 > max_age_ms:
            stale += 1
    reasons = []
    if not partitions:
        reasons.append(
            f"nothing committed on {flow.source} on a topic {flow.source} -> {flow.target} "
            "replicates" + ("" if checkpoints else ", and no checkpoint")
        )
    if uncovered:
        reasons.append(f"{len(uncovered)} of {partitions} partitions have no checkpoint")
    if stale:
        reasons.append(
            f"{stale} checkpoints older than {format_duration(max_age_ms)} "
            "while the group moved past them"
        )
    shown = tuple(f"{t}-{p}" for t, p in heapq.nsmallest(UNCOVERED_SHOWN, uncovered))
    return GroupReadiness(
        *where,
        True,
        partitions,
        covered,
        len(uncovered),
        shown,
        stale,
        oldest,
        reread,
        not reasons,
        "; ".join(reasons),
    )
