"""The compiled path's events are Python's, field for field (native/src/event.rs).

An event's JSON as Python writes it (`model_dump_json()`) is read into the compiled event and
written back: the same text, on random status and DLQ records (texts of any Unicode, control
characters, empty and missing fields) and on the recorded fixtures. If a field's name, order,
type or escaping differed, the text would.
"""

from __future__ import annotations

from typing import Any

import offsetd_native
import pytest
from hypothesis import HealthCheck, given, settings

from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.dlq import decode_dlq
from offsetd.events.status import decode_status
from tests.unit.events.test_events_construct import TEXT, dlq_records, status_records
from tests.unit.events.test_events_decode import FIXTURES, fixture


def roundtrips(event: Any) -> None:
    text = event.model_dump_json()
    generation = getattr(event, "generation", None)
    if generation is not None and not -(2**63) <= generation < 2**63:
        # Connect writes a Java int; Python takes any integer. The compiled event holds an i64
        # and refuses more: the owner leaves such a record to the Python decoder.
        with pytest.raises(ValueError, match="expected i64"):
            offsetd_native.event_roundtrip(text)
        return
    assert offsetd_native.event_roundtrip(text) == text


@given(cluster=TEXT, raw=status_records())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_status_events_roundtrip(cluster: str, raw: RawRecord) -> None:
    try:
        event = decode_status(cluster, raw)
    except Malformed:
        return
    roundtrips(event)


@given(cluster=TEXT, raw=dlq_records())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_dlq_events_roundtrip(cluster: str, raw: RawRecord) -> None:
    try:
        event = decode_dlq(cluster, raw, connector="owner")
    except Malformed:
        return
    roundtrips(event)


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in FIXTURES.glob("*.json") if p.stem.startswith(("status", "dlq")))
)
def test_recorded_fixtures_roundtrip(name: str) -> None:
    raw = fixture(name)
    if name.startswith("dlq"):
        roundtrips(decode_dlq("local", raw, connector="owner"))
    else:
        roundtrips(decode_status("local", raw))


def test_a_kind_it_does_not_hold_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match='not a kind the compiled path decodes: "progress"'):
        offsetd_native.event_roundtrip('{"kind": "progress"}')
