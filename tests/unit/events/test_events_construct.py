"""Status and DLQ events made without validation equal the validated ones, exactly.

`decode_status` and `decode_dlq` make their events of the checked fields (`constructor`);
`_validated_status` and `_validated_dlq` make them as before, with pydantic validating every
field. On random valid records, on the first decode (memos empty) and the next (memos warm),
both must give the same event: equal, the same JSON and repr, the same field values of the
same types in the same order, the same `model_fields_set`, the nested models alike, frozen and
hashable alike. On random invalid records, the same `Malformed`.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from offsetd.events import dlq, status
from offsetd.events.decode import (
    INT32_MAX,
    INT64_MAX,
    Malformed,
    RawRecord,
    constructor,
    new_raw,
    source_of,
    source_record,
)
from offsetd.events.dlq import DLQ_HEADER_PREFIX, decode_dlq
from offsetd.events.models import ErrorInfo, SourceRecord
from offsetd.events.status import STATUS_STATES, decode_status
from tests.unit.events.test_events_decode import (
    HEADERS,
    JSON_VALUES,
    KEY_PREFIXES,
    OPTIONAL_BYTES,
    fixture,
)


def assert_same(made: Any, validated: Any) -> None:
    """`made` is `validated` in every way a reader of the event could tell."""
    assert type(made) is type(validated)
    if made is validated:  # one ErrorInfo shared by the memos
        return
    if isinstance(validated, BaseModel):
        assert made == validated
        assert made.model_dump_json() == validated.model_dump_json()
        assert repr(made) == repr(validated)
        assert type(made.model_fields_set) is set
        assert made.model_fields_set == validated.model_fields_set
        assert made.model_fields_set is not validated.model_fields_set
        assert made.__pydantic_extra__ == validated.__pydantic_extra__
        assert made.__pydantic_private__ == validated.__pydantic_private__
        assert list(made.__dict__) == list(validated.__dict__)  # field order
        for name, value in validated.__dict__.items():
            assert_same(made.__dict__[name], value)
        assert pickle.loads(pickle.dumps(made)) == validated  # noqa: S301 - our own object
        try:
            expected_hash: int | None = hash(validated)
        except TypeError:  # a DLQ event holds its headers' dict
            expected_hash = None
        if expected_hash is None:
            with pytest.raises(TypeError):
                hash(made)
        else:
            assert hash(made) == expected_hash
        name = next(iter(type(validated).model_fields))
        with pytest.raises(ValidationError, match="frozen"):
            setattr(made, name, getattr(made, name))
    elif isinstance(validated, dict):
        assert list(made) == list(validated)
        for key, value in validated.items():
            assert_same(made[key], value)
    elif isinstance(validated, tuple | list):
        assert len(made) == len(validated)
        for one, other in zip(made, validated, strict=True):
            assert_same(one, other)
    else:
        assert made == validated


def forget() -> None:
    """Empty the decoders' memos: the next decode reads and checks everything again."""
    status._HEADS.clear()
    status._FIELDS_MEMO.clear()
    status._ERRORS.clear()
    dlq._ERRORS.clear()


def outcome(decode: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return decode(*args, **kwargs)
    except Malformed as exc:
        return ("Malformed", str(exc), exc.reason, exc.coordinates)


def assert_both_paths_agree(decode: Any, validated: Any, *args: Any, **kwargs: Any) -> None:
    """Cold and warm memos alike; the validated path decodes the same record in between."""
    forget()
    first = outcome(decode, *args, **kwargs)
    reference = outcome(validated, *args, **kwargs)
    again = outcome(decode, *args, **kwargs)
    assert_same(first, reference)
    assert_same(again, reference)
    if isinstance(reference, BaseModel):  # one ErrorInfo per error, whichever path made it
        error = getattr(reference, "error", None)
        assert getattr(first, "error", None) is getattr(again, "error", None) is error


# -- random valid records ----------------------------------------------------------------------

NAMES = st.text(min_size=1, max_size=30) | st.sampled_from(
    ["a", "my-sink-2", "east->west.MirrorSourceConnector", "x:connector-y", "é-ü", "a--"]
)
TEXT = st.text(max_size=40)
COORDINATES = st.tuples(
    st.text(max_size=20),  # topic
    st.integers(-1, INT32_MAX),  # partition
    st.integers(-1, INT64_MAX),  # offset
    st.integers(-(2**63), 2**63 - 1),  # timestamp
)
TRACES = (
    st.none()
    | TEXT
    | st.builds(
        lambda cls, msg, cause, tail: f"{cls}: {msg}\n\tat a.B(B.java:1)\nCaused by: {cause}{tail}",
        st.sampled_from(["org.apache.kafka.connect.errors.ConnectException", "x.Y", "bad line"]),
        TEXT,
        st.sampled_from(["java.io.IOException: gone", "x.Z:", "x.Z: ", "not a cause"]),
        st.sampled_from(["", "\n", "\r\n\tat c.D(D.java:2)\n", "x" * 5000]),
    )
)


@st.composite
def status_records(draw: st.DrawFn) -> RawRecord:
    name = draw(NAMES)
    kind = draw(st.sampled_from(["connector", "task"]))
    key = f"status-connector-{name}"
    if kind == "task":
        key = f"status-task-{name}-{draw(st.integers(0, INT32_MAX))}"
    value: bytes | None = None
    if draw(st.integers(0, 9)):  # one in ten a tombstone
        fields: dict[str, Any] = {
            "state": draw(st.sampled_from(sorted(STATUS_STATES))),
            "generation": draw(st.integers(-(2**70), 2**70)),
        }
        for name, strategy in (("trace", TRACES), ("worker_id", st.none() | TEXT)):
            choice = draw(st.integers(0, 2))  # absent, null or drawn
            if choice:
                fields[name] = draw(strategy) if choice == 2 else None
        if draw(st.booleans()):
            fields["version"] = draw(st.sampled_from(["4.2.0", "x" * 600]))  # long: not memoized
        order = draw(st.permutations(list(fields)))
        value = json.dumps({name: fields[name] for name in order}, separators=(",", ":")).encode()
    topic, partition, offset, timestamp = draw(COORDINATES)
    return RawRecord(topic, partition, offset, timestamp, key.encode(), value)


@given(cluster=TEXT, raw=status_records())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_status_events_equal_the_validated_ones(cluster: str, raw: RawRecord) -> None:
    assert_both_paths_agree(decode_status, status._validated_status, cluster, raw)
    assert isinstance(decode_status(cluster, raw), BaseModel)  # valid: an event


DLQ_NAMES = (
    "topic",
    "partition",
    "offset",
    "connector.name",
    "task.id",
    "stage",
    "class.name",
    "exception.class.name",
    "exception.message",
    "exception.stacktrace",
)
HEADER_VALUES: dict[str, st.SearchStrategy[str | None]] = {
    "partition": st.sampled_from(["0", "7", str(INT32_MAX), str(INT32_MAX + 1), "-1", "x", ""]),
    "offset": st.sampled_from(["0", "1041", str(INT64_MAX), str(INT64_MAX + 1), "1e3", ""]),
    "connector.name": NAMES,
    "task.id": st.integers(0, INT32_MAX).map(str),
    "exception.stacktrace": TRACES,
}


@st.composite
def dlq_records(draw: st.DrawFn) -> RawRecord:
    headers: list[tuple[str, bytes | None]] = []
    for name in draw(st.lists(st.sampled_from(DLQ_NAMES), max_size=14)):  # repeats: last wins
        value = draw(st.none() | HEADER_VALUES.get(name, TEXT))
        headers.append((DLQ_HEADER_PREFIX + name, None if value is None else value.encode()))
    headers += draw(st.lists(st.tuples(TEXT, OPTIONAL_BYTES), max_size=2))  # not context
    topic, partition, offset, timestamp = draw(COORDINATES)
    return RawRecord(topic, partition, offset, timestamp, b"k", b"v", tuple(headers))


@given(cluster=TEXT, raw=dlq_records(), connector=st.none() | NAMES)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_dlq_events_equal_the_validated_ones(
    cluster: str, raw: RawRecord, connector: str | None
) -> None:
    assert_both_paths_agree(decode_dlq, dlq._validated_dlq, cluster, raw, connector=connector)


@pytest.mark.parametrize(
    "name",
    [
        "status_connector_running",
        "status_connector_stopped",
        "status_connector_tombstone",
        "status_task_failed",
        "status_task_running",
        "status_task_tombstone",
        "status_topic",
        "status_topic_tombstone",
        "dlq_with_context",
        "dlq_without_context",
    ],
)
def test_real_records_decode_as_validated(name: str) -> None:
    if name.startswith("status"):
        assert_both_paths_agree(decode_status, status._validated_status, "local", fixture(name))
    else:
        raw = fixture(name)
        assert_both_paths_agree(decode_dlq, dlq._validated_dlq, "local", raw, connector="o")


# -- random invalid records: the same Malformed ------------------------------------------------


@given(key=OPTIONAL_BYTES, value=OPTIONAL_BYTES, headers=HEADERS, prefix=KEY_PREFIXES)
@settings(max_examples=300, deadline=None)
def test_random_bytes_fail_alike(
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    prefix: bytes,
) -> None:
    raw = RawRecord("t", 0, 1, 2, None if key is None else prefix + key, value, headers)
    assert_both_paths_agree(decode_status, status._validated_status, "c", raw)
    assert_both_paths_agree(decode_dlq, dlq._validated_dlq, "c", raw)


@given(
    key=st.sampled_from(["status-connector-c", "status-task-c-1", "status-topic-t:connector-c"]),
    value=JSON_VALUES,
)
@settings(max_examples=300, deadline=None)
def test_random_json_shapes_fail_alike(key: str, value: Any) -> None:
    raw = RawRecord("t", 0, 1, 2, key.encode(), json.dumps(value).encode())
    assert_both_paths_agree(decode_status, status._validated_status, "c", raw)


# -- what is not exactly a str or an int is validated, as before -------------------------------


class Text(str):
    pass


@pytest.mark.parametrize(
    ("cluster", "coordinates", "connector"),
    [
        ("c", ("t", True, 1, 2), None),  # pydantic makes 1 of True
        ("c", ("t", 0, 1.0, 2), None),  # and 1 of 1.0
        ("c", ("t", 0, 1, "2"), None),  # and 2 of "2"
        ("c", (Text("t"), 0, 1, 2), None),
        (Text("c"), ("t", 0, 1, 2), None),
        ("c", ("t", 0, 1, 2), Text("owner")),  # a DLQ's owner from the caller
        ("c", ("t", 0, 1, "x"), None),  # Malformed, by pydantic
        (7, ("t", 0, 1, 2), None),
    ],
)
def test_coordinates_of_other_types_are_validated(
    cluster: Any, coordinates: tuple[Any, Any, Any, Any], connector: Any
) -> None:
    task = RawRecord(*coordinates, b"status-task-a-0", b'{"state":"RUNNING","generation":1}')
    assert source_record(task) is None or type(cluster) is not str or connector is not None
    assert_both_paths_agree(decode_status, status._validated_status, cluster, task)
    dead = RawRecord(*coordinates, None, None, ((DLQ_HEADER_PREFIX + "task.id", b"1"),))
    assert_both_paths_agree(decode_dlq, dlq._validated_dlq, cluster, dead, connector=connector)
    if coordinates[3] == "x":
        with pytest.raises(Malformed, match=r"invalid TaskStatusEvent: source.timestamp_ms"):
            decode_status(cluster, task)
    elif type(cluster) is str:
        event = decode_status(cluster, task)
        assert tuple(map(type, event.source.__dict__.values())) == (str, int, int, int)


def test_source_record_is_a_validated_source_record() -> None:
    raw = RawRecord("t", 3, 42, 1_700_000_000_000, None, None)
    made = source_record(raw)
    assert made is not None
    assert_same(made, SourceRecord.model_validate(source_of(raw)))
    assert made.coordinates == raw.coordinates


def test_constructor_refuses_models_validation_would_change() -> None:
    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int

    class Checked(BaseModel):
        model_config = ConfigDict(extra="forbid")
        a: int

        @field_validator("a")
        @classmethod
        def positive(cls, value: int) -> int:
            return abs(value)

    class Private(BaseModel):
        model_config = ConfigDict(extra="forbid")
        a: int
        _seen: int = 0

    for model in (Extra, Checked, Private):
        with pytest.raises(TypeError, match="cannot be constructed without validation"):
            constructor(model)
    made = constructor(ErrorInfo)(
        dict(ErrorInfo(message="m", trace_head="t").__dict__), {"message", "trace_head"}
    )
    assert_same(made, ErrorInfo(message="m", trace_head="t"))


# -- new_raw: a RawRecord as its constructor makes it ------------------------------------------


@given(
    fields=st.tuples(
        st.text(max_size=10),
        st.integers(-1, INT32_MAX),
        st.integers(-1, INT64_MAX),
        st.integers(-1, INT64_MAX),
        OPTIONAL_BYTES,
        OPTIONAL_BYTES,
    ),
    headers=st.none() | HEADERS,
)
def test_new_raw_is_the_dataclass_made_by_its_constructor(
    fields: tuple[str, int, int, int, bytes | None, bytes | None],
    headers: tuple[tuple[str, bytes | None], ...] | None,
) -> None:
    made = new_raw(*fields) if headers is None else new_raw(*fields, headers)
    built = RawRecord(*fields) if headers is None else RawRecord(*fields, headers)
    assert type(made) is RawRecord
    assert made == built
    assert dataclasses.astuple(made) == dataclasses.astuple(built)
    assert (repr(made), hash(made)) == (repr(built), hash(built))
    assert made.coordinates == built.coordinates
    assert pickle.loads(pickle.dumps(made)) == built  # noqa: S301 - our own object
    assert dataclasses.replace(made, offset=7) == dataclasses.replace(built, offset=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.offset = 1  # type: ignore[misc]
