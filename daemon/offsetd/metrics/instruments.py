"""offsetd's own instruments, created against a passed registry (tests get a fresh one).

Names follow Prometheus conventions: `offsetd_` prefix, base units, `_total` for counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from offsetd.outcomes import FINAL_OUTCOMES

__all__ = ["REMEDIATION_OUTCOMES", "DaemonMetrics", "RemediationMetrics"]

# The client library adds an `<name>_created` series (a start timestamp) to every counter and
# histogram: series nobody asked for and no dashboard reads. It is a process-wide switch.
disable_created_metrics()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class DaemonMetrics:
    events: Counter
    malformed: Counter
    rule_matches: Counter
    decisions: Counter
    consumer_lag: Gauge
    audit_writes: Counter
    audit_refusals: Counter
    out_of_scope: Counter
    decision_latency: Histogram

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
                "Decisions by rule, mode and outcome (planned or suppressed_<reason>).",
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
                "Audit records written (acknowledged), by outcome: planned decisions, and each "
                "update of a tally of suppressed ones (suppressed_<reason>).",
                ["outcome"],
                registry=registry,
            ),
            audit_refusals=Counter(
                "offsetd_audit_refusals",
                "Writes of planned decisions the audit topic refused; each is written again "
                "until it is taken, and nothing acts on those decisions meanwhile.",
                registry=registry,
            ),
            out_of_scope=Counter(
                "offsetd_out_of_scope_records",
                "Records of connectors outside this deployment's scope, dropped before the "
                "rules (no decision, no audit), by Connect cluster.",
                ["connect_cluster"],
                registry=registry,
            ),
            decision_latency=Histogram(
                "offsetd_decision_latency_seconds",
                "From an event's record time (Connect wrote it) to the daemon deciding on it, "
                "by event kind: how far behind the daemon is.",
                ["kind"],
                buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
                registry=registry,
            ),
        )


#: The outcomes a decision ends with once the remediation layer has handled it (one vocabulary:
#: `offsetd.outcomes`).
REMEDIATION_OUTCOMES = tuple(FINAL_OUTCOMES)


@dataclass(frozen=True)
class RemediationMetrics:
    """What the remediation layer did; the dashboards and alerts (deploy/, grafana/) use these."""

    outcomes: Counter
    skipped: Counter
    quarantined: Counter
    duration: Histogram
    stopped_seconds: Counter
    left_stopped: Gauge
    breaker_open: Gauge
    paused: Gauge
    notifications: Counter
    connect_requests: Counter
    blast_radius_failing: Gauge
    blast_radius_holds: Counter
    kube_events: Counter
    kube_event_failures: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> RemediationMetrics:
        return cls(
            outcomes=Counter(
                "offsetd_remediation_outcomes",
                "Decisions by rule and final outcome (executed, dry_run, awaiting_approval, "
                "suppressed_*, breaker_open, failed, not_located).",
                ["rule", "outcome"],
                registry=registry,
            ),
            skipped=Counter(
                "offsetd_records_skipped",
                "Records offsetd moved a connector past, by Connect cluster, connector and topic.",
                ["connect_cluster", "connector", "topic"],
                registry=registry,
            ),
            quarantined=Counter(
                "offsetd_records_quarantined",
                "Records copied to the quarantine topic (acknowledged), by connector and topic.",
                ["connect_cluster", "connector", "topic"],
                registry=registry,
            ),
            duration=Histogram(
                "offsetd_remediation_duration_seconds",
                "Wall time of one remediation, from its first step to its verified end.",
                ["action", "result"],
                buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
                registry=registry,
            ),
            stopped_seconds=Counter(
                "offsetd_connector_stopped_seconds",
                "Seconds connectors spent STOPPED by offsetd during remediations.",
                ["connect_cluster", "connector"],
                registry=registry,
            ),
            left_stopped=Gauge(
                "offsetd_connector_left_stopped",
                "1 while offsetd has left a connector STOPPED and escalated (needs a person).",
                ["connect_cluster", "connector"],
                registry=registry,
            ),
            breaker_open=Gauge(
                "offsetd_breaker_open",
                "1 while the breaker for a connector is open (offsetd stopped acting on it).",
                ["connect_cluster", "connector"],
                registry=registry,
            ),
            paused=Gauge(
                "offsetd_automation_paused",
                "1 while automation is paused globally (offsetd pause).",
                registry=registry,
            ),
            notifications=Counter(
                "offsetd_notifications",
                "Notify actions, by rule and result (logged, sent, failed).",
                ["rule", "result"],
                registry=registry,
            ),
            connect_requests=Counter(
                "offsetd_connect_requests",
                "REST calls the remediation layer made to Connect, by method and status code.",
                ["method", "code"],
                registry=registry,
            ),
            blast_radius_failing=Gauge(
                "offsetd_blast_radius_failing_connectors",
                "Connectors failing now or FAILED within blast_radius.within, by Connect "
                "cluster, at the last guard check before an action.",
                ["connect_cluster"],
                registry=registry,
            ),
            blast_radius_holds=Counter(
                "offsetd_blast_radius_holds",
                "Decisions the blast radius held back (too many connectors failing: an outage), "
                "by Connect cluster.",
                ["connect_cluster"],
                registry=registry,
            ),
            kube_events=Counter(
                "offsetd_kube_events",
                "Kubernetes Events written (created, or a repeat counted in one's series) on "
                "Strimzi's resources, by Connect cluster and reason.",
                ["connect_cluster", "reason"],
                registry=registry,
            ),
            kube_event_failures=Counter(
                "offsetd_kube_event_failures",
                "Kubernetes Events that could not be written (the remediation went on), "
                "by Connect cluster.",
                ["connect_cluster"],
                registry=registry,
            ),
        )
