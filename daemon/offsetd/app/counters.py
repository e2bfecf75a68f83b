"""The daemon's per-event metrics, and those of decisions that wait or are given back.

The per-event counters resolve their label children once (`labels()` costs ~1 us, and runs for
every event). The waiting and release metrics belong to `offsetd.engine.later`'s work, which
the app does, so the app creates them against the daemon's registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from offsetd.metrics.instruments import DaemonMetrics

__all__ = ["EventCounters", "LaterMetrics"]

_DLQ = "dlq_record"


class EventCounters:
    """The per-event metrics with their label children resolved once (`labels()` costs ~1 us)."""

    def __init__(self, metrics: DaemonMetrics, since_ms: int = 0) -> None:
        self._metrics = metrics
        self._since_ms = since_ms  # records written before the worker started: not "late"
        self._events: dict[tuple[str, str], Callable[..., None]] = {}  # Counter.inc(amount=1)
        self._latency: dict[str, Callable[[float], None]] = {}
        self._matches: dict[str, Callable[..., None]] = {}
        self._malformed: dict[str, Callable[[], None]] = {}

    def event(self, event: Any, now_ms: int) -> None:
        """One event decided at `now_ms`: counted, and how late it was decided.

        The latency is taken from the record's timestamp, which Connect sets when it writes a
        status or an offset. A DLQ record carries the failing record's own timestamp instead
        (how old the data is, not how late the daemon is): the DLQ topics' consumer lag shows
        that. Records written before this worker started (the history it catches up on) are
        not counted as late either.
        """
        key = (event.kind, event.source.topic)
        inc = self._events.get(key)
        if inc is None:
            inc = self._events[key] = self._metrics.events.labels(str(key[0]), key[1]).inc
        inc()
        written_ms = event.source.timestamp_ms
        if key[0] == _DLQ or written_ms < self._since_ms:
            return
        observe = self._latency.get(key[0])
        if observe is None:
            observe = self._latency[key[0]] = self._metrics.decision_latency.labels(
                str(key[0])
            ).observe
        observe(max(now_ms - written_ms, 0) / 1000)

    def frame(self, outcome: Any, now_ms: int) -> None:
        """A frame the compiled engine decided at `now_ms` (`offsetd_native.FrameOutcome`):
        what `event` and `match` count one by one, counted from its totals — its events per
        (kind, topic), each non-DLQ event's lateness, its rules' matches."""
        events, metrics = self._events, self._metrics
        for kind, topic, count in outcome.events:
            inc = events.get((kind, topic))
            if inc is None:
                inc = events[(kind, topic)] = metrics.events.labels(kind, topic).inc
            inc(count)
        for kind, written_ms in outcome.times:
            if kind == _DLQ or written_ms < self._since_ms:
                continue
            observe = self._latency.get(kind)
            if observe is None:
                observe = self._latency[kind] = metrics.decision_latency.labels(kind).observe
            observe(max(now_ms - written_ms, 0) / 1000)
        for rule, count in outcome.matches:
            inc = self._matches.get(rule)
            if inc is None:
                inc = self._matches[rule] = metrics.rule_matches.labels(rule).inc
            inc(count)

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


@dataclass(frozen=True)
class LaterMetrics:
    """Events waiting for metadata, those that waited too long, and decisions given back."""

    waiting_events: Gauge
    waiting_expired: Counter
    releases: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> LaterMetrics:
        return cls(
            waiting_events=Gauge(
                "offsetd_events_waiting_for_metadata",
                "Events kept until the connector's class and type are known (rules need them), "
                "by Connect cluster and connector.",
                ["connect_cluster", "connector"],
                registry=registry,
            ),
            waiting_expired=Counter(
                "offsetd_events_waiting_expired",
                "Events that waited for their connector's metadata past their rules' windows "
                "and were not decided, by Connect cluster.",
                ["connect_cluster"],
                registry=registry,
            ),
            releases=Counter(
                "offsetd_decisions_released",
                "Planned decisions whose action did not run (guarded, not located, rejected, "
                "...): their budget, cooldown, backoff and inhibitions were given back, by rule "
                "and outcome.",
                ["rule", "outcome"],
                registry=registry,
            ),
        )
