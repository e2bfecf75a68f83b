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
from offsetd.errors import FailoverError, KafkaAccessDenied, KafkaAuthFailed, TlsFailed
from offsetd.failover.kafka import (
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
from offsetd.lag.checkpoints import Checkpoint
from offsetd.lag.groups import GroupReader

__all__ = ["FailoverRequest", "Gathered", "gather", "plan_all"]

SyncsLocation = Literal["source", "target"]
TP = tuple[str, int]
CheckpointKey = tuple[str, str, int]
CheckpointMap = dict[CheckpointKey, Checkpoint]
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
    direction: Literal["failover", "failback"] = "failover"
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
        # librdkafka logs every refused connection to stderr; a gone source is expected here
        # and said once, in the plan's notes
        quiet = {**request.source_conf, "log_level": "2"}
        admin = connected_admin(quiet, request.source_timeout_s, request.source)
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
        notes.append(f"{read.describe_malformed(topic)}, on {where}")
    return index, read


Where = tuple[Mapping[str, str] | None, str, str]  # a cluster's client config, topic, alias


def _syncs_topic(request: FailoverRequest, source_conf: Mapping[str, str] | None) -> Where:
    """Which offset syncs a move reads, and where.

    Failover reads the syncs of the flow source -> target; failback those of the flow that
    replicated the groups' topics the other way (target -> source), in reverse. Only one flow's
    are read: with the identity policy, or flows that keep their syncs in different places, one
    flow's syncs topic can carry the other's name (MM2 names it by one alias only).
    """
    policy, source, target = request.policy, request.source, request.target
    on_source = request.syncs_location == "source"
    if request.direction == "failover":
        if on_source:
            return source_conf, policy.offset_syncs_topic(target), source
        return request.target_conf, policy.offset_syncs_topic(source), target
    if on_source:  # the flow target -> source keeps them on its source: our target
        return request.target_conf, policy.offset_syncs_topic(source), target
    return source_conf, policy.offset_syncs_topic(target), source


def _read_syncs(
    request: FailoverRequest,
    source_conf: Mapping[str, str] | None,
    checkpoints_exist: bool,
    notes: list[str],
    reads: dict[str, Read],
) -> tuple[SyncIndex | None, SyncIndex | None]:
    """(the flow's syncs, the other flow's syncs to read in reverse): one of them is None."""
    conf, topic, where = _syncs_topic(request, source_conf)
    index, read = _syncs(conf, topic, request.timeout_s, where, notes)
    if read is not None:
        reads[f"{where}:{topic}"] = read
    flow = f"{request.source} -> {request.target}"
    if request.direction == "failback":
        flow = f"{request.target} -> {request.source}"
    if not checkpoints_exist and index is None:
        raise FailoverError(
            f"no MirrorMaker 2 flow translates {request.source} to {request.target}: "
            f"{request.target} has no {request.policy.checkpoints_topic(request.source)}, and "
            f"no offset syncs of {flow} were found ({topic} on {where})"
        )
    if index is None:
        why = (
            "groups past their checkpoints re-read what they read since"
            if request.direction == "failover"
            else "replicas cannot be translated back to their originals"
        )
        notes.append(f"no offset syncs of {flow} read ({topic} on {where}): {why}")
    return (index, None) if request.direction == "failover" else (None, index)


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
        notes.append(f"{cp_read.describe_malformed(cp_topic)}, on {request.target}")
    source_groups = _source_answers(request, notes)
    source_conf = request.source_conf if source_groups is not None else None
    syncs, inverse_syncs = _read_syncs(request, source_conf, cp_read.exists, notes, reads)
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
        if failed:  # it answered ListGroups, then went away: no group half known
            why = sorted(failed.items())[0][1]
            notes.append(
                f"{request.source} stopped answering ({why}): its commits are unknown, each "
                "group is translated from its checkpoints"
            )
            commits, source_conf = {}, None
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
    by_group = _by_group(checkpoints) if source_conf is None else {}
    names: dict[str, str] = {}  # target_topic is pure: asked once per topic, not per partition
    for g in groups:
        if g.source_commits is not None:
            for t, p in g.source_commits:
                if t not in names:
                    names[t] = target_topic(flow, t)
                wanted.add((names[t], p))
        else:
            wanted |= {(t, p) for _group, t, p in by_group.get(g.group, {})}
    flow = replace(flow, watermarks=target.watermarks(wanted))
    return Gathered(flow, groups, target, source_conf is not None, notes, reads)


def _by_group(checkpoints: Mapping[CheckpointKey, Checkpoint]) -> dict[str, CheckpointMap]:
    """The checkpoints of each group, found once: a scan of all of them per group took ~5 s
    for 1,000 groups x 100 partitions, twice (the watermarks wanted, and in `plan_group`)."""
    out: dict[str, CheckpointMap] = {}
    for key, checkpoint in checkpoints.items():
        out.setdefault(key[0], {})[key] = checkpoint
    return out


def plan_all(gathered: Gathered, options: PlanOptions) -> list[GroupPlan]:
    flow = gathered.flow
    if all(g.source_commits is not None for g in gathered.groups):
        return [plan_group(flow, g, options) for g in gathered.groups]
    # Without the source's commits `plan_group` scans the flow's checkpoints for the group's
    # own: give each group a flow holding only those (it reads no other group's), same plan.
    by_group = _by_group(flow.checkpoints)
    return [
        plan_group(replace(flow, checkpoints=by_group.get(g.group, {})), g, options)
        for g in gathered.groups
    ]
