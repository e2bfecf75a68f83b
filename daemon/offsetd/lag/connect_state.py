"""Connector and task states, and MirrorMaker 2 connector facts, from Connect REST (httpx).

One `GET /connectors?expand=info&expand=status` per Connect cluster per cycle, through offsetd's
`ConnectClient`, plus `GET /connectors/{c}/tasks` for each MirrorSourceConnector: its task
configs carry `task.assigned.partitions`, the exact set of source partitions MM2 replicates
(which includes partitions that have no offset yet, "not started"). Those are sent together,
at most `TASKS_AT_ONCE` at a time: one after another, a cluster of many mirrors paid one round
trip per mirror per cycle, and a loaded Connect made each slow.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from offsetd.config import ConnectCluster
from offsetd.connect.client import ConnectClient
from offsetd.connect.transport import httpx_options, user_of
from offsetd.lag.snapshot import ConnectorHealth
from offsetd.offsets.model import ConnectorKind, connector_kind

__all__ = ["TASKS_AT_ONCE", "ConnectView", "MirrorFlow", "parse_assigned", "read_connect"]

TASKS_AT_ONCE = 8  # task-config reads in flight per Connect cluster


@dataclass(frozen=True)
class MirrorFlow:
    """One MM2 connector: its aliases, the clusters' bootstrap servers as its config says."""

    connect_cluster: str
    connector: str
    kind: ConnectorKind
    source: str
    target: str
    source_bootstrap: str | None
    target_bootstrap: str | None
    separator: str = "."


@dataclass
class ConnectView:
    connectors: list[ConnectorHealth] = field(default_factory=list)
    flows: list[MirrorFlow] = field(default_factory=list)
    # MirrorSourceConnector -> its tasks' assigned (topic, partition)s; absent while stopped
    assigned: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    # every connector's config (sink progress reads `topics`, `topics.regex` and the group)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_assigned(value: str) -> set[tuple[str, int]]:
    """`task.assigned.partitions` ("t-0,t-1,other.topic-12") as (topic, partition) pairs."""
    out: set[tuple[str, int]] = set()
    for item in value.split(","):
        topic, sep, number = item.strip().rpartition("-")
        if sep and topic and number.isdigit():
            out.add((topic, int(number)))
    return out


def _flow(
    connect_cluster: str, name: str, config: dict[str, str], kind: ConnectorKind
) -> MirrorFlow:
    return MirrorFlow(
        connect_cluster,
        name,
        kind,
        config.get("source.cluster.alias", "source"),
        config.get("target.cluster.alias", "target"),
        config.get("source.cluster.bootstrap.servers"),
        config.get("target.cluster.bootstrap.servers"),
        config.get("replication.policy.separator", "."),
    )


async def read_connect(name: str, cluster: ConnectCluster, timeout_s: float = 15.0) -> ConnectView:
    """Everything lag collection needs from one Connect cluster."""
    view = ConnectView()
    async with httpx.AsyncClient(timeout=timeout_s, **httpx_options(cluster)) as http:
        expanded = await ConnectClient(http, user=user_of(cluster)).expanded()
        mirrors: list[str] = []  # MirrorSourceConnectors whose task configs to read
        for connector, entry in sorted(expanded.items()):
            info: dict[str, Any] = entry.get("info") or {}
            status: dict[str, Any] = entry.get("status") or {}
            config: dict[str, str] = dict(info.get("config") or {})
            kind = connector_kind(config.get("connector.class", ""), str(info.get("type", "")))
            flow = _flow(name, connector, config, kind) if kind.is_mirror else None
            tasks = tuple(sorted((int(t["id"]), str(t["state"])) for t in status.get("tasks", [])))
            workers = tuple(
                sorted((int(t["id"]), str(t.get("worker_id", ""))) for t in status.get("tasks", []))
            )
            configured = tuple(
                sorted(int(t["task"]) for t in info.get("tasks") or [] if "task" in t)
            )
            view.configs[connector] = config
            view.connectors.append(
                ConnectorHealth(
                    name,
                    connector,
                    config.get("connector.class", ""),
                    str((status.get("connector") or {}).get("state", "UNASSIGNED")),
                    tasks,
                    flow.source if flow else None,
                    flow.target if flow else None,
                    str(info.get("type") or status.get("type") or ""),
                    configured,
                    workers,
                )
            )
            if flow is None:
                continue
            view.flows.append(flow)
            if kind is ConnectorKind.MIRROR_SOURCE and info.get("tasks"):
                mirrors.append(connector)
        slots = asyncio.Semaphore(TASKS_AT_ONCE)
        found = await asyncio.gather(*(_assigned(http, slots, name) for name in mirrors))
        view.assigned.update((n, a) for n, a in zip(mirrors, found, strict=True) if a is not None)
    return view


async def _assigned(
    http: httpx.AsyncClient, slots: asyncio.Semaphore, connector: str
) -> set[tuple[str, int]] | None:
    """The partitions a MirrorSourceConnector's tasks are assigned; None if Connect has no task
    configs for it now (it was deleted or is being reconfigured)."""
    async with slots:
        response = await http.get(f"/connectors/{quote(connector, safe='')}/tasks")
    if response.status_code != 200:
        return None
    assigned: set[tuple[str, int]] = set()
    for task in response.json():
        assigned |= parse_assigned((task.get("config") or {}).get("task.assigned.partitions", ""))
    return assigned
