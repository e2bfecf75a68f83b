"""Checkpoint lag: where MM2's checkpoints put each consumer group on the target, against the
group's own committed offset on the source (failover: what the group would re-consume).

The checkpoints topic of each flow is tailed (group-less) and the newest checkpoint per group,
topic and partition kept; the groups' committed offsets are read on the source each cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from offsetd.lag import checkpoints as cp
from offsetd.lag.connect_state import MirrorFlow
from offsetd.lag.groups import GroupReader
from offsetd.lag.kafka_io import Tail
from offsetd.lag.snapshot import CheckpointLag

__all__ = ["CheckpointReader"]


class CheckpointReader:
    """The checkpoints topics' tails and the newest checkpoints, kept across cycles."""

    def __init__(self) -> None:
        self._tails: dict[tuple[str, str], Tail] = {}
        self._latest: dict[tuple[str, str], dict[tuple[str, str, int], cp.Checkpoint]] = {}

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
    ) -> list[CheckpointLag]:
        """Every checkpoint of every MirrorCheckpointConnector flow, with its group's lag."""
        out: list[CheckpointLag] = []
        for flow in flows:
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
                committed, failed = groups_of(source_conf).offsets({g for g, _t, _p in latest})
                if failed:
                    errors[f"group_offsets:{flow.source}"] = next(iter(failed.values()))
            except Exception as exc:
                errors[f"checkpoints:{flow.connector}"] = str(exc)
                continue
            for (group, downstream, partition), c in sorted(latest.items()):
                source_topic = cp.upstream_topic(downstream, flow.source, flow.separator)
                offset = committed.get(group, {}).get((source_topic, partition))
                out.append(
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
        return out
