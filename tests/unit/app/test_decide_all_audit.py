"""FrameDecider.decide_all writes a frame's planned decisions until the audit takes them, and
only then counts the frame's decisions (`offsetd_decisions_total`) and hands them on: a frame
given up would lose its decisions for good (a FAILED task sends no new status). Pure logic: a
scripted audit, a fresh registry, no pauses; the daemon's wiring is not needed for this method.
The real broker refusing the writes is `tests/integration/test_audit_outage.py`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import islice, repeat
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from offsetd.app.decider import FrameDecider
from offsetd.audit import AuditError
from offsetd.errors import KafkaAccessDenied
from offsetd.metrics.instruments import DaemonMetrics
from tests.unit.engine.test_engine_decide import SEC, Feed
from tests.unit.engine.test_engine_tally import WINDOW, storm_rules


class Audit:
    """`write_many` raises the errors of `refusals` in turn, then acknowledges each record."""

    def __init__(self, *refusals: Exception) -> None:
        self.refusals = list(refusals)
        self.tries = 0
        self.planned: list[dict[str, Any]] = []

    async def write_many(
        self, records: list[dict[str, Any]], updates: list[dict[str, Any]]
    ) -> list[bool]:
        self.tries += 1
        if self.refusals:
            raise self.refusals.pop(0)
        self.planned += records
        return [True] * len(records)

    def write_soon(self, updates: list[dict[str, Any]]) -> None:
        pass


class Remediator:
    def __init__(self, audit: Audit) -> None:
        self.audit = audit
        self.submitted: list[tuple[str, int]] = []  # (decision id, audit writes seen then)

    def submit(self, decision: Any) -> None:
        self.submitted.append((decision.id, len(self.audit.planned)))

    def note_suppressed(self, _decisions: list[Any]) -> None:
        pass


def counted(registry: CollectorRegistry) -> dict[str, float]:
    return {
        sample.labels["outcome"]: sample.value
        for metric in registry.collect()
        if metric.name == "offsetd_decisions"
        for sample in metric.samples
        if sample.name == "offsetd_decisions_total"
    }


def storm_frame() -> tuple[Feed, list[Any]]:
    feed = Feed(storm_rules())
    decisions = []
    for t in (0, 1 * SEC, 2 * SEC):  # one skip planned, two held back by its cooldown
        decisions += feed.feed(feed.dlq(t, record_offset=t))
    return feed, decisions


def owner_of(feed: Feed, audit: Audit, registry: CollectorRegistry, pauses: list[float]) -> Any:
    def delays() -> Iterator[float]:
        for delay in islice(FrameDecider.audit_retry_delays(), 100):
            pauses.append(delay)  # what the daemon would wait; the test does not
            yield 0.0

    return SimpleNamespace(
        wiring=SimpleNamespace(
            metrics=DaemonMetrics.create(registry),
            settings=SimpleNamespace(daemon=SimpleNamespace(suppressed_window=WINDOW)),
            audit=audit,
            rules=feed.rules,
            remediator=Remediator(audit),
        ),
        audit_retry_delays=delays,
    )


def test_planned_decisions_are_written_until_the_audit_takes_them() -> None:
    feed, decisions = storm_frame()
    refused = AuditError("decision x was not acknowledged by the audit topic a: timed out")
    denied = KafkaAccessDenied("not authorized: User:offsetd may not WRITE topic a")
    audit = Audit(refused, denied, refused)
    registry = CollectorRegistry()
    pauses: list[float] = []
    owner = owner_of(feed, audit, registry, pauses)

    asyncio.run(FrameDecider.decide_all(owner, feed.state, decisions))

    assert audit.tries == 4
    assert pauses == [1.0, 2.0, 4.0]  # doubling, up to 30 s, then every 30 s
    assert [record["rule"] for record in audit.planned] == ["skip"]
    [planned] = [d for d in decisions if d.outcome == "planned"]
    # handed on once, after its record was written
    assert owner.wiring.remediator.submitted == [(planned.id, 1)]
    assert counted(registry) == {"planned": 1.0, "suppressed_cooldown": 2.0}
    assert registry.get_sample_value("offsetd_audit_refusals_total") == 3


def test_nothing_is_counted_or_handed_on_before_the_audit_took_it() -> None:
    feed, decisions = storm_frame()
    audit = Audit(*repeat(AuditError("timed out"), 200))
    registry = CollectorRegistry()
    owner = owner_of(feed, audit, registry, [])

    with pytest.raises(AuditError):  # (the daemon's delays never end; these do)
        asyncio.run(FrameDecider.decide_all(owner, feed.state, decisions))
    assert audit.tries == 101
    assert counted(registry) == {}
    assert owner.wiring.remediator.submitted == []


def test_a_bug_is_not_retried() -> None:
    feed, decisions = storm_frame()
    audit = Audit(ValueError("not JSON serializable"))
    owner = owner_of(feed, audit, CollectorRegistry(), [])
    with pytest.raises(ValueError, match="serializable"):
        asyncio.run(FrameDecider.decide_all(owner, feed.state, decisions))
    assert audit.tries == 1


def test_the_delays_settle_at_thirty_seconds_and_never_end() -> None:
    delays = list(islice(FrameDecider.audit_retry_delays(), 12))
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0] + [30.0] * 7
