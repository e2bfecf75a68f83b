"""Committing a failover plan on the target, safely, and undoing it exactly.

Per group, in order: read the group again (members refused; a commit that moved since the plan
was made refuses the group: plan again), write the snapshot ("planned": the group's whole
before-image on the target and the after-image), commit, read the commits back, record the
outcome on the snapshot ("applied", or "failed" with what differs). `offsetd offsets history`
lists these snapshots and `offsetd offsets undo <id> --kafka-cluster <target>` restores the
before-image exactly: Kafka has no admin call that removes one partition's commit, so when the
change added partitions the undo removes the (empty) group and commits the before-image.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from offsetd.errors import FailoverError
from offsetd.failover.kafka import TargetGroups
from offsetd.failover.plan import IDLE_STATES, GroupPlan
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.snapshots import Snapshot, SnapshotStore, new_snapshot_id

__all__ = [
    "GROUP_OPERATIONS",
    "GroupOutcome",
    "apply_group",
    "cluster_label",
    "entries_of",
    "offsets_of",
    "undo_group",
]

TP = tuple[str, int]
GROUP_OPERATIONS = frozenset({"mm2-failover", "mm2-failback", "group-undo"})


def cluster_label(alias: str) -> str:
    """The snapshot's `connect_cluster` for a consumer group's change: the Kafka cluster."""
    return f"kafka:{alias}"


def entries_of(commits: Mapping[TP, int]) -> tuple[OffsetEntry, ...]:
    """A group's commits as offset entries, in the KIP-875 shape of a sink connector's."""
    return tuple(
        OffsetEntry({"kafka_topic": t, "kafka_partition": p}, {"kafka_offset": o})
        for (t, p), o in sorted(commits.items())
    )


def offsets_of(entries: tuple[OffsetEntry, ...]) -> dict[TP, int]:
    out: dict[TP, int] = {}
    for entry in entries:
        topic, partition = (
            entry.partition.get("kafka_topic"),
            entry.partition.get("kafka_partition"),
        )
        offset = (entry.offset or {}).get("kafka_offset")
        if not isinstance(topic, str) or not isinstance(partition, int):
            raise FailoverError(f"not a consumer group's entry: {entry.as_json()}")
        if isinstance(offset, int) and not isinstance(offset, bool):
            out[(topic, partition)] = offset
    return out


@dataclass(frozen=True)
class GroupOutcome:
    group: str
    snapshot_id: str | None
    status: str  # applied | failed | unchanged | refused
    committed: int
    message: str

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _idle_or_refuse(groups: TargetGroups, group: str) -> dict[TP, int]:
    found = groups.describe([group])[group]
    if found.state.upper() not in IDLE_STATES or found.members:
        raise FailoverError(
            f"group {group} is {found.state} on {groups.alias} with {len(found.members)} active "
            f"member(s): {', '.join(found.members) or 'none listed'}; stop them first"
        )
    return found.commits


def _mismatch(want: Mapping[TP, int], got: Mapping[TP, int]) -> str | None:
    for tp in sorted(set(want) | set(got)):
        if want.get(tp) != got.get(tp):
            return f"{tp[0]}-{tp[1]} reads {got.get(tp)} (expected {want.get(tp)})"
    return None


def apply_group(
    groups: TargetGroups,
    store: SnapshotStore,
    plan: GroupPlan,
    operation: str,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> GroupOutcome:
    commits = plan.commits
    if not commits:
        return GroupOutcome(plan.group, None, "unchanged", 0, "nothing to commit")
    before = _idle_or_refuse(groups, plan.group)
    for move in plan.moves:
        tp = (move.target_topic, move.partition)
        if tp in commits and before.get(tp) != move.current:
            raise FailoverError(
                f"group {plan.group}: {tp[0]}-{tp[1]} moved on {groups.alias} since the plan "
                f"({move.current} -> {before.get(tp)}): nothing changed; run it again"
            )
    after = {**before, **commits}
    snapshot = Snapshot(
        id=new_snapshot_id(now()),
        created_at=now(),
        connect_cluster=cluster_label(groups.alias),
        connector=plan.group,
        operation=operation,
        status="planned",
        before=entries_of(before),
        after=entries_of(after),
        message=f"{plan.source} -> {plan.target}: {len(commits)} partition(s)",
    )
    return _recorded(
        groups, store, snapshot, lambda: groups.alter(plan.group, commits), after, len(commits)
    )


def _recorded(
    groups: TargetGroups,
    store: SnapshotStore,
    snapshot: Snapshot,
    write: Callable[[], None],
    expected: Mapping[TP, int],
    count: int,
) -> GroupOutcome:
    """Write a group's change with its snapshot around it: "planned" first, then the commits
    written and read back, then "applied", or "failed" with what differs (or what was raised,
    which is raised again)."""
    group = snapshot.connector
    store.put(snapshot)
    try:
        write()
        wrong = _mismatch(expected, groups.commits(group))
    except Exception as exc:
        store.put(dataclasses.replace(snapshot, status="failed", message=str(exc)))
        raise
    if wrong is not None:
        text = f"read back: {wrong}"
        store.put(dataclasses.replace(snapshot, status="failed", message=text))
        return GroupOutcome(group, snapshot.id, "failed", count, text)
    store.put(dataclasses.replace(snapshot, status="applied"))
    return GroupOutcome(group, snapshot.id, "applied", count, snapshot.message)


def undo_group(
    groups: TargetGroups,
    store: SnapshotStore,
    snapshot_id: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[Snapshot, GroupOutcome | None]:
    """Restore a group's before-image exactly; the plan (a snapshot) when `dry_run`."""
    original = store.get(snapshot_id)
    if original.operation not in GROUP_OPERATIONS:
        raise FailoverError(
            f"snapshot {snapshot_id} is a connector's ({original.operation} of "
            f"{original.connector}): undo it without --kafka-cluster"
        )
    if original.connect_cluster != cluster_label(groups.alias):
        raise FailoverError(
            f"snapshot {snapshot_id} changed group {original.connector} on "
            f"{original.connect_cluster.removeprefix('kafka:')}, not on {groups.alias}"
        )
    group = original.connector
    restore, expected = offsets_of(original.before), offsets_of(original.after)
    current = _idle_or_refuse(groups, group)
    moved = _mismatch(expected, current)
    if moved is not None and not force:
        raise FailoverError(
            f"group {group} moved on {groups.alias} since snapshot {snapshot_id} ({moved}): "
            "nothing changed; --force restores its before-image anyway"
        )
    undo = Snapshot(
        id=new_snapshot_id(now()),
        created_at=now(),
        connect_cluster=original.connect_cluster,
        connector=group,
        operation="group-undo",
        status="planned",
        before=entries_of(current),
        after=entries_of(restore),
        message=f"restores the before-image of {snapshot_id}",
        undo_of=snapshot_id,
    )
    if dry_run:
        return undo, None

    def write() -> None:
        if set(current) - set(restore):
            groups.delete_group(group)  # commits to remove: the group goes, the image returns
        if restore:
            groups.alter(group, restore)

    outcome = _recorded(groups, store, undo, write, restore, len(restore))
    if outcome.status == "applied":
        store.put(dataclasses.replace(original, status="undone", message=f"undone by {undo.id}"))
    return undo, outcome
