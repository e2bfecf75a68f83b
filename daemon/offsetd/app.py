"""The faust app: Connect's topics -> typed events -> one owner per connector -> rules -> decisions.

Wiring only (the only module that imports faust). The logic lives in the pure core: decoders in
`offsetd.events`, rules in `offsetd.rules`, the engine in `offsetd.engine`.

- The ingest (`offsetd.ingest`, a confluent-kafka consumer in a thread, not a faust agent: faust's
  driver alone moves ~8k records/s, bench/README.md) reads the status, offsets and DLQ topics of
  every Connect cluster whose internal topics live on this process's Kafka cluster in batches,
  routes each record to `<connect-cluster>/<connector>` and sends one frame of raw records per
  connector and batch to one internal topic with a fixed partition count, so one worker owns
  each connector. A record that names no connector is counted, logged with its coordinates and
  skipped.
- `decide_agent` (faust, for the Table) takes each frame, decodes its records (malformed ones
  counted, logged, skipped), runs the engine on the connector's state, writes every decision to
  the audit topic, awaited, and then the state, once per frame. The state is kept decoded in
  memory in front of the Table (`StateCache`): it is parsed only after a recovery or rebalance.

The ingest commits its offsets only after the frames are acknowledged (acks=all); faust flushes
its producer (the Table's changelog) before it commits the offsets of the frames it consumed. So
after a crash every record is seen again at least once; the engine's per-source high-water marks
make counting idempotent and decision ids are deterministic, so the audit never holds a decision
twice.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import faust
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, KafkaCluster, Settings
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import Decision
from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.frames import decode_frame, route_dlq, route_offsets, route_status
from offsetd.events.models import owner_key
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status
from offsetd.ingest import (
    EVENTS_MAX_MESSAGE_BYTES,
    Ingest,
    IngestError,
    Source,
    ensure_events_topic,
)
from offsetd.lag.ownership import LagOwnership
from offsetd.metrics.instruments import DaemonMetrics
from offsetd.offsets.javahash import murmur2
from offsetd.remediation.executor import Remediator
from offsetd.rules import RuleSet

log = logging.getLogger("offsetd")
Decoder = Callable[[str, RawRecord], Any]
_CONNECTOR_STATUS = b"status-connector-"


@dataclass
class Wiring:
    """Everything the agents need, built before the app starts."""

    settings: Settings
    alias: str
    kafka: KafkaCluster
    connect: dict[str, ConnectCluster]
    rules: RuleSet
    audit: AuditLog
    meta: ConnectorMetaCache
    registry: CollectorRegistry
    metrics: DaemonMetrics
    clock: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    remediator: Remediator | None = None  # None: decide and audit only

    def source_topics(self) -> dict[str, tuple[str, Decoder]]:
        """topic -> (Connect cluster, decoder) for every topic this process reads."""
        topics: dict[str, tuple[str, Decoder]] = {}
        for name, cluster in self.connect.items():
            topics[cluster.status_topic] = (name, decode_status)
            topics[cluster.offsets_topic] = (name, decode_offsets)
            for dlq in cluster.dlq_topics:
                topics[dlq] = (name, decode_dlq)
        return topics

    def ingest_sources(self) -> dict[str, Source]:
        """topic -> how the ingest finds each record's owner, for every topic this process reads."""
        routes = {decode_status: route_status, decode_offsets: route_offsets, decode_dlq: route_dlq}
        return {
            topic: Source(cluster, routes[decoder], dlq=decoder is decode_dlq)
            for topic, (cluster, decoder) in self.source_topics().items()
        }


class _Counters:
    """The per-event metrics with their label children resolved once (`labels()` costs ~1 us)."""

    def __init__(self, metrics: DaemonMetrics) -> None:
        self._metrics = metrics
        self._events: dict[tuple[str, str], Callable[[], None]] = {}
        self._matches: dict[str, Callable[[], None]] = {}
        self._malformed: dict[str, Callable[[], None]] = {}

    def event(self, event: Any) -> None:
        key = (event.kind, event.source.topic)
        inc = self._events.get(key)
        if inc is None:
            inc = self._events[key] = self._metrics.events.labels(str(key[0]), key[1]).inc
        inc()

    def match(self, rule: str) -> None:
        inc = self._matches.get(rule)
        if inc is None:
            inc = self._matches[rule] = self._metrics.rule_matches.labels(rule).inc
        inc()

    def malformed(self, topic: str) -> None:
        inc = self._malformed.get(topic)
        if inc is None:
            inc = self._malformed[topic] = self._metrics.malformed.labels(topic).inc
        inc()


def faust_credentials(cluster: KafkaCluster) -> Any:
    """faust's broker credentials for a cluster's TLS/SASL settings (None for PLAINTEXT)."""
    context: ssl.SSLContext | None = None
    if cluster.uses_tls:
        tls = cluster.tls
        context = ssl.create_default_context(
            cafile=str(tls.ca_file) if tls is not None and tls.ca_file else None
        )
        if tls is not None and tls.cert_file and tls.key_file:
            password = tls.key_password.get_secret_value() if tls.key_password else None
            context.load_cert_chain(str(tls.cert_file), str(tls.key_file), password=password)
        if tls is not None and not tls.check_hostname:
            context.check_hostname = False
    if cluster.uses_sasl and cluster.sasl is not None:
        return faust.SASLCredentials(
            username=cluster.sasl.username,
            password=cluster.sasl.password.get_secret_value(),
            mechanism=cluster.sasl.mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def build_app(wiring: Wiring) -> faust.App:
    settings = wiring.settings.daemon
    servers = [f"kafka://{s}" for s in wiring.kafka.bootstrap_servers.split(",")]
    app = faust.App(
        settings.app_id,
        broker=servers,
        broker_credentials=faust_credentials(wiring.kafka),
        store="memory://",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor or 1,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        datadir=str(settings.data_dir),
        producer_acks=-1,
    )
    sources = wiring.source_topics()
    events_name = f"{settings.app_id}-events"
    events_topic = app.topic(
        events_name,
        partitions=settings.partitions,
        internal=True,  # faust creates it, with exactly this partition count
        config={"max.message.bytes": str(EVENTS_MAX_MESSAGE_BYTES)},  # a large record passes
        key_type=str,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )
    states = app.Table(
        "connector-state",
        default=None,
        partitions=settings.partitions,
        key_type=str,
        value_type=str,  # the engine state as JSON text
    )
    metrics = wiring.metrics
    counters = _Counters(metrics)
    cache = StateCache(states)

    def malformed(raw: RawRecord, bad: Malformed) -> None:
        counters.malformed(raw.topic)
        log.warning("skipped a malformed record: %s", bad)

    ingest = Ingest(
        wiring.kafka.client_config(),
        wiring.ingest_sources(),
        events_name,
        group_id=f"{settings.app_id}-ingest",
        on_malformed=malformed,
        on_lag=lambda topic, partition, lag: metrics.consumer_lag.labels(topic, str(partition)).set(
            lag
        ),
    )

    @app.task  # type: ignore[untyped-decorator]
    async def run_ingest() -> None:
        """The ingest thread lives as long as the app; if it dies, the worker stops with it."""
        # its limit (raised if need be) decides which records are too large for any frame
        ingest.max_message_bytes = await asyncio.to_thread(
            ensure_events_topic,
            wiring.kafka.client_config(),
            events_name,
            settings.partitions,
            settings.replication_factor or 1,
        )
        ingest.start()
        try:
            while ingest.alive:
                await asyncio.sleep(0.5)
            raise IngestError(f"the ingest stopped: {ingest.error}")
        finally:
            await asyncio.to_thread(ingest.stop)

    def decoder(raw: RawRecord) -> Any:
        found = sources.get(raw.topic)
        if found is None:
            raise Malformed("not a topic this process reads", raw.topic, raw.partition, raw.offset)
        cluster, decode = found
        return decode(cluster, raw)

    def meta_of(event: Any) -> Any:
        return wiring.meta.get(event.connect_cluster, event.connector)

    def failed(raw: RawRecord, exc: Exception) -> None:
        # One bad event must not stop the stream: count it, log it, go on.
        counters.malformed(events_name)
        log.error("could not decide on %s; skipped", raw.coordinates, exc_info=exc)

    @app.agent(events_topic)
    async def decide_agent(stream: Any) -> None:
        async for key, value in stream.items():
            try:
                await _decide_frame(key, value)
            except Exception:
                metrics.malformed.labels(events_name).inc()
                log.exception("could not decide on a frame for %s; skipped", key)

    async def _decide_frame(key: str, value: bytes) -> None:
        """One internal record: a batch of one connector's raw records, in order."""
        try:
            records = decode_frame(value)
        except Malformed as bad:
            counters.malformed(events_name)
            log.warning("skipped a malformed frame for %s: %s", key, bad)
            return
        for raw in records:  # a connector changed: re-read the metadata (rate-limited)
            if raw.key is not None and raw.key.startswith(_CONNECTOR_STATUS):
                found = sources.get(raw.topic)
                if found is not None:
                    await wiring.meta.refresh(found[0])
                break
        now = wiring.clock()
        state = cache.get(key)
        try:
            applied, decisions = decide_batch(
                state,
                records,
                decoder,
                wiring.rules,
                meta_of,
                lambda _event: now,
                on_match=counters.match,
                on_event=counters.event,
                on_malformed=malformed,
                on_error=failed,
            )
        except BaseException:
            cache.forget(key)
            raise
        if decisions:
            await _decide_all(decisions)
        if applied:
            cache.put(key, state)  # once per frame, not per event

    async def _decide_all(decisions: list[Decision]) -> None:
        """The one place decisions are written to the audit (and handed on from): a frame's
        decisions in order, with one wait for all their acknowledgements."""
        records = [decision.audit_record(wiring.rules) for decision in decisions]
        written = await wiring.audit.write_many(records)
        for decision, new in zip(decisions, written, strict=True):
            if new:
                metrics.audit_writes.labels(decision.outcome).inc()
                log.info("decision %s: %s", decision.id, decision.summary())
                if wiring.remediator is not None:
                    # Enqueue only: remediations run as their own tasks. A replayed decision is
                    # already in the audit; the remediator's start-up scan resubmits those that
                    # never got an outcome, so a crash between audit and action loses nothing.
                    wiring.remediator.submit(decision)
            metrics.decisions.labels(decision.rule, decision.mode, decision.outcome).inc()

    @app.task  # type: ignore[untyped-decorator]
    async def start_remediation() -> None:
        """Once this worker owns partitions: resume the sagas of the connectors it owns."""
        remediator = wiring.remediator
        if remediator is None:
            return
        events_name = events_topic.get_topic_name()
        owned: set[int] = set()
        for _ in range(240):
            owned = {tp.partition for tp in app.consumer.assignment() if tp.topic == events_name}
            if owned:
                break
            await asyncio.sleep(0.5)
        partitions = wiring.settings.daemon.partitions

        def owns(connect_cluster: str, connector: str) -> bool:
            key = owner_key(connect_cluster, connector).encode()
            return (murmur2(key) & 0x7FFFFFFF) % partitions in owned

        await remediator.start(owns)

    @app.timer(10.0)  # type: ignore[untyped-decorator]
    async def own_lag() -> None:
        consumer = app.consumer
        for tp in consumer.assignment():
            position = await consumer.position(tp)
            highwater = consumer.highwater(tp)
            if position is None or highwater is None:  # unknown right after a rebalance
                continue
            lag = max(highwater - position, 0)
            metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)

    @app.timer(60.0)  # type: ignore[untyped-decorator]
    async def refresh_meta() -> None:
        for name in wiring.connect:
            await wiring.meta.refresh(name, force=True)

    # MM2 lag (offsetd.lag.ownership): collected by exactly one worker, the owner of events
    # partition 0, in a thread; /metrics appends its last rendered page (no work per scrape).
    lag = LagOwnership(wiring.settings, wiring.connect)

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

    return app
