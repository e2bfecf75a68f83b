"""Decoding raw records from Connect's topics into events: the shared basis.

The consuming edge turns each Kafka message into a `RawRecord` (`raw_record(msg)` does it for any
confluent-kafka-like message) and hands it to the decoder for its topic, all pure functions with
no I/O and no Kafka client import:

    offsetd.events.status.decode_status    connect-status  -> Connector/Task/TopicStatusEvent
    offsetd.events.dlq.decode_dlq          a sink's DLQ    -> DlqRecordEvent
    offsetd.events.offsets.decode_offsets  connect-offsets -> SourceOffsetEvent

A record that cannot become an event raises `Malformed`, which names the record's coordinates
and a reason but never echoes a payload (at most a short, truncated `repr` prefix), so the caller
can count it, log it and move on. Formats are those Connect writes (reference/connect-offsets.md
§2.1, §2.2, §3.2); the checks mirror what Connect's own readers accept.

Speed (measured with pydantic 2.14 on CPython 3.11): status and DLQ events are not validated
again by pydantic. The decoders' own checks are stricter than the models' types and leave every
field of the exact type the model declares, so validating once more (about 2.2 us per event, its
nested SourceRecord given as a dict) only copied what was already right. `constructor(model)`
sets a checked event's fields as they are (a new object and its four slots: what
`model_construct` does with far more pure-Python work, 4 us), and `source_record` makes its
SourceRecord. Where a field comes from the caller and its type is not exactly the model's
(`source_record` returns None), the decoders validate with `build`, as before: pydantic's
coercions and errors stay what they were. tests/unit/events check both paths give equal events.
JSON goes through `raw_decode` (compact, as Connect writes it). Stack traces are searched only
in their first `TRACE_HEAD_CHARS` characters, backwards for the last `Caused by:` line
(`last_cause`). With validation, a RUNNING task status decoded in about 4.8 us, a DLQ record
with a 4 KB stack trace in about 12 us; without it, the bench's records (`bench/engine_replay.py`)
decode with about a fifth fewer instructions (valgrind).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError

from offsetd.events.models import TRACE_HEAD_CHARS, ErrorInfo, SourceRecord

__all__ = [
    "ClientHeaders",
    "Header",
    "Malformed",
    "MessageLike",
    "RawRecord",
    "excerpt",
    "parse_trace",
    "raw_record",
]

Header = tuple[str, bytes | None]
ClientHeaders = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]]
EXCERPT_CHARS = 40
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_new = object.__new__


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One Kafka record as the consumer saw it; `headers` keeps their order and duplicates."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    @property
    def coordinates(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"


# A RawRecord made by setting its slots directly (`new_raw`): what the frozen dataclass's
# `__init__` does through `object.__setattr__` per field, in about half the time (a frame's
# decode makes one per record). Its fields, checked here once: no `__post_init__` to skip.
_RAW_FIELDS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")
if tuple(f.name for f in fields(RawRecord)) != _RAW_FIELDS or hasattr(RawRecord, "__post_init__"):
    raise TypeError("RawRecord's fields changed: update new_raw")
(
    _SET_TOPIC,
    _SET_PARTITION,
    _SET_OFFSET,
    _SET_TIMESTAMP,
    _SET_KEY,
    _SET_VALUE,
    _SET_HEADERS,
) = (RawRecord.__dict__[name].__set__ for name in _RAW_FIELDS)


def new_raw(
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] = (),
) -> RawRecord:
    """`RawRecord(topic, partition, offset, timestamp_ms, key, value, headers)`, faster."""
    raw: RawRecord = _new(RawRecord)
    _SET_TOPIC(raw, topic)
    _SET_PARTITION(raw, partition)
    _SET_OFFSET(raw, offset)
    _SET_TIMESTAMP(raw, timestamp_ms)
    _SET_KEY(raw, key)
    _SET_VALUE(raw, value)
    _SET_HEADERS(raw, headers)
    return raw


class MessageLike(Protocol):
    """The parts of a confluent-kafka `Message` that `raw_record` reads."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> ClientHeaders | None: ...


def raw_record(msg: MessageLike, *, consumed: bool = False) -> RawRecord:
    """A consumed message as a `RawRecord` (no timestamp: -1, as the Java client reports it).

    `consumed`: `msg` is a message a confluent-kafka consumer returned, whose headers are
    (str, bytes | None) pairs already: taken as they are (the ingest's hot path)."""
    kind, timestamp = msg.timestamp()
    partition, offset = msg.partition(), msg.offset()
    headers: tuple[Header, ...] = ()
    given = msg.headers()
    if given and consumed and isinstance(given, list):
        headers = tuple(cast(list[Header], given))
    elif given:  # a list of (str, bytes | None), or a dict; str values are encoded
        pairs = given.items() if isinstance(given, dict) else given
        headers = tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)
    return RawRecord(  # positional: a frozen dataclass takes keywords ~1.5 us slower
        msg.topic() or "",  # topic
        -1 if partition is None else partition,  # partition
        -1 if offset is None else offset,  # offset
        timestamp if kind else -1,  # timestamp_ms
        msg.key(),
        msg.value(),
        headers,
    )


class Malformed(ValueError):
    """A record that cannot be decoded into an event: why, and where it is (never its payload)."""

    def __init__(self, reason: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"{topic}-{partition}@{offset}: {reason}")
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset

    @property
    def coordinates(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"

    def __reduce__(self) -> tuple[type[Malformed], tuple[str, str, int, int]]:
        return Malformed, (self.reason, self.topic, self.partition, self.offset)


def excerpt(data: bytes | str) -> str:
    """A short, repr-safe prefix of untrusted data for error messages."""
    cut = data[:EXCERPT_CHARS]
    return repr(cut) + ("..." if len(data) > EXCERPT_CHARS else "")


# ---------------------------------------------------------------------------------------------
# Helpers shared by the decoders (status.py, dlq.py, offsets.py); not part of the public API.


def malformed(raw: RawRecord, reason: str) -> Malformed:
    return Malformed(reason, raw.topic, raw.partition, raw.offset)


def utf8(raw: RawRecord, data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(raw, f"{what} is not valid UTF-8 (byte {exc.start})") from None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


_JSON = json.JSONDecoder(parse_constant=_reject_constant)


def json_value(raw: RawRecord, data: bytes, what: str) -> object:
    """Strict JSON from UTF-8 bytes (Connect's JsonConverter never writes NaN or Infinity).

    `raw_decode` first: Connect writes compact JSON, and this skips the two whitespace regex
    runs of `decode` (0.7 us instead of 1.5 us for a status value); `decode` handles the rest.
    """
    text = utf8(raw, data, what)
    try:
        try:
            value, end = _JSON.raw_decode(text)
        except json.JSONDecodeError:  # leading whitespace, or a real error to report
            value, end = _JSON.decode(text), len(text)
        if end != len(text) and text[end:].strip(" \t\n\r"):
            _JSON.decode(text)  # raises "Extra data"
        return value
    except json.JSONDecodeError as exc:
        raise malformed(raw, f"{what} is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, huge integers, deep nesting
        reason = str(exc)[:80] or type(exc).__name__
        raise malformed(raw, f"{what} is not valid JSON ({reason})") from None


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "an integer"}
_JSON_TYPES |= {float: "a number", bool: "a boolean", type(None): "null"}


def json_type(value: object) -> str:
    """What a decoded JSON value is, in JSON's words ("an array", "null", ...)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def number(text: str | None, maximum: int) -> int | None:
    """A non-negative decimal as Java's `String.valueOf` writes it, else None (bounded work)."""
    if text and len(text) <= 19 and text.isascii() and text.isdigit():
        value = int(text)
        if value <= maximum:
            return value
    return None


def digits(raw: RawRecord, text: str, what: str, maximum: int) -> int:
    value = number(text, maximum)
    if value is None:
        raise malformed(raw, f"{what} is not a number in 0..{maximum}: {excerpt(text)}")
    return value


_M = TypeVar("_M", bound=BaseModel)


def build(raw: RawRecord, model: type[_M], data: dict[str, object]) -> _M:
    """Validate `data` (nested models as dicts) into `model` in one pydantic-core call.

    Our own checks come first, so a ValidationError here is only a safety net.
    """
    try:
        event: _M = model.__pydantic_validator__.validate_python(data)
    except ValidationError as exc:  # say where and what kind, never the input
        where = ", ".join(
            f"{'.'.join(str(part)[:40] for part in e['loc'])} ({e['type']})"
            for e in exc.errors()[:3]
        )
        raise malformed(raw, f"invalid {model.__name__}: {where}") from None
    return event


def source_of(raw: RawRecord) -> dict[str, object]:
    """The event's `source` (a SourceRecord), as fields for `build`."""
    return {
        "topic": raw.topic,
        "partition": raw.partition,
        "offset": raw.offset,
        "timestamp_ms": raw.timestamp_ms,
    }


# A model instance is four slots (BaseModel's `__slots__`): its fields in `__dict__`, the names
# given, the extra fields and the private attributes (None for our frozen, extra="forbid" models
# without private attributes); what pydantic-core and `model_construct` set, set directly.
_SET_DICT = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


def constructor(model: type[_M]) -> Callable[[dict[str, object], set[str]], _M]:
    """`make(values, given)`: a `model` of checked fields, without validating them again.

    `values` holds every field, in the model's field order, each of the exact type (and nested
    model) validation would have made of it: it becomes the instance's `__dict__` as it is (a
    new dict per call). `given` is its `model_fields_set` (the names a validated input would have
    held; a new set per call). The result equals what `model.model_validate` makes of the same
    fields (==, JSON, fields set; frozen and hashable alike): tests/unit/events check it.

    Only for models that validation would give nothing more: no extra fields kept, no private
    attributes, no `model_post_init`, no validators of their own (checked here, once).
    """
    if (
        model.model_config.get("extra") != "forbid"
        or model.__private_attributes__
        or model.__pydantic_post_init__ is not None
        or any(
            getattr(model.__pydantic_decorators__, kind)
            for kind in ("validators", "field_validators", "root_validators", "model_validators")
        )
    ):
        raise TypeError(f"{model.__name__} cannot be constructed without validation")

    def make(values: dict[str, object], given: set[str]) -> _M:
        instance: _M = _new(model)
        _SET_DICT(instance, values)
        _SET_FIELDS_SET(instance, given)
        _SET_EXTRA(instance, None)
        _SET_PRIVATE(instance, None)
        return instance

    make.__qualname__ = f"constructor({model.__name__})"
    return make


_make_source = constructor(SourceRecord)


def source_record(raw: RawRecord) -> SourceRecord | None:
    """The event's `source`, made from the record's coordinates without validation; None when
    one of them is not exactly a str or an int (the caller validates with `build` then)."""
    topic, partition, offset, timestamp_ms = raw.topic, raw.partition, raw.offset, raw.timestamp_ms
    if type(topic) is not str or not type(partition) is type(offset) is type(timestamp_ms) is int:
        return None
    return _make_source(
        {"topic": topic, "partition": partition, "offset": offset, "timestamp_ms": timestamp_ms},
        {"topic", "partition", "offset", "timestamp_ms"},
    )


# ---------------------------------------------------------------------------------------------
# Stack traces


_CAUSE = re.compile(r"Caused by: ([\w.$]+)(?::[^\S\n]*(.*))?\r?$", re.MULTILINE)
_FIRST = re.compile(r"([\w.$]+)(?::\s*(.*))?")


def first_line(head: str) -> tuple[str | None, str | None]:
    """The outermost exception's class and message (a trace's first line)."""
    line = head.partition("\n")[0]
    lines = line.splitlines()  # the same first line as head.splitlines()[0], far cheaper
    match = _FIRST.fullmatch(lines[0].strip()) if lines else None
    return (match.group(1), match.group(2) or None) if match else (None, None)


def last_cause(head: str) -> tuple[str, str | None] | None:
    """The class and message of the last well-formed `Caused by:` line, searched backwards."""
    end = len(head)
    while True:
        at = head.rfind("\nCaused by: ", 0, end)
        match = _CAUSE.match(head, at + 1)  # at == -1: the head itself may start with one
        if match:
            return match.group(1), (match.group(2) or "").rstrip("\r") or None
        if at < 0:
            return None
        end = at


def trace_fields(trace: str) -> dict[str, object]:
    """`ErrorInfo` fields from a non-empty trace, as `parse_trace` finds them."""
    head = trace[:TRACE_HEAD_CHARS]
    first_class, first_message = first_line(head)
    cause = last_cause(head)
    return {
        "exception_class": first_class,
        "message": first_message,
        "root_cause_class": cause[0] if cause else first_class,
        "root_cause_message": cause[1] if cause else first_message,
        "trace_head": head,
    }


def parse_trace(trace: str | None) -> ErrorInfo | None:
    """Exception and root cause from a Java stack trace, reading only its bounded head.

    The same result as `models.error_from_trace` for what Java's `printStackTrace` writes, about
    six times faster, and without one slip of its regex: a cause printed with an empty message
    (`Caused by: x.Y: `) does not take the next line (`\\tat ...`) as its message.
    """
    return ErrorInfo.model_validate(trace_fields(trace)) if trace else None
