"""Every metric a dashboard or an alert rule uses is one the code exports (no typo can hide)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from ruamel.yaml import YAML

from offsetd.app.counters import LaterMetrics
from offsetd.lag.exposition import METRICS
from offsetd.metrics.instruments import DaemonMetrics, RemediationMetrics

REPO = Path(__file__).resolve().parents[3]
_NAME = re.compile(r"\b(offsetd_[a-z0-9_]+|up)\b")


def exported() -> set[str]:
    registry = CollectorRegistry()
    DaemonMetrics.create(registry)
    RemediationMetrics.create(registry)
    names = {s.name for family in registry.collect() for s in family.samples}
    # Labelled metrics expose samples only once a label set is used: name them by type too.
    for family in registry.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "gauge":
            names.add(family.name)
        if family.type == "histogram":
            names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return names | set(METRICS) | {"up"}


def used() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "grafana" / "dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        exprs += [
            v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"
        ]
        for expr in exprs:
            found.setdefault(path.name, set()).update(_NAME.findall(expr))
    rules = YAML(typ="safe").load(
        (REPO / "deploy" / "prometheus" / "offsetd-rules.yml").read_text()
    )
    for group in rules["groups"]:
        for rule in group["rules"]:
            found.setdefault("offsetd-rules.yml", set()).update(_NAME.findall(rule["expr"]))
    return found


def test_every_used_metric_is_exported() -> None:
    known = exported()
    unknown = {where: sorted(names - known) for where, names in used().items() if names - known}
    assert not unknown, unknown


def test_the_check_sees_the_names_it_should() -> None:
    found = used()
    assert "offsetd_breaker_open" in found["offsetd-rules.yml"]
    assert "offsetd_remediation_outcomes_total" in found["offsetd-remediation.json"]
    assert "offsetd_mm2_lag_seconds" in found["mm2-replication.json"]
    assert "offsetd_remediation_outcome_total" not in exported()  # a typo would be caught
    assert {"offsetd_remediation_duration_seconds_bucket", "offsetd_events_total"} <= exported()


def test_no_series_nobody_asked_for() -> None:
    """The client library's `<name>_created` samples are switched off for every instrument."""
    registry = CollectorRegistry()
    daemon = DaemonMetrics.create(registry)
    RemediationMetrics.create(registry)
    LaterMetrics.create(registry)
    daemon.events.labels(kind="status", topic="connect-status").inc()
    page = generate_latest(registry).decode()
    assert "offsetd_events_total" in page
    assert "_created" not in page
