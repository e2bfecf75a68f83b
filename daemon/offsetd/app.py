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
- Nudges (`events.frames`, same topic, same key) bring the owner what it learns later, so the
  state keeps one writer: the executor's outcome of each planned decision (one that did not
  run gives its limits back and lets the decision it inhibited be decided again,
  `engine.later.settle`), and "this connector's metadata is known now" after a one-connector
  read of Connect that events waiting for it asked for (`engine.later.redecide_deferred`).

The ingest commits its offsets only after the frames are acknowledged (acks=all); faust flushes
its producer (the Table's changelog) before it commits the offsets of the frames it consumed. So
after a crash every record is seen again at least once; the engine's per-source high-water marks
make counting idempotent and decision ids are deterministic, so the audit never holds a decision
twice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import faust
from faust.exceptions import ConsumerNotStarted
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from offsetd.audit import AuditLog
from offsetd.config import ConnectCluster, KafkaCluster, Settings
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import Decision
from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.engine.later import (
    PENDING_OUTCOMES,
    OutcomeNews,
    did_not_run,
    outcome_news,
    redecide_deferred,
    settle,
)
from offsetd.engine.state import ConnectorState
from offsetd.errors import OffsetdError
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.frames import (
    decode_frame,
    decode_nudge,
    encode_nudge,
    route_dlq,
    route_offsets,
    route_status,
)
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
from offsetd.remediation.dead_members import client_id, evict_dead_members
from offsetd.remediation.executor import Remediator
from offsetd.rules import RuleSet
from offsetd.scope import scope_of, split_owner_key

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
        broker_session_timeout=settings.group_session_timeout / 1000,
        broker_heartbeat_interval=settings.group_heartbeat_interval / 1000,
        broker_rebalance_timeout=settings.group_rebalance_timeout / 1000,
        # faust refuses a session timeout above the request timeout (default 90 s)
        broker_request_timeout=max(90.0, settings.group_session_timeout / 1000),
        # names this worker's liveness beacon, by which a restart drops it from the group
        broker_client_id=client_id(wiring.remediator.owner) if wiring.remediator else "offsetd",
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
    # engine.later: events waiting for metadata, decisions whose action did not run
    fetching: dict[str, asyncio.Task[None]] = {}
    fetch_slots = asyncio.Semaphore(4)
    waiting_events = Gauge(
        "offsetd_events_waiting_for_metadata",
        "Events kept until the connector's class and type are known (rules need them), "
        "by Connect cluster and connector.",
        ["connect_cluster", "connector"],
        registry=wiring.registry,
    )
    waiting_expired = Counter(
        "offsetd_events_waiting_expired",
        "Events that waited for their connector's metadata past their rules' windows and were "
        "not decided, by Connect cluster.",
        ["connect_cluster"],
        registry=wiring.registry,
    )
    releases = Counter(
        "offsetd_decisions_released",
        "Planned decisions whose action did not run (guarded, not located, rejected, ...): "
        "their budget, cooldown, backoff and inhibitions were given back, by rule and outcome.",
        ["rule", "outcome"],
        registry=wiring.registry,
    )

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
        """One internal record: a batch of one connector's raw records, in order (or a nudge)."""
        try:
            news = decode_nudge(value)  # the first byte tells
            if news is not None:
                await _apply_news(key, news)
                return
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
        # offsetd.scope: a connector this deployment does not own is dropped here, before the
        # rules (no decision, no audit record, no budget spent), and counted. Labels not known
        # yet (None) are not "out": decided, and the scope guard does not act without them.
        cluster, connector = split_owner_key(key)
        scope = scope_of(wiring.settings.remediation, cluster, wiring.connect.get(cluster))
        if not scope.everything:
            owned = scope.check(connector, None)  # the names, when they decide alone
            if owned.in_scope is None:  # else its labels do: known, or read now
                owned = scope.check_meta(connector, await wiring.meta.lookup(cluster, connector))
            if owned.in_scope is False:
                metrics.out_of_scope.labels(cluster).inc(len(records))
                return
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
            if state.deferred:  # events waiting for this connector's metadata (engine.later)
                decisions += _deferred(key, state, now)
                applied += 1
        except BaseException:
            cache.forget(key)
            raise
        if decisions:
            await _decide_all(decisions)
        if applied:
            cache.put(key, state)  # once per frame, not per event

    def _deferred(key: str, state: ConnectorState, now: int) -> list[Decision]:
        """Decide the connector's deferred events if its metadata is known by now; else read
        it (`_await_meta`). The wait is never silent: a gauge, and a log line per try."""
        cluster, connector = state.connect_cluster, state.connector
        # offsetd.scope: metadata known by now may show that another deployment owns it
        scope = scope_of(wiring.settings.remediation, cluster, wiring.connect.get(cluster))
        if scope.check_meta(connector, wiring.meta.peek(cluster, connector)).in_scope is False:
            metrics.out_of_scope.labels(cluster).inc(len(state.deferred))
            state.deferred = []
        made, expired = redecide_deferred(
            state, wiring.rules, wiring.meta.peek(cluster, connector), now, counters.match
        )
        if expired:
            waiting_expired.labels(cluster).inc(expired)
            log.warning(
                "%d event(s) of %s waited for its metadata past their rules' windows: not decided",
                expired,
                key,
            )
        waiting_events.labels(cluster, connector).set(len(state.deferred))
        if state.deferred:
            _await_meta(key, cluster, connector)
        return made

    def _await_meta(key: str, cluster: str, connector: str) -> None:
        """One task per connector reads its metadata from Connect (not rate-limited, tried
        again) and nudges the owner when it is known (the nudge decides the waiting events)."""
        if key in fetching:
            return
        task = asyncio.get_running_loop().create_task(_fetch_meta(key, cluster, connector))
        fetching[key] = task
        task.add_done_callback(lambda _done: fetching.pop(key, None))

    async def _fetch_meta(key: str, cluster: str, connector: str) -> None:
        delays = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
        give_up = time.monotonic() + wiring.rules.meta_within_ms / 1000
        await asyncio.sleep(0.2)  # a cluster-wide read under way (at start) may answer it
        for attempt in itertools.count():
            meta = wiring.meta.peek(cluster, connector)
            if meta is None:
                try:
                    async with fetch_slots:  # a few at a time, whatever the backlog
                        meta = await wiring.meta.fetch(cluster, connector)
                except OffsetdError as exc:  # names the call and the status, never a config
                    log.warning("could not read %s's metadata (try %d): %s", key, attempt + 1, exc)
                except Exception as exc:  # a broken answer: say what, not its content
                    why = type(exc).__name__
                    log.warning("could not read %s's metadata (try %d): %s", key, attempt + 1, why)
                else:
                    if meta is None:
                        log.warning("%s is not known to Connect yet (try %d)", key, attempt + 1)
            if meta is not None:
                log.info("%s's metadata is known: deciding its waiting events", key)
                try:
                    await _nudge(key, {"type": "metadata"})
                except Exception:  # the timer below tries again
                    log.exception("could not nudge the owner of %s", key)
                return
            if time.monotonic() > give_up:
                log.warning("%s's metadata: no answer within its rules' windows; gave up", key)
                return
            await asyncio.sleep(delays[min(attempt, len(delays) - 1)])

    async def _nudge(key: str, news: dict[str, object]) -> None:
        """News for the owner of `key`, in order with its events (see events.frames)."""
        sent = await events_topic.send(key=key, value=encode_nudge(news))
        await sent  # acknowledged

    async def _apply_news(key: str, news: dict[str, object]) -> None:
        """A nudge: an executor's outcome (`settle`) or metadata now known (deferred events)."""
        state = cache.get(key)
        if not state.connector:
            return  # nothing was ever decided for it: nothing to give back or to decide
        now = wiring.clock()
        made: list[Decision] = []
        try:
            if news["type"] == "outcome":
                told = cast(OutcomeNews, news["outcome"])
                held = len(state.held)
                made = settle(state, told, wiring.rules, now)
                released = did_not_run(told["outcome"], told["would_be"])
                if not released and held == len(state.held):
                    return  # it ran, and held nothing back: the state is as it was
                if released:
                    releases.labels(told["rule"], told["outcome"]).inc()
                    log.info(
                        "decision %s (%s) did not run (%s): its limits are given back; "
                        "%d decision(s) it held back decided again",
                        told["decision"],
                        told["rule"],
                        told["outcome"],
                        len(made),
                    )
            elif news["type"] == "metadata":
                if not state.deferred:
                    return
                made = _deferred(key, state, now)
            else:
                log.warning("skipped a nudge of unknown type for %s: %s", key, news["type"])
                return
        except BaseException:
            cache.forget(key)
            raise
        if made:
            await _decide_all(made)
        cache.put(key, state)

    async def report_outcome(decision: Decision, outcome: str, extra: dict[str, Any]) -> None:
        """The executor's outcome of a planned decision, to the connector's owner (this very
        worker: the executor runs where the decision was made) through the events topic."""
        if outcome in PENDING_OUTCOMES:
            return
        would_be = str(extra["would_be"]) if extra.get("would_be") else None
        news: dict[str, object] = {
            "type": "outcome",
            "outcome": outcome_news(decision, outcome, would_be),
        }
        await _nudge(owner_key(decision.connect_cluster, decision.connector), news)

    if wiring.remediator is not None:
        wiring.remediator.on_outcome = report_outcome

    @app.timer(30.0)  # type: ignore[untyped-decorator]
    async def waiting_for_meta() -> None:
        """States with deferred events and no read of their metadata under way (after a
        restart, or a read that gave up): read it again."""
        try:
            for key, text in list(states.items()):
                if not text or '"deferred":[]' in text or key in fetching:
                    continue
                state = cache.get(key)
                if state.deferred:
                    waiting_events.labels(state.connect_cluster, state.connector).set(
                        len(state.deferred)
                    )
                    _await_meta(key, state.connect_cluster, state.connector)
        except Exception:  # a table being recovered or rebalanced: next time
            log.exception("could not look for events waiting for metadata")

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

    async def start_remediation() -> None:
        """Resume unfinished sagas: at once those whose owner provably ended (a daemon killed
        and restarted in place), the others once this worker owns partitions of its events
        topic (`Remediator.start`)."""
        remediator = wiring.remediator
        if remediator is None:
            return
        events_name = events_topic.get_topic_name()
        owned: set[int] = set()

        async def assigned() -> None:
            """Until this worker owns events partitions (at most 2 minutes once its consumer
            runs: a worker may be given none)."""
            polls = 0
            while polls < 240:
                try:
                    tps = app.consumer.assignment()
                except ConsumerNotStarted:  # this starts with the app, before its consumer
                    tps = set()
                else:
                    polls += 1
                owned.update(tp.partition for tp in tps if tp.topic == events_name)
                if owned:
                    return
                await asyncio.sleep(0.5)

        partitions = wiring.settings.daemon.partitions

        def owns(connect_cluster: str, connector: str) -> bool:
            key = owner_key(connect_cluster, connector).encode()
            return (murmur2(key) & 0x7FFFFFFF) % partitions in owned

        await remediator.start(owns, assigned())

    class RemediationStart(faust.Service):
        """Starts `start_remediation` with the app, not as an `@app.task`: faust starts those
        only after the group has assigned partitions and the tables are recovered, which after
        a SIGKILL waits out the dead member's whole session timeout (~1 minute). Then, before
        the app's consumer starts (this service is the app's first dependency), removes the
        group's provably dead members, so that the join does not wait for them either."""

        async def on_start(self) -> None:
            if self.restart_count:  # once per process, as an @app.task
                return
            self.add_future(start_remediation())
            await evict_dead_members(
                app.conf.id,  # the consumer group
                wiring.kafka.bootstrap_servers,
                credentials_to_aiokafka_auth(faust_credentials(wiring.kafka)),
            )

    app.add_dependency(RemediationStart())

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
