"""offsetd.engine.batch and .cache: one connector's batch of raw records, states kept decoded."""

from __future__ import annotations

import dataclasses
from typing import Any

from offsetd.engine import ConnectorState, decide
from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.status import decode_status
from offsetd.rules import RuleSet
from offsetd.rules.models import Rule

NOW = 1_800_000_000_000
FAILED = (
    b'{"state":"FAILED","trace":"java.lang.IllegalStateException: boom\\n\\tat x.y(Z.java:1)",'
    b'"worker_id":"w:8083","generation":3}'
)
RUNNING = b'{"state":"RUNNING","trace":null,"worker_id":"w:8083","generation":3}'


def rules() -> RuleSet:
    rule = Rule.model_validate(
        {
            "name": "failed-twice",
            "match": {"kind": "task_status", "state": "FAILED"},
            "when": {"count": 2, "within": "10m"},
            "actions": [{"type": "notify"}],
        }
    )
    return RuleSet([rule])


def record(offset: int, value: bytes | None, key: bytes = b"status-task-sink-0") -> RawRecord:
    return RawRecord("connect-status", 0, offset, NOW - 1000 + offset, key, value)


def decoder(raw: RawRecord) -> Any:
    return decode_status("west", raw)


def run(state: ConnectorState, records: list[RawRecord], **kw: Any) -> tuple[int, list[Any]]:
    return decide_batch(state, records, decoder, rules(), lambda _e: None, lambda _e: NOW, **kw)


def test_a_batch_decides_as_the_events_one_by_one() -> None:
    records = [record(1, FAILED), record(2, RUNNING), record(3, FAILED), record(4, FAILED)]
    applied, decisions = run(ConnectorState(), records)
    one, by_one = ConnectorState(), []
    for raw in records:
        one, made = decide(one, decoder(raw), rules(), None, NOW)
        by_one.extend(made)
    assert applied == 4
    assert decisions == by_one
    assert len(decisions) == 1


def test_replays_are_skipped_before_decoding() -> None:
    state = ConnectorState()
    run(state, [record(1, FAILED), record(2, FAILED)])
    seen: list[RawRecord] = []
    applied, decisions = run(
        state,
        [record(1, b"not json"), record(2, FAILED)],
        on_malformed=lambda r, _b: seen.append(r),
    )
    assert (applied, decisions, seen) == (0, [], [])


def test_malformed_records_and_failing_events_are_reported_and_skipped() -> None:
    bad: list[tuple[str, str]] = []
    errors: list[str] = []
    records = [record(1, b"{oops"), record(2, FAILED), record(3, FAILED)]

    def explode(raw: RawRecord) -> Any:
        if raw.offset == 2:
            raise RuntimeError("bug")
        return decoder(raw)

    applied, decisions = decide_batch(
        ConnectorState(),
        records,
        explode,
        rules(),
        lambda _e: None,
        lambda _e: NOW,
        on_malformed=lambda raw, exc: bad.append((raw.coordinates, exc.reason)),
        on_error=lambda raw, exc: errors.append(raw.coordinates),
    )
    # offset 1 is malformed; 2 raised in the decoder (a bug): both skipped, 3 is applied
    assert applied == 1
    assert decisions == []
    assert [where for where, _ in bad] == ["connect-status-0@1"]
    assert "not valid JSON" in bad[0][1]
    assert errors == ["connect-status-0@2"]


def test_the_cache_reuses_the_state_while_the_store_holds_its_text() -> None:
    store: dict[str, str] = {}
    cache = StateCache(store)
    state = cache.get("west/sink")
    run(state, [record(1, FAILED)])
    cache.put("west/sink", state)
    assert cache.get("west/sink") is state
    # recovery or a rebalance put another (equal) text there: parse it again
    store["west/sink"] = "".join(list(store["west/sink"]))
    again = cache.get("west/sink")
    assert again is not state
    assert again == state
    cache.forget("west/sink")
    assert cache.get("west/sink") is not again
    assert (cache.hits, cache.misses) == (1, 3)


def test_a_malformed_record_in_a_batch_does_not_stop_it() -> None:
    raw = dataclasses.replace(record(1, FAILED), key=b"status-task-sink-x")
    seen: list[Malformed] = []
    applied, _ = run(
        ConnectorState(), [raw, record(2, FAILED)], on_malformed=lambda r, b: seen.append(b)
    )
    assert applied == 1
    assert len(seen) == 1
