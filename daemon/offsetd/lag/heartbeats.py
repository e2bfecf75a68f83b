"""Heartbeat ages: how long ago MM2 last wrote (or replicated) a heartbeat, per topic.

MirrorHeartbeatConnector writes the local `heartbeats` topic on its source cluster every second;
MirrorSourceConnector replicates it as `<source>.heartbeats` on the target. The newest record's
timestamp (one ListOffsets max-timestamp per partition) says whether the flow is alive, whatever
its data topics do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from offsetd.lag.kafka_io import Position, topic_partitions
from offsetd.lag.snapshot import HeartbeatAge

__all__ = ["HEARTBEATS", "TP", "Layout", "heartbeat_ages", "heartbeat_layout", "newest_age"]

TP = tuple[str, int]
HEARTBEATS = "heartbeats"

Layout = list[tuple[str | None, str | None, str, list[TP]]]


def heartbeat_layout(admin: Any, replicated: set[tuple[str, str, str]]) -> Layout:
    """(source, target, topic, partitions) of replicated heartbeats, then the local one."""
    layout: Layout = [
        (source, target, topic, [(topic, p) for p in topic_partitions(admin, topic)])
        for source, target, topic in sorted(replicated)
    ]
    local = [(HEARTBEATS, p) for p in topic_partitions(admin, HEARTBEATS)]
    if local:
        layout.append((None, None, HEARTBEATS, local))
    return layout


def heartbeat_ages(
    layout: Layout, found: Mapping[TP, Position], alias: str, now_ms: int
) -> list[HeartbeatAge]:
    return [
        HeartbeatAge(
            target or alias, topic, source, target, newest_age(map(found.get, tps), now_ms)
        )
        for source, target, topic, tps in layout
    ]


def newest_age(positions: Iterable[Position | None], now_ms: int) -> float | None:
    stamps = [p.timestamp_ms for p in positions if p is not None and p.timestamp_ms >= 0]
    if not stamps:
        return None
    return max(0.0, (now_ms - max(stamps)) / 1000.0)
