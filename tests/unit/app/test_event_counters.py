"""The daemon's per-event metrics: each event counted, and how late it was decided."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from offsetd.app.counters import EventCounters
from offsetd.events.models import DlqRecordEvent, ErrorInfo, SourceRecord, TaskStatusEvent
from offsetd.metrics.instruments import DaemonMetrics


def test_each_event_is_counted_with_its_latency_from_its_record_time() -> None:
    registry = CollectorRegistry()
    counters = EventCounters(DaemonMetrics.create(registry), since_ms=500)
    # the last one was written before the worker started: counted, not "late"
    for written_ms, decided_ms in ((1_000, 1_300), (2_000, 92_000), (5_000, 4_000), (400, 9_000)):
        event = TaskStatusEvent(
            connect_cluster="local",
            connector="c",
            source=SourceRecord(
                topic="connect-status", partition=0, offset=0, timestamp_ms=written_ms
            ),
            task_id=0,
            state="RUNNING",
        )
        counters.event(event, decided_ms)
    labels = {"kind": "task_status"}
    value = registry.get_sample_value
    assert value("offsetd_events_total", {**labels, "topic": "connect-status"}) == 4
    assert value("offsetd_decision_latency_seconds_count", labels) == 3
    assert value("offsetd_decision_latency_seconds_sum", labels) == 0.3 + 90 + 0  # never < 0
    assert value("offsetd_decision_latency_seconds_bucket", {**labels, "le": "0.5"}) == 2
    assert value("offsetd_decision_latency_seconds_bucket", {**labels, "le": "60.0"}) == 2
    assert value("offsetd_decision_latency_seconds_bucket", {**labels, "le": "120.0"}) == 3


def test_a_dlq_record_is_counted_but_its_age_is_not_lateness() -> None:
    """Connect's DLQ reporter keeps the failing record's own timestamp: how old the data is."""
    registry = CollectorRegistry()
    counters = EventCounters(DaemonMetrics.create(registry))
    event = DlqRecordEvent(
        connect_cluster="local",
        connector="c",
        source=SourceRecord(topic="dlq", partition=0, offset=0, timestamp_ms=1_000),
        task_id=0,
        error=ErrorInfo(exception_class="org.apache.kafka.connect.errors.DataException"),
    )
    counters.event(event, 3_600_000)
    value = registry.get_sample_value
    assert value("offsetd_events_total", {"kind": "dlq_record", "topic": "dlq"}) == 1
    assert value("offsetd_decision_latency_seconds_count", {"kind": "dlq_record"}) is None
