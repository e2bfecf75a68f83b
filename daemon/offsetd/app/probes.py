"""The probes behind `/readyz`, on the worker's own timers, and the two health pages.

- `kafka`: a metadata request to the daemon's Kafka cluster (the cluster the stream, the audit
  and the state live on), in a thread so the event loop never waits on it;
- `stream`: the worker has joined its group (not rebalancing), the group's assignment gives out
  every partition of the events topic and this worker holds its share (`events_share`), and no
  partition it holds has records waiting behind a position that stopped moving
  (`StreamProgress`);
- `ingest`: the ingest thread runs (`app.build` records it while it does);
- `connect:<name>`: `GET /` of every Connect cluster this worker acts on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from confluent_kafka.admin import AdminClient

from offsetd.app.health import Health, StreamProgress, events_share
from offsetd.app.internal_topics import events_topic_name
from offsetd.app.wiring import Wiring
from offsetd.connect.client import ConnectClient

__all__ = ["health_pages"]


def health_pages(app: faust.App, wiring: Wiring, health: Health) -> None:
    settings = wiring.settings.daemon
    interval_s = settings.health_probe_interval / 1000
    progress = StreamProgress(settings.stall_after)
    events = events_topic_name(settings.app_id)
    health.expect(["kafka", "stream", "ingest", *(f"connect:{name}" for name in wiring.connect)])
    admin = AdminClient(dict(wiring.kafka.client_config()))
    bootstrap = wiring.kafka.bootstrap_servers

    @app.timer(interval_s)  # type: ignore[untyped-decorator]
    async def probe_kafka() -> None:
        try:
            metadata = await asyncio.to_thread(admin.list_topics, timeout=interval_s)
            health.record("kafka", True, f"{len(metadata.brokers)} brokers answer")
        except Exception as exc:  # KafkaException: its text names the failure, no secrets
            health.record("kafka", False, f"{bootstrap} does not answer: {exc}")

    @app.timer(interval_s)  # type: ignore[untyped-decorator]
    async def probe_stream() -> None:
        if app.rebalancing:
            health.record("stream", False, "the worker group is rebalancing")
            return
        try:
            consumer = app.consumer
            assigned = consumer.assignment()
            share_ok, share = events_share(
                events,
                settings.partitions,
                (tp.partition for tp in assigned if tp.topic == events),
                # every member's partitions, as the group's last assignment told each member
                app.assignor.external_topic_distribution,  # type: ignore[attr-defined]
            )
            positions = []
            for tp in assigned:
                position = await consumer.position(tp)
                highwater = consumer.highwater(tp)
                if position is not None and highwater is not None:
                    positions.append((tp.topic, tp.partition, position, highwater))
        except Exception as exc:  # a consumer being reassigned: reported, probed again
            health.record("stream", False, f"could not read the stream's positions: {exc}")
            return
        stalled = progress.observe(positions, wiring.clock())
        if not share_ok:
            health.record("stream", False, share)
        elif stalled:
            health.record("stream", False, "stalled: " + "; ".join(stalled))
        else:
            health.record("stream", True, f"{share}; {len(positions)} partitions moving")

    clients = {
        name: ConnectClient.for_cluster(cluster, timeout_s=interval_s)
        for name, cluster in wiring.connect.items()
    }

    @app.timer(interval_s)  # type: ignore[untyped-decorator]
    async def probe_connect() -> None:
        async def one(name: str, client: ConnectClient) -> None:
            try:
                root = await client.root()
                health.record(f"connect:{name}", True, f"Connect {root.get('version', '?')}")
            except Exception as exc:  # OffsetdError or httpx's: both name the URL, no secrets
                health.record(f"connect:{name}", False, str(exc).splitlines()[0])

        await asyncio.gather(*(one(name, client) for name, client in clients.items()))

    @app.page("/healthz")
    async def healthz(web: Any, _request: Any) -> Any:
        alive, body = health.liveness()
        return web.json(body, status=200 if alive else 503)

    @app.page("/readyz")
    async def readyz(web: Any, _request: Any) -> Any:
        ready, body = health.readiness()
        return web.json(body, status=200 if ready else 503)
