"""The faust app: Connect's topics -> typed events -> one owner per connector -> rules -> decisions.

Wiring only (the only module that imports faust). The logic lives in the pure core: decoders in
`offsetd.events`, rules in `offsetd.rules`, the engine in `offsetd.engine`.

- `ingest` reads the status, offsets and DLQ topics of every Connect cluster whose internal topics
  live on this process's Kafka cluster, decodes each record (a malformed one is counted, logged
  with its coordinates and skipped) and re-keys it to `<connect-cluster>/<connector>` into one
  internal topic with a fixed partition count, so one worker owns each connector.
- `decide` keeps one engine state per connector in a Table with that same partition count, and
  writes every decision to the audit topic, awaited, before it moves on.

Faust flushes its producer (the re-keyed sends and the Table's changelog) before it commits the
offsets of what it consumed, so after a crash every event is seen again at least once; the
engine's per-source high-water marks make counting idempotent and decision ids are deterministic,
so the audit never holds a decision twice.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import faust
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import TypeAdapter

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, KafkaCluster, Settings
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import ConnectorState, decide
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.models import ConnectorStatusEvent, Event, owner_key
from offsetd.events.offsets import decode_offsets
from offsetd.events.status import decode_status
from offsetd.metrics.instruments import DaemonMetrics
from offsetd.rules import RuleSet

log = logging.getLogger("offsetd")
EVENT = TypeAdapter[Event](Event)
Decoder = Callable[[str, RawRecord], Any]


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

    def source_topics(self) -> dict[str, tuple[str, Decoder]]:
        """topic -> (Connect cluster, decoder) for every topic this process reads."""
        topics: dict[str, tuple[str, Decoder]] = {}
        for name, cluster in self.connect.items():
            topics[cluster.status_topic] = (name, decode_status)
            topics[cluster.offsets_topic] = (name, decode_offsets)
            for dlq in cluster.dlq_topics:
                topics[dlq] = (name, decode_dlq)
        return topics


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
    raw_topic = app.topic(
        *sources, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    events_topic = app.topic(
        f"{settings.app_id}-events",
        partitions=settings.partitions,
        internal=True,  # faust creates it, with exactly this partition count
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

    @app.agent(raw_topic)
    async def ingest(stream: Any) -> None:
        async for faust_event in stream.events():
            message = faust_event.message
            cluster, decoder = sources[message.topic]
            raw = RawRecord(
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                timestamp_ms=int(message.timestamp * 1000),
                key=message.key,
                value=message.value,
                headers=tuple(message.headers or ()),
            )
            try:
                event = decoder(cluster, raw)
            except Malformed as bad:
                metrics.malformed.labels(message.topic).inc()
                log.warning("skipped a malformed record: %s", bad)
                continue
            metrics.events.labels(str(event.kind), message.topic).inc()
            await events_topic.send(
                key=owner_key(event.connect_cluster, event.connector),
                value=event.model_dump_json().encode(),
            )

    @app.agent(events_topic)
    async def decide_agent(stream: Any) -> None:
        async for key, value in stream.items():
            try:
                await _decide_one(key, value)
            except Exception:
                # One bad event must not stop the stream: count it, log it, go on.
                metrics.malformed.labels(events_topic.get_topic_name()).inc()
                log.exception("could not decide on an event for %s; skipped", key)

    def count_match(rule: str) -> None:
        metrics.rule_matches.labels(rule).inc()

    async def _decide_one(key: str, value: bytes) -> None:
        event = EVENT.validate_json(value)
        if isinstance(event, ConnectorStatusEvent):
            await wiring.meta.refresh(event.connect_cluster)
        stored = states.get(key)
        state = ConnectorState.from_json(stored) if stored else ConnectorState()
        meta = wiring.meta.get(event.connect_cluster, event.connector)
        state, decisions = decide(
            state, event, wiring.rules, meta, wiring.clock(), on_match=count_match
        )
        for decision in decisions:
            record = decision.audit_record(wiring.rules)
            if await wiring.audit.write(record):
                metrics.audit_writes.labels(decision.outcome).inc()
                log.info("decision %s: %s", decision.id, decision.summary())
            metrics.decisions.labels(decision.rule, decision.mode, decision.outcome).inc()
        states[key] = state.to_json()

    @app.timer(10.0)  # type: ignore[untyped-decorator]
    async def own_lag() -> None:
        consumer = app.consumer
        for tp in consumer.assignment():
            position = await consumer.position(tp)
            if position is None:
                continue
            lag = max(consumer.highwater(tp) - position, 0)
            metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)

    @app.timer(60.0)  # type: ignore[untyped-decorator]
    async def refresh_meta() -> None:
        for name in wiring.connect:
            await wiring.meta.refresh(name, force=True)

    @app.page("/metrics")
    async def metrics_page(_web: Any, request: Any) -> Any:
        return _web.bytes(
            generate_latest(wiring.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0]
        )

    return app
