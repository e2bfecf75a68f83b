"""The translation of consumer groups from one cluster to the other, as a plan (pure, no I/O).

For each partition a group committed on the cluster it leaves (`source`, at offset S), the
offset on the cluster it moves to (`target`) comes from whichever of MM2's own translations
apply, the furthest of them (each one re-reads rather than skips):
- the newest checkpoint of the group on the target (`<source>.checkpoints.internal`), unless
  the group went back on the source since (S below the checkpoint's upstream offset);
- the flow's offset syncs, at or below S (what MM2 would checkpoint next: a group that moved on
  since its checkpoint re-reads less);
- moving back to where a topic came from, the inverse of the other flow's offset syncs.
A partition none of them translates is `missing`: refused (the default), or set to the
target's log start (`earliest`) or end (`latest`), as asked.

Every offset is clamped to the target partition's log (retention may have deleted the start;
the target cannot be ahead of its end), compared with what the group has on the target now (a
group is never moved backwards unless asked: MM2's `sync.group.offsets.enabled` may already
have committed the checkpoint, or consumers on the target moved on), and given a re-read bound:
at most the records between the new offset and the target's log end, tighter with an offset
sync (the target holds at most as many records between two syncs as the source did). A checkpoint
that the group's commit has moved past, with no offset sync to translate the commit, and older
than `max_checkpoint_age_s`, is stale: refused unless `allow_stale`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from offsetd.failover.policy import ReplicationPolicy
from offsetd.failover.syncs import SyncIndex
from offsetd.lag.checkpoints import Checkpoint

__all__ = [
    "FlowInputs",
    "GroupInputs",
    "GroupPlan",
    "Missing",
    "PartitionMove",
    "PlanOptions",
    "plan_group",
]

TP = tuple[str, int]
Missing = Literal["earliest", "latest", "refuse"]
Action = Literal["commit", "unchanged", "keep", "refuse", "leave-out"]
Via = Literal["checkpoint", "offset-sync", "inverse-sync", "earliest", "latest", "none"]

# Target states in which an admin commit is accepted and nobody's position is overwritten.
IDLE_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN", ""})


@dataclass(frozen=True)
class PlanOptions:
    missing: Missing = "refuse"
    allow_backwards: bool = False
    max_checkpoint_age_s: float = 300.0
    allow_stale: bool = False


@dataclass(frozen=True)
class GroupInputs:
    """One group as read: its commits on the source (None: the source did not answer) and on
    the target, and who is in it on the target now."""

    group: str
    source_commits: Mapping[TP, int] | None
    target_commits: Mapping[TP, int]
    target_state: str = "EMPTY"
    target_members: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlowInputs:
    """What translates from `source` to `target`, read on the target (and the source's syncs
    where they are reachable)."""

    source: str
    target: str
    policy: ReplicationPolicy
    # the newest checkpoint per (group, target topic, partition), of the flow source -> target
    checkpoints: Mapping[tuple[str, str, int], Checkpoint]
    syncs: SyncIndex | None  # the flow source -> target (keyed by source topics); None: unread
    inverse_syncs: SyncIndex | None  # the flow target -> source (keyed by target topics)
    watermarks: Mapping[TP, tuple[int, int]]  # target partitions: (log start, log end)
    now_ms: int


@dataclass(frozen=True)
class PartitionMove:
    source_topic: str
    partition: int
    target_topic: str
    source_offset: int | None  # the group's commit on the source (None: unknown)
    target_offset: int | None  # the offset to commit (None: nothing)
    current: int | None  # the group's commit on the target now
    via: Via
    action: Action
    reread_min: int = 0
    reread_max: int | None = None  # None: no bound known
    checkpoint_age_s: float | None = None
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "source_topic": self.source_topic,
            "partition": self.partition,
            "target_topic": self.target_topic,
            "source_offset": self.source_offset,
            "target_offset": self.target_offset,
            "current": self.current,
            "via": self.via,
            "action": self.action,
            "reread_min": self.reread_min,
            "reread_max": self.reread_max,
            "checkpoint_age_seconds": self.checkpoint_age_s,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class GroupPlan:
    group: str
    source: str
    target: str
    moves: tuple[PartitionMove, ...]
    refusal: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def commits(self) -> dict[TP, int]:
        """The offsets this plan commits on the target."""
        return {
            (m.target_topic, m.partition): m.target_offset
            for m in self.moves
            if m.action == "commit" and m.target_offset is not None
        }

    @property
    def reread_max(self) -> int | None:
        bounds = [m.reread_max for m in self.moves if m.action in ("commit", "unchanged", "keep")]
        return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "source": self.source,
            "target": self.target,
            "refusal": self.refusal,
            "notes": list(self.notes),
            "commits": len(self.commits),
            "reread_max": self.reread_max,
            "reread_min": sum(m.reread_min for m in self.moves if m.action != "refuse"),
            "partitions": [m.as_json() for m in self.moves],
        }


def came_from_target(flow: FlowInputs, topic: str) -> str | None:
    """The target's own topic a source topic replicates (moving back), or None."""
    origin = flow.policy.origin(topic)
    if origin is not None:
        return origin[1] if origin[0] == flow.target else None
    if (
        flow.policy.kind == "identity"
        and flow.inverse_syncs is not None
        and flow.inverse_syncs.has_topic(topic)
    ):
        return topic  # the other flow replicates it under the same name: it came from there
    return None


def target_topic(flow: FlowInputs, topic: str) -> str:
    """The name a topic of the source has on the target: back to its own name when it came
    from the target (MM2's checkpoints rename it the same way), else its remote name."""
    home = came_from_target(flow, topic)
    return home if home is not None else flow.policy.remote_topic(flow.source, topic)


def _source_topic_of(flow: FlowInputs, target: str) -> str:
    """The source topic a checkpoint's (target) topic stands for."""
    if flow.policy.kind == "identity":
        return target
    prefix = f"{flow.source}{flow.policy.separator}"
    if target.startswith(prefix):
        return target[len(prefix) :]
    return f"{flow.target}{flow.policy.separator}{target}"  # a topic back at home


@dataclass
class _Candidate:
    via: Via
    offset: int
    bound: int | None = None  # re-read bound this translation gives, before clamping


def _candidates(
    flow: FlowInputs, group: str, topic: str, tt: str, p: int, s: int | None, notes: list[str]
) -> tuple[list[_Candidate], Checkpoint | None]:
    found: list[_Candidate] = []
    cp = flow.checkpoints.get((group, tt, p))
    if cp is not None:
        if s is not None and s < cp.upstream_offset:
            notes.append(
                f"the checkpoint is ahead of the group's commit ({cp.upstream_offset} > {s}: "
                "the group went back on the source since): not used"
            )
        else:
            found.append(_Candidate("checkpoint", cp.downstream_offset))
    home = came_from_target(flow, topic) is not None
    if s is not None and flow.syncs is not None and not home:
        hit = flow.syncs.forward((topic, p), s)
        if hit is not None:
            offset, up, down = hit
            found.append(_Candidate("offset-sync", offset, down + (s - up) - offset))
    if s is not None and flow.inverse_syncs is not None and home:
        hit = flow.inverse_syncs.inverse((tt, p), s)
        if hit is not None:
            offset, _up, _down = hit
            after = flow.inverse_syncs.next_upstream_after((tt, p), s)
            found.append(
                _Candidate("inverse-sync", offset, None if after is None else after - offset)
            )
    return found, cp


def _move(
    flow: FlowInputs,
    opts: PlanOptions,
    inputs: GroupInputs,
    topic: str,
    p: int,
    s: int | None,
    tt: str,
) -> PartitionMove:
    notes: list[str] = []
    found, cp = _candidates(flow, inputs.group, topic, tt, p, s, notes)
    current = inputs.target_commits.get((tt, p))
    marks = flow.watermarks.get((tt, p))
    age = None
    if cp is not None:
        age = max(0.0, (flow.now_ms - cp.timestamp_ms) / 1000.0)
    base = {"current": current, "checkpoint_age_s": age}

    def move(**kw: Any) -> PartitionMove:
        values = {**base, **kw}
        return PartitionMove(
            topic, p, tt, s, values.pop("target_offset", None), notes=tuple(notes), **values
        )

    if not found:
        if marks is None:
            notes.append(f"{tt} has no partition {p} on {flow.target}")
        else:
            notes.append(
                "no checkpoint and no offset sync translates it "
                "(--missing earliest|latest starts it at the target's log start or end)"
            )
        if opts.missing == "refuse" or marks is None:
            action: Action = "refuse" if opts.missing == "refuse" else "leave-out"
            return move(via="none", action=action)
        offset = marks[0] if opts.missing == "earliest" else marks[1]
        return _decided(
            move, notes, opts, cp, opts.missing, offset, marks[1] - offset, current, marks
        )
    best = max(found, key=lambda c: c.offset)
    via = best.via
    if marks is None:
        notes.append(f"{tt} has no partition {p} on {flow.target}")
        return move(via=via, action="refuse" if opts.missing == "refuse" else "leave-out")
    reread_min = 0
    if via == "checkpoint" and cp is not None and s is not None:
        reread_min = max(0, s - cp.upstream_offset)
        stale = s > cp.upstream_offset and age is not None and age > opts.max_checkpoint_age_s
        if stale:
            notes.append(
                f"stale: the group committed {s} on {flow.source}, {s - cp.upstream_offset} past "
                f"its checkpoint of {age:.0f} s ago (bound {opts.max_checkpoint_age_s:.0f} s) "
                "and no offset sync translates the commit"
            )
            if not opts.allow_stale:
                return move(via=via, action="refuse", target_offset=best.offset)
    if s is None and via == "checkpoint" and cp is not None:
        notes.append(
            f"{flow.source} did not answer: translated from the checkpoint of {age:.0f} s ago; "
            "what the group read on the source after it is read again"
        )
    return _decided(move, notes, opts, cp, via, best.offset, best.bound, current, marks, reread_min)


def _decided(
    move: Callable[..., PartitionMove],
    notes: list[str],
    opts: PlanOptions,
    cp: Checkpoint | None,
    via: Via,
    offset: int,
    bound: int | None,
    current: int | None,
    marks: tuple[int, int],
    reread_min: int = 0,
) -> PartitionMove:
    low, high = marks
    if offset < low:
        notes.append(f"the target's log starts at {low} (retention): moved up from {offset}")
        offset = low
    if offset > high:
        notes.append(f"the target's log ends at {high}: moved down from {offset}")
        offset = high
    cap = high - offset
    reread_max = cap if bound is None else max(0, min(bound, cap))
    if via == "latest":
        reread_max = 0
        notes.append("latest: records not yet read on the source are skipped")
    reread_min = min(reread_min, reread_max)
    kw = {"via": via, "target_offset": offset, "reread_min": reread_min, "reread_max": reread_max}
    if current is None or current < offset:
        if current is not None and cp is not None and current == cp.downstream_offset:
            notes.append("MM2's sync.group.offsets had committed the checkpoint: moved on from it")
        return move(action="commit", **kw)
    if current == offset:
        if cp is not None and current == cp.downstream_offset:
            notes.append("already there: MM2's sync.group.offsets.enabled committed the checkpoint")
        return move(action="unchanged", **kw)
    if cp is not None and current == cp.downstream_offset:
        notes.append(
            f"already at {current}, MM2's checkpoint: sync.group.offsets.enabled committed it"
        )
    else:
        notes.append(f"already at {current} on the target, past {offset}")
    if opts.allow_backwards:
        notes.append("--allow-backwards: moved back")
        return move(action="commit", **kw)
    notes.append("kept (never moved backwards without --allow-backwards)")
    # The group resumes at `current`, past `offset`: it re-reads that much less.
    kw["reread_max"] = max(0, reread_max - (current - offset))
    kw["reread_min"] = min(reread_min, kw["reread_max"])
    return move(action="keep", **kw)


def plan_group(flow: FlowInputs, inputs: GroupInputs, opts: PlanOptions) -> GroupPlan:
    """One group's plan: every partition translated, or the reason it is refused."""
    rows: dict[TP, tuple[int | None, str]] = {}
    if inputs.source_commits is not None:
        for (topic, p), s in inputs.source_commits.items():
            rows[(topic, p)] = (s, target_topic(flow, topic))
    else:
        for (group, tt, p), _cp in flow.checkpoints.items():
            if group == inputs.group:
                rows[(_source_topic_of(flow, tt), p)] = (None, tt)
    moves = tuple(
        _move(flow, opts, inputs, topic, p, s, tt) for (topic, p), (s, tt) in sorted(rows.items())
    )
    notes: list[str] = []
    refusal = None
    if not moves:
        refusal = (
            f"group {inputs.group} has no committed offsets on {flow.source}"
            if inputs.source_commits is not None
            else f"group {inputs.group} has no checkpoint on {flow.target} and {flow.source} "
            "did not answer: nothing to translate"
        )
    elif inputs.target_state.upper() not in IDLE_STATES or inputs.target_members:
        members = ", ".join(inputs.target_members) or "none listed"
        refusal = (
            f"group {inputs.group} is {inputs.target_state} on {flow.target} with "
            f"{len(inputs.target_members)} active member(s): {members}; stop them first"
        )
    else:
        refused = [m for m in moves if m.action == "refuse"]
        if refused:
            first = refused[0]
            why = first.notes[-1] if first.notes else "untranslatable"
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            refusal = f"group {inputs.group}: {first.source_topic}-{first.partition}: {why}{more}"
    if inputs.source_commits is None:
        notes.append(f"{flow.source} did not answer: the group's commits there are unknown")
    return GroupPlan(inputs.group, flow.source, flow.target, moves, refusal, tuple(notes))
