"""Which partitions a rewind scans, and over which offsets (Connect REST and ListOffsets, no Spark).

- sink: its `topics` / `topics.regex` on its consumer's cluster;
- MirrorSourceConnector: the topics its `topics` / `topics.exclude` patterns select on the source
  cluster, plus every partition it already has offsets for.

The ranges are concrete offsets resolved before Spark starts — that is what lets Spark split a
big partition into tasks: start = the log start, or the first offset at `--from-timestamp`
(skip-run: the connector's committed position); end = the log end (last stable offset), or the
first offset at `--to-timestamp` (exclusive). All positions come from one batched ListOffsets
per kind (the offsets toolkit's `fetch_positions`).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.errors import InvalidDocument
from offsetd.offsets import targets
from offsetd.offsets.location import WorkerView, resolve_location
from offsetd.offsets.model import ConnectorKind, connector_kind, next_offset_of
from offsetd.offsets.rewind_plan import Mode, PartitionRange
from offsetd.offsets.targets import Positions, Target, TargetKind, TopicPartitionKey

__all__ = ["MM2_DEFAULT_EXCLUDE", "Resolved", "resolve"]

MM2_DEFAULT_EXCLUDE = r"mm2.*\.internal, .*\.replica, __.*"


@dataclass(frozen=True)
class Resolved:
    connector: str
    kind: ConnectorKind
    source_alias: str
    cluster: str  # for people: alias and bootstrap servers, never credentials
    client_config: dict[str, str]  # holds secrets: for clients only
    ranges: list[PartitionRange]


async def resolve(
    client: ConnectClient,
    worker: WorkerView,
    settings: Settings | None,
    connector: str,
    mode: Mode,
    from_ts: int | None,
    to_ts: int | None,
) -> Resolved:
    info = await client.info(connector)
    kind = connector_kind(info.connector_class, info.type)
    if kind not in (ConnectorKind.SINK, ConnectorKind.MIRROR_SOURCE):
        raise InvalidDocument(
            f"{connector} is a {kind} connector: rewind plans apply to sink connectors and "
            "MirrorSourceConnector"
        )
    location = resolve_location(connector, info.config, kind, worker, settings)
    if location.data_cluster is None:
        raise InvalidDocument(
            f"cannot tell which Kafka cluster {connector}'s records are on: set kafka_cluster "
            "for the Connect cluster in offsetd.yaml"
        )
    conf = location.data_cluster.client_config(settings)
    committed: dict[TopicPartitionKey, int] = {}
    for entry in await client.offsets(connector):
        position = next_offset_of(kind, entry.offset)
        if position is not None:
            committed[targets.tp_of(kind, entry.partition)] = position
    tps = await asyncio.to_thread(_partitions, kind, info.config, conf, set(committed))
    ranges = await asyncio.to_thread(_ranges, conf, tps, committed, mode, from_ts, to_ts)
    return Resolved(
        connector,
        kind,
        info.config.get("source.cluster.alias", "source"),
        location.data_cluster.describe(),
        conf,
        ranges,
    )


def _partitions(
    kind: ConnectorKind, config: dict[str, str], conf: dict[str, str], known: set[TopicPartitionKey]
) -> list[TopicPartitionKey]:
    if kind is ConnectorKind.SINK:
        if config.get("topics"):
            topics = [t.strip() for t in config["topics"].split(",") if t.strip()]
        else:
            pattern = re.compile(config.get("topics.regex", "(?!)"))
            topics = [t for t in targets.all_topics(conf) if pattern.fullmatch(t)]
    else:
        include = _patterns(config.get("topics", ".*"))
        exclude = _patterns(config.get("topics.exclude", MM2_DEFAULT_EXCLUDE))
        topics = [
            t
            for t in targets.all_topics(conf)
            if any(p.fullmatch(t) for p in include) and not any(p.fullmatch(t) for p in exclude)
        ]
    found = set(targets.topic_partitions(conf, topics)) if topics else set()
    return sorted(found | known)


def _patterns(text: str) -> list[re.Pattern[str]]:
    return [re.compile(p.strip()) for p in text.split(",") if p.strip()]


def _ranges(
    conf: dict[str, str],
    tps: list[TopicPartitionKey],
    committed: dict[TopicPartitionKey, int],
    mode: Mode,
    from_ts: int | None,
    to_ts: int | None,
) -> list[PartitionRange]:
    if not tps:
        return []
    since = _positions(conf, tps, from_ts)
    until = _positions(conf, tps, to_ts) if to_ts is not None else since
    out = []
    for tp in tps:
        pos = since[tp]
        end = pos.end if to_ts is None else _at(until[tp])
        if mode is Mode.SKIP_RUN:
            # The run must start where the connector is; with no position (or one retention
            # removed) it starts at the log start, as Connect's earliest reset does.
            start = min(max(committed.get(tp, pos.start), pos.start), pos.end)
        else:
            start = pos.start if from_ts is None else _at(pos)
        out.append(PartitionRange(tp[0], tp[1], start, max(start, end), committed.get(tp)))
    return out


def _positions(
    conf: dict[str, str], tps: list[TopicPartitionKey], ts: int | None
) -> dict[TopicPartitionKey, Positions]:
    target = Target(TargetKind.EARLIEST) if ts is None else Target(TargetKind.TIMESTAMP, ts)
    return targets.fetch_positions(conf, tps, target)


def _at(pos: Positions) -> int:
    """The first offset at the time, or the log end when no record is that recent."""
    return pos.end if pos.at_time is None or pos.at_time < 0 else pos.at_time
