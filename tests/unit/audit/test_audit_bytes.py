"""What AuditLog writes (a recording producer): each record's bytes are `json.dumps(record)`,
for decisions whose records share their rule's spec as for tallies and plain records."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from offsetd.audit import AuditLog
from offsetd.engine.tally import fold_suppressed, tally_record
from tests.unit.engine.test_engine_decide import MIN, Feed
from tests.unit.engine.test_engine_tally import storm_rules


class RecordingProducer:
    def __init__(self) -> None:
        self.produced: list[tuple[bytes, bytes]] = []

    def produce(self, _topic: str, *, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.produced.append((key, value))
        on_delivery(None, None)

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


def test_the_audit_writes_json_dumps_of_each_record() -> None:
    ruleset = storm_rules()
    feed = Feed(ruleset)
    firings = [d for t in range(12) for d in feed.feed(feed.dlq(t * MIN, record_offset=t % 3))]
    planned, tallies = fold_suppressed(feed.state, firings)
    assert planned
    assert tallies
    records = [d.audit_record(ruleset) for d in planned]
    updates = [tally_record(feed.state, t, 10 * MIN) for t in tallies]
    plain = {"id": "outcome-1", "outcome": "done", "detail": "né, 1e-07", "took": 1e-7}
    expected = [json.dumps(r).encode() for r in [*records, plain, *updates]]

    producer = RecordingProducer()
    log = AuditLog({"bootstrap.servers": "127.0.0.1:1"}, "audit")
    log._producer = producer  # type: ignore[assignment]
    asyncio.run(log.write_many([*records, plain], updates=updates))
    log.write_soon(updates)
    assert [value for _key, value in producer.produced] == [*expected, *expected[-len(updates) :]]
    assert [key.decode() for key, _value in producer.produced[: len(records)]] == [
        d.id for d in planned
    ]
