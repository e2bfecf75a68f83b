"""offsetd's own instruments, created against a passed registry (tests get a fresh one).

Names follow Prometheus conventions: `offsetd_` prefix, base units, `_total` for counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge


@dataclass(frozen=True)
class DaemonMetrics:
    events: Counter
    malformed: Counter
    rule_matches: Counter
    decisions: Counter
    consumer_lag: Gauge
    audit_writes: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> DaemonMetrics:
        return cls(
            events=Counter(
                "offsetd_events",
                "Events decoded from Connect's topics, by kind and source topic.",
                ["kind", "topic"],
                registry=registry,
            ),
            malformed=Counter(
                "offsetd_malformed_records",
                "Records that could not be decoded and were skipped, by topic.",
                ["topic"],
                registry=registry,
            ),
            rule_matches=Counter(
                "offsetd_rule_matches",
                "Events that matched a rule's conditions (before counting windows).",
                ["rule"],
                registry=registry,
            ),
            decisions=Counter(
                "offsetd_decisions",
                "Decisions by rule, mode and outcome (planned or suppressed).",
                ["rule", "mode", "outcome"],
                registry=registry,
            ),
            consumer_lag=Gauge(
                "offsetd_consumer_lag_records",
                "Records offsetd's own consumers are behind, by topic and partition.",
                ["topic", "partition"],
                registry=registry,
            ),
            audit_writes=Counter(
                "offsetd_audit_writes",
                "Decisions written to the audit topic (acknowledged), by outcome.",
                ["outcome"],
                registry=registry,
            ),
        )
