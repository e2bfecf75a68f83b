"""Checkpoint lag: where MM2's checkpoints put each consumer group on the target, against the
group's own committed offset on the source (failover: what the group would re-consume); and
each group's failover readiness (`readiness`).

The checkpoints topic of each flow is tailed (group-less) and the newest checkpoint per group,
topic and partition kept; the groups' committed offsets are read on the source each cycle: the
checkpointed groups', and those of the groups expected to fail over (`lag.failover_groups`),
which may have no checkpoint at all (that is what readiness must show). Glob patterns are
matched against the source's group list (ListGroups, once per source cluster per cycle, only
while a pattern is a glob).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from offsetd.lag import checkpoints as cp
from offsetd.lag.connect_state import MirrorFlow
from offsetd.lag.groups import GroupReader
from offsetd.lag.kafka_io import Tail
from offsetd.lag.readiness import (
    CheckpointFlow,
    GroupReadiness,
    expected_groups,
    flow_readiness,
    is_glob,
)
from offsetd.lag.snapshot import CheckpointLag

__all__ = ["CheckpointCycle", "CheckpointReader", "FailoverPolicy"]

TP = tuple[str, int]


@dataclass(frozen=True)
class FailoverPolicy:
    """`lag.failover_groups` and `lag.failover_max_checkpoint_age`."""

    groups: Sequence[str] = ()
    max_checkpoint_age_ms: int = 300_000


@dataclass(frozen=True)
class CheckpointCycle:
    """What one cycle found: a row per checkpoint, a readiness row per group and flow."""

    checkpoints: list[CheckpointLag]
    readiness: list[GroupReadiness]


class CheckpointReader:
    """The checkpoints topics' tails and the newest checkpoints, kept across cycles."""

    def __init__(self) -> None:
        self._tails: dict[tuple[str, str], Tail] = {}
        self._latest: dict[tuple[str, str], dict[tuple[str, str, int], cp.Checkpoint]] = {}
        # per (Connect cluster, connector): the groups last expected, so a flow that cannot be
        # read keeps their rows (not ready, and why) instead of dropping the series an alert
        # holds its `for:` clock on
        self._expected_of: dict[tuple[str, str], set[str]] = {}
        # per source cluster: its last group list, standing in while a listing fails
        self._listed: dict[str, set[str]] = {}

    def close(self) -> None:
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()

    def cycle(
        self,
        flows: Iterable[MirrorFlow],
        conf_of: Callable[[str, str | None], dict[str, str] | None],
        groups_of: Callable[[Mapping[str, str]], GroupReader],
        now_ms: int,
        errors: dict[str, str],
        *,
        failover: FailoverPolicy | None = None,
        replicated_of: Callable[[MirrorFlow], Collection[str] | None] = lambda _flow: None,
    ) -> CheckpointCycle:
        """Every checkpoint of every MirrorCheckpointConnector flow, with its group's lag, and
        the readiness of its groups (`replicated_of`: the topics a flow replicates, if known)."""
        policy = failover or FailoverPolicy()
        listed: dict[str, set[str]] = {}  # per source cluster, this cycle
        out = CheckpointCycle([], [])
        seen: set[tuple[str, str]] = set()
        for flow in flows:
            seen.add((flow.connect_cluster, flow.connector))
            target_conf = conf_of(flow.target, flow.target_bootstrap)
            source_conf = conf_of(flow.source, flow.source_bootstrap)
            if target_conf is None or source_conf is None:
                continue
            topic = f"{flow.source}{flow.separator}checkpoints.internal"
            key = (target_conf["bootstrap.servers"], topic)
            try:
                tail = self._tails.get(key)
                if tail is None:
                    tail = self._tails[key] = Tail(target_conf, topic)
                latest = self._latest.setdefault(key, {})
                for msg in tail.read(10.0):
                    try:
                        c = cp.decode_checkpoint(msg.key(), msg.value(), msg.timestamp()[1])
                    except cp.CheckpointError:
                        continue
                    latest[(c.group, c.topic, c.partition)] = c
                reader = groups_of(source_conf)
                by_group = _by_group(latest, flow)
                expected = self._expected(policy, reader, by_group, listed, flow, errors)
                committed, failed = reader.offsets(by_group.keys() | expected)
                if failed:
                    errors[f"group_offsets:{flow.source}"] = next(iter(failed.values()))
            except Exception as exc:
                errors[f"checkpoints:{flow.connector}"] = str(exc)
                lost = self._expected_of.get((flow.connect_cluster, flow.connector), set())
                out.readiness.extend(
                    flow_readiness(
                        _identity(flow),
                        {},
                        {},
                        dict.fromkeys(lost, f"{topic} or the commits not read: {exc}"),
                        None,
                        lost,
                        max_age_ms=policy.max_checkpoint_age_ms,
                        now_ms=now_ms,
                    )
                )
                continue
            self._expected_of[(flow.connect_cluster, flow.connector)] = expected
            for (group, downstream, partition), c in sorted(latest.items()):
                source_topic = cp.upstream_topic(downstream, flow.source, flow.separator)
                offset = committed.get(group, {}).get((source_topic, partition))
                out.checkpoints.append(
                    CheckpointLag(
                        flow.connect_cluster,
                        flow.connector,
                        flow.source,
                        flow.target,
                        group,
                        source_topic,
                        partition,
                        c.upstream_offset,
                        c.downstream_offset,
                        offset,
                        cp.checkpoint_age_seconds(offset, c, now_ms),
                        None if offset is None else cp.reconsume_lower_bound(offset, c),
                    )
                )
            out.readiness.extend(
                flow_readiness(
                    _identity(flow),
                    by_group,
                    committed,
                    failed,
                    replicated_of(flow),
                    expected,
                    max_age_ms=policy.max_checkpoint_age_ms,
                    now_ms=now_ms,
                )
            )
        for gone in self._expected_of.keys() - seen:
            del self._expected_of[gone]
        return out

    def _expected(
        self,
        policy: FailoverPolicy,
        reader: GroupReader,
        by_group: Mapping[str, object],
        listed: dict[str, set[str]],
        flow: MirrorFlow,
        errors: dict[str, str],
    ) -> set[str]:
        """The groups of the source that `lag.failover_groups` expects to fail over."""
        if not policy.groups:
            return set()
        candidates: set[str] = set(by_group)
        if any(is_glob(p) for p in policy.groups):
            where = reader.conf["bootstrap.servers"]
            if where not in listed:
                names, why = reader.names()
                if names is None:  # the last list, the checkpointed groups and names still count
                    errors[f"group_list:{flow.source}"] = why or "no group list"
                    names = self._listed.get(where, set())
                listed[where] = self._listed[where] = names
            candidates |= listed[where]
        return expected_groups(policy.groups, candidates)


def _identity(flow: MirrorFlow) -> CheckpointFlow:
    return CheckpointFlow(flow.connect_cluster, flow.connector, flow.source, flow.target)


def _by_group(
    latest: Mapping[tuple[str, str, int], cp.Checkpoint], flow: MirrorFlow
) -> dict[str, dict[TP, cp.Checkpoint]]:
    """Checkpoints per group, keyed by the source (topic, partition) they translate."""
    out: dict[str, dict[TP, cp.Checkpoint]] = {}
    for (group, downstream, partition), c in latest.items():
        source_topic = cp.upstream_topic(downstream, flow.source, flow.separator)
        out.setdefault(group, {})[(source_topic, partition)] = c
    return out
