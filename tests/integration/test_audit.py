"""The audit log on the real stack: batched writes keep order, write each id once, survive."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from offsetd.audit import AuditLog, read_records


def _record(decision_id: str, n: int) -> dict[str, Any]:
    return {"id": decision_id, "decided_at_ms": n, "rule": "r", "outcome": "dry_run", "n": n}


def test_write_many_orders_dedupes_and_remembers(west: str) -> None:
    topic = f"offsetd.audit.test-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": west}
    log = AuditLog(conf, topic)
    log.start()
    ids = [f"d{i}" for i in range(50)]
    records = [_record(i, n) for n, i in enumerate(ids)]
    # a duplicate inside the batch and one already written before
    first = asyncio.run(log.write_many(records[:10]))
    assert first == [True] * 10
    flags = asyncio.run(log.write_many([*records[5:], records[20]]))
    assert flags == [False] * 5 + [True] * 40 + [False]
    assert asyncio.run(log.write(records[0])) is False
    log.close()

    stored = read_records(conf, topic)
    assert [r["id"] for r in stored] == ids  # each once, in decision order

    again = AuditLog(conf, topic)
    again.start()  # a restarted daemon knows every id already written
    assert all(again.seen(i) for i in ids)
    assert asyncio.run(again.write_many([records[3], _record("d-new", 99)])) == [False, True]
    again.close()
    assert [r["id"] for r in read_records(conf, topic)] == [*ids, "d-new"]


def test_tallies_written_without_a_wait_arrive_as_their_latest_version(west: str) -> None:
    topic = f"offsetd.audit.test-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": west}
    log = AuditLog(conf, topic)
    log.start()
    for count in range(1, 201):  # a storm's frames: one version per frame, none awaited
        log.write_soon([{**_record("tally-a", count), "count": count}])
        if count % 50 == 0:
            log.write_soon([{**_record("tally-b", count), "count": count}])
    assert asyncio.run(log.write_many([_record("planned-1", 300)])) == [True]
    assert log.unconfirmed == 0  # the awaited write's flush took the tallies with it
    log.close()
    stored = {r["id"]: r for r in read_records(conf, topic)}
    assert stored["tally-a"]["count"] == 200
    assert stored["tally-b"]["count"] == 200
    assert set(stored) == {"tally-a", "tally-b", "planned-1"}
