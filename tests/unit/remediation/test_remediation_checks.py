"""Rule-supplied record checks: what counts as a poison record, decided on bytes alone."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from offsetd.events.models import RecordRef
from offsetd.recordchecks import (
    KafkaRecord,
    KeyMatches,
    NotJson,
    RecordCheck,
    TooLarge,
    ValueMatches,
    describe,
    fails,
)
from offsetd.remediation.locate import NotLocated, pick_partition

CHECK: TypeAdapter[NotJson | ValueMatches | KeyMatches | TooLarge] = TypeAdapter(RecordCheck)


def record(value: bytes | None, key: bytes | None = b"k") -> KafkaRecord:
    return KafkaRecord(topic="t", partition=0, offset=7, key=key, value=value)


@pytest.mark.parametrize(
    ("value", "poison"),
    [
        (b'{"n": 1}', False),
        (b"[1, 2]", False),
        (b" 42 ", False),
        (b'"text"', False),
        (None, False),  # JsonConverter makes a null record of it, no error
        (b"not json{", True),
        (b"", True),
        (b"NaN", True),  # Python would accept it, Jackson does not
        (b'{"n": Infinity}', True),
        (b"\xff\xfe\x00", True),
    ],
)
def test_not_json(value: bytes | None, poison: bool) -> None:
    assert fails(NotJson(kind="not_json"), record(value)) is poison


def test_regex_checks_search_the_text_and_never_match_null() -> None:
    value = ValueMatches(kind="value_matches", pattern=r"\bcorrupt\b")
    assert fails(value, record(b"a corrupt payload"))
    assert not fails(value, record(b"incorrupted"))
    assert not fails(value, record(None))
    key = KeyMatches(kind="key_matches", pattern="^bad-")
    assert fails(key, record(b"{}", key=b"bad-42"))
    assert not fails(key, record(b"{}", key=None))
    assert fails(ValueMatches(kind="value_matches", pattern="\ufffd"), record(b"\xff"))


def test_too_large_counts_value_bytes() -> None:
    check = TooLarge(kind="too_large", max_bytes=3)
    assert not fails(check, record(b"abc"))
    assert fails(check, record(b"abcd"))
    assert not fails(check, record(None))


def test_checks_are_data_validated_strictly() -> None:
    assert CHECK.validate_python({"kind": "not_json"}) == NotJson(kind="not_json")
    parsed = CHECK.validate_python({"kind": "too_large", "max_bytes": 10})
    assert describe(parsed) == "the value is larger than 10 bytes"
    with pytest.raises(ValidationError, match="invalid regex: missing \\)"):
        CHECK.validate_python({"kind": "value_matches", "pattern": "(unclosed"})
    with pytest.raises(ValidationError):
        CHECK.validate_python({"kind": "value_matches", "pattern": "x", "code": "print()"})
    with pytest.raises(ValidationError):
        CHECK.validate_python({"kind": "python", "expr": "True"})
    with pytest.raises(ValidationError):
        CHECK.validate_python({"kind": "too_large", "max_bytes": -1})


def test_pick_partition_rules_out_only_partitions_committed_to_their_end() -> None:
    marks = {("t", 0): (0, 10), ("t", 1): (0, 5)}
    assert pick_partition({("t", 0): 4, ("t", 1): 5}, marks) == (
        RecordRef(topic="t", partition=0, offset=4),
        4,
    )
    ambiguous = pick_partition({("t", 0): 4, ("t", 1): 3}, marks)
    assert isinstance(ambiguous, NotLocated)
    assert ambiguous.reason == "ambiguous_partition"
    unknown = pick_partition({("t", 0): 10}, marks)  # t-1 has records, no position
    assert isinstance(unknown, NotLocated)
    assert unknown.reason == "no_committed_offset"
    done = pick_partition({("t", 0): 10, ("t", 1): 5}, marks)
    assert isinstance(done, NotLocated)
    assert done.reason == "no_pending_record"
