"""Everything a failover plan needs, read once: the flow, the groups, both clusters' views.

The target must answer; the source may not (a regional outage is why one fails over): its
groups' commits are then unknown and each group is translated from its newest checkpoints,
which the plan says. A refused login or ACL on either cluster is one line, never "unreachable".
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from offsetd.adminclient import connected_admin
from offsetd.errors import KafkaAccessDenied, KafkaAuthFailed, TlsFailed
from offsetd.failover.kafka import (
    FailoverError,
    Read,
    TargetGroups,
    list_groups,
    read_checkpoints,
    read_syncs,
    source_commits,
)
from offsetd.failover.plan import (
    FlowInputs,
    GroupInputs,
    GroupPlan,
    PlanOptions,
    plan_group,
    target_topic,
)
from offsetd.failover.policy import ReplicationPolicy
from offsetd.failover.syncs import SyncIndex
from offsetd.kafkaaccess import DENIED
from offsetd.lag.groups import GroupReader

__all__ = ["FailoverRequest", "Gathered", "gather", "plan_all"]

SyncsLocation = Literal["source", "target"]
TP = tuple[str, int]
_GLOB = set("*?[")


@dataclass(frozen=True)
class FailoverRequest:
    source: str
    target: str
    patterns: tuple[str, ...]
    target_conf: Mapping[str, str]
    source_conf: Mapping[str, str] | None  # None: do not ask the source (--no-source)
    policy: ReplicationPolicy = field(default_factory=ReplicationPolicy)
    syncs_location: SyncsLocation = "source"
    source_timeout_s: float = 10.0
    timeout_s: float = 60.0


@dataclass
class Gathered:
    flow: FlowInputs
    groups: list[GroupInputs]
    target: TargetGroups
    source_answered: bool
    notes: list[str] = field(default_factory=list)
    reads: dict[str, Read] = field(default_factory=dict)


def _source_answers(request: FailoverRequest, notes: list[str]) -> list[str] | None:
    """The source's groups, or None (with a note) when it does not answer in time."""
    if request.source_conf is None:
        notes.append(f"{request.source} not asked (--no-source): its commits are unknown")
        return None
    try:
        admin = connected_admin(request.source_conf, request.source_timeout_s, request.source)
        return list_groups(admin, request.source_timeout_s)
    except (KafkaAccessDenied, KafkaAuthFailed, TlsFailed):
        raise
    except Exception as exc:
        notes.append(
            f"{request.source} did not answer in {request.source_timeout_s:.0f} s ({exc}): "
            "its commits are unknown, each group is translated from its checkpoints"
        )
        return None


def _syncs(
    conf: Mapping[str, str] | None, topic: str, timeout_s: float, where: str, notes: list[str]
) -> tuple[SyncIndex | None, Read | None]:
    if conf is None:
        return None, None
    read, index = read_syncs(conf, topic, timeout_s)
    if not read.exists:
        return None, read
    if read.malformed:
        notes.append(f"{topic} on {where}: {read.malformed} malformed record(s) skipped")
    return index, read


def _match(patterns: tuple[str, ...], known: set[str], request: FailoverRequest) -> list[str]:
    chosen: set[str] = set()
    for pattern in patterns:
        hits = {g for g in known if fnmatch.fnmatchcase(g, pattern)}
        if not hits:
            what = "pattern" if _GLOB & set(pattern) else "group"
            raise FailoverError(
                f"{what} {pattern!r} matches no consumer group on {request.source} nor in the "
                f"checkpoints {request.source} -> {request.target} (nor on {request.target})"
            )
        chosen |= hits
    return sorted(chosen)


def gather(request: FailoverRequest, now_ms: int | None = None) -> Gathered:
    notes: list[str] = []
    reads: dict[str, Read] = {}
    policy = request.policy
    target = TargetGroups(request.target_conf, request.target, request.timeout_s)
    cp_topic = policy.checkpoints_topic(request.source)
    cp_read, checkpoints = read_checkpoints(request.target_conf, cp_topic, request.timeout_s)
    reads[f"{request.target}:{cp_topic}"] = cp_read
    if cp_read.malformed:
        notes.append(f"{cp_topic}: {cp_read.malformed} malformed record(s) skipped")
    source_groups = _source_answers(request, notes)
    source_conf = request.source_conf if source_groups is not None else None
    # The flow source -> target keeps its syncs on its source by default; the other flow
    # (target -> source, whose syncs translate back) on *its* source, our target.
    forward: tuple[Mapping[str, str] | None, str, str]
    inverse: tuple[Mapping[str, str] | None, str, str]
    if request.syncs_location == "source":
        forward = (source_conf, policy.offset_syncs_topic(request.target), request.source)
        inverse = (request.target_conf, policy.offset_syncs_topic(request.source), request.target)
    else:
        forward = (request.target_conf, policy.offset_syncs_topic(request.source), request.target)
        inverse = (source_conf, policy.offset_syncs_topic(request.target), request.source)
    syncs, s_read = _syncs(forward[0], forward[1], request.timeout_s, forward[2], notes)
    inverse_syncs, i_read = _syncs(inverse[0], inverse[1], request.timeout_s, inverse[2], notes)
    for (_conf, topic, where), read in ((forward, s_read), (inverse, i_read)):
        if read is not None:
            reads[f"{where}:{topic}"] = read
    if not cp_read.exists and syncs is None and inverse_syncs is None:
        raise FailoverError(
            f"no MirrorMaker 2 flow translates {request.source} to {request.target}: "
            f"{request.target} has no {cp_topic}, and no offset syncs of either direction were "
            f"found ({forward[1]} on {forward[2]}, {inverse[1]} on {inverse[2]})"
        )
    if syncs is None:
        notes.append(
            f"no offset syncs {request.source} -> {request.target} read ({forward[1]} on "
            f"{forward[2]}): groups past their checkpoints re-read what they read since"
        )
    known = {g for g, _t, _p in checkpoints} | set(source_groups or ()) | set(target.groups())
    chosen = _match(request.patterns, known, request)
    commits: dict[str, dict[TP, int]] = {}
    if source_conf is not None:
        reader = GroupReader(source_conf)
        try:
            commits, failed = source_commits(reader, chosen, request.source_timeout_s + 20)
        finally:
            reader.close()
        for _group, why in sorted(failed.items()):
            if why.startswith(DENIED):
                raise FailoverError(why)
            raise FailoverError(f"{request.source}: {why}")
    described = target.describe(chosen)
    flow = FlowInputs(
        request.source,
        request.target,
        policy,
        checkpoints,
        syncs,
        inverse_syncs,
        {},
        now_ms if now_ms is not None else int(time.time() * 1000),
    )
    groups = [
        GroupInputs(
            g,
            commits.get(g, {}) if source_conf is not None else None,
            described[g].commits,
            described[g].state,
            described[g].members,
        )
        for g in chosen
    ]
    wanted: set[TP] = set()
    for g in groups:
        if g.source_commits is not None:
            wanted |= {(target_topic(flow, t), p) for t, p in g.source_commits}
        else:
            wanted |= {(t, p) for group, t, p in checkpoints if group == g.group}
    flow = replace(flow, watermarks=target.watermarks(wanted))
    return Gathered(flow, groups, target, source_conf is not None, notes, reads)


def plan_all(gathered: Gathered, options: PlanOptions) -> list[GroupPlan]:
    return [plan_group(gathered.flow, g, options) for g in gathered.groups]
