"""Turn a target (time, earliest, latest, shift) into a patch for one connector.

Which partitions move: those the connector has offsets for, narrowed by --topic/--partition;
with --include-uncommitted also the partitions it has none for yet (a sink's subscribed topics,
or for MirrorSourceConnector the topics named with --topic). Positions are read from the
cluster the records live on: the sink's consumer cluster, or MM2's source cluster.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

from offsetd.config import Settings
from offsetd.errors import InvalidDocument
from offsetd.offsets import targets
from offsetd.offsets.location import OffsetsLocation
from offsetd.offsets.model import ConnectorKind, OffsetEntry, PartitionMap
from offsetd.offsets.targets import Target, TopicPartitionKey

__all__ = ["Selection", "target_patch"]


@dataclass(frozen=True)
class Selection:
    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    include_uncommitted: bool = False

    def wants(self, tp: TopicPartitionKey) -> bool:
        return (not self.topics or tp[0] in self.topics) and (
            not self.partitions or tp[1] in self.partitions
        )


async def target_patch(
    kind: ConnectorKind,
    config: dict[str, str],
    location: OffsetsLocation,
    current: Sequence[OffsetEntry],
    target: Target,
    selection: Selection,
    settings: Settings | None,
) -> list[OffsetEntry]:
    if kind not in (ConnectorKind.SINK, ConnectorKind.MIRROR_SOURCE):
        raise InvalidDocument(
            f"--to-*/--shift-by apply to sink connectors and MirrorSourceConnector, not {kind}"
        )
    if location.data_cluster is None:
        raise InvalidDocument(
            f"cannot tell which Kafka cluster {location.connector}'s records are on: set "
            "kafka_cluster for the Connect cluster in offsetd.yaml"
        )
    conf = location.data_cluster.client_config(settings)
    source_alias = config.get("source.cluster.alias", "source")
    chosen: dict[TopicPartitionKey, PartitionMap] = {}
    for entry in current:
        tp = targets.tp_of(kind, entry.partition)
        if selection.wants(tp):
            chosen[tp] = entry.partition
    if selection.include_uncommitted:
        topics = await asyncio.to_thread(_subscribed_topics, kind, config, conf, selection)
        for tp in await asyncio.to_thread(targets.topic_partitions, conf, topics):
            if selection.wants(tp) and tp not in chosen:
                chosen[tp] = targets.partition_map_for(kind, tp, source_alias)
    if not chosen:
        raise InvalidDocument(
            f"no partitions of {location.connector} match (a partition without committed "
            "offsets is only changed with --include-uncommitted)"
        )
    positions = await asyncio.to_thread(targets.fetch_positions, conf, chosen.keys(), target)
    pairs = [(partition, tp) for tp, partition in sorted(chosen.items())]
    return targets.resolve(kind, target, current, pairs, positions)


def _subscribed_topics(
    kind: ConnectorKind, config: dict[str, str], conf: dict[str, str], selection: Selection
) -> list[str]:
    if kind is ConnectorKind.MIRROR_SOURCE:
        if not selection.topics:
            raise InvalidDocument(
                "--include-uncommitted for MirrorSourceConnector needs the source topics: --topic"
            )
        return list(selection.topics)
    if config.get("topics"):
        return [t.strip() for t in config["topics"].split(",") if t.strip()]
    pattern = re.compile(config.get("topics.regex", "(?!)"))
    return [t for t in targets.all_topics(conf) if pattern.fullmatch(t)]
