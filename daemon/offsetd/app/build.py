"""`build_app`: the faust app with its agent, tasks, timers and pages, wired to the daemon.

Wiring only: what each piece does lives in its own module (`decider`, `metadata`, `recovery`,
`broker`) or below the app layer (the ingest, the engine, the remediator, the lag collector).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import faust
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from offsetd.app.broker import events_topic_of, new_faust_app, state_table_of
from offsetd.app.counters import LaterMetrics
from offsetd.app.decider import FrameDecider
from offsetd.app.group_access import ingest_group
from offsetd.app.health import Health
from offsetd.app.internal_topics import events_topic_name
from offsetd.app.probes import health_pages
from offsetd.app.recovery import remediation_start
from offsetd.app.wiring import Wiring
from offsetd.engine.cache import StateCache
from offsetd.events.frames import encode_nudge
from offsetd.ingest import Ingest, IngestError, ensure_events_topic
from offsetd.lag.ownership import LagOwnership

__all__ = ["build_app"]

log = logging.getLogger("offsetd")


def build_app(wiring: Wiring) -> faust.App:
    settings = wiring.settings.daemon
    app = new_faust_app(wiring)
    events_name = events_topic_name(settings.app_id)
    events_topic = events_topic_of(app, events_name, settings.partitions)
    states = state_table_of(app, settings.partitions)

    async def nudge(key: str, news: dict[str, object]) -> None:
        """News for the owner of `key`, in order with its events (see events.frames)."""
        sent = await events_topic.send(key=key, value=encode_nudge(news))
        await sent  # acknowledged

    decider = FrameDecider(
        wiring, StateCache(states), events_name, nudge, LaterMetrics.create(wiring.registry)
    )
    if wiring.remediator is not None:
        wiring.remediator.on_outcome = decider.report_outcome
    health = Health(wiring.clock, stale_after_ms=3 * settings.health_probe_interval + 10_000)
    _ingest_task(app, wiring, decider, events_name, health)

    @app.agent(events_topic)
    async def decide_agent(stream: Any) -> None:
        async for key, value in stream.items():
            try:
                await decider.decide_frame(key, value)
            except Exception:
                wiring.metrics.malformed.labels(events_name).inc()
                log.exception("could not decide on a frame for %s; skipped", key)

    @app.timer(30.0)  # type: ignore[untyped-decorator]
    async def waiting_for_meta() -> None:
        try:
            decider.rescan_waiting(states)
        except Exception:  # a table being recovered or rebalanced: next time
            log.exception("could not look for events waiting for metadata")
        try:
            decider.rewrite_tallies(states)
        except Exception:
            log.exception("could not write the tallies of the states again")

    app.add_dependency(remediation_start(app, wiring, events_topic))
    _housekeeping(app, wiring)
    _metrics_page(app, wiring, events_topic)
    health_pages(app, wiring, health)
    return app


def _ingest_task(
    app: faust.App, wiring: Wiring, decider: FrameDecider, events_name: str, health: Health
) -> None:
    """The ingest thread lives as long as the app; if it dies, the worker stops with it (and
    /healthz says so until it has)."""
    settings, metrics = wiring.settings.daemon, wiring.metrics
    ingest = Ingest(
        wiring.kafka.client_config(),
        wiring.ingest_sources(),
        events_name,
        group_id=ingest_group(settings.app_id),
        on_malformed=decider.malformed,
        on_lag=lambda topic, partition, lag: metrics.consumer_lag.labels(topic, str(partition)).set(
            lag
        ),
    )

    @app.task  # type: ignore[untyped-decorator]
    async def run_ingest() -> None:
        # its limit (raised if need be) decides which records are too large for any frame
        ingest.max_message_bytes = await asyncio.to_thread(
            ensure_events_topic,
            wiring.kafka.client_config(),
            events_name,
            settings.partitions,
            settings.replication_factor or 1,
        )
        ingest.start()
        reading = f"reading {len(wiring.ingest_sources())} topics"
        try:
            while ingest.alive:
                health.record("ingest", True, reading)
                await asyncio.sleep(0.5)
            health.fatal = f"the ingest stopped: {ingest.error}"
            health.record("ingest", False, health.fatal)
            raise IngestError(health.fatal)
        finally:
            await asyncio.to_thread(ingest.stop)


def _housekeeping(app: faust.App, wiring: Wiring) -> None:
    """The worker's own consumer lag, and Connect's metadata re-read every minute."""

    @app.timer(10.0)  # type: ignore[untyped-decorator]
    async def own_lag() -> None:
        consumer = app.consumer
        for tp in consumer.assignment():
            position = await consumer.position(tp)
            highwater = consumer.highwater(tp)
            if position is None or highwater is None:  # unknown right after a rebalance
                continue
            lag = max(highwater - position, 0)
            wiring.metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)

    @app.timer(60.0)  # type: ignore[untyped-decorator]
    async def refresh_meta() -> None:
        for name in wiring.connect:
            await wiring.meta.refresh(name, force=True)


def _metrics_page(app: faust.App, wiring: Wiring, events_topic: Any) -> None:
    """/metrics: the daemon's registry, then MM2 lag (`offsetd.lag.ownership`): collected by
    exactly one worker, the owner of events partition 0, in a thread; a scrape appends its
    last rendered page (no work per scrape)."""

    async def progress(news: Sequence[tuple[str, dict[str, object]]]) -> None:
        """A cycle's progress events, each to its connector's owner (`offsetd.lag.progress`)."""
        sent = [await events_topic.send(key=key, value=encode_nudge(body)) for key, body in news]
        for one in sent:
            await one  # acknowledged

    lag = LagOwnership(wiring.settings, wiring.connect, on_progress=progress)

    @app.task  # type: ignore[untyped-decorator]
    async def mm2_lag() -> None:
        await lag.follow(
            lambda: {(tp.topic, tp.partition) for tp in app.consumer.assignment()},
            events_topic.get_topic_name(),
        )

    @app.page("/metrics")
    async def metrics_page(_web: Any, request: Any) -> Any:
        return _web.bytes(
            generate_latest(wiring.registry) + lag.page(),
            content_type=CONTENT_TYPE_LATEST.split(";")[0],
        )
