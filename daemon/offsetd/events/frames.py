"""Routing raw records to their owner, and framing a batch of them into one internal record.

The daemon's re-keying hop (Connect's topics -> `<app_id>-events`, keyed by
`<connect-cluster>/<connector>`) carries *raw* records, grouped: the ingest reads a batch, finds
each record's owner key with `route_*` (the key, or one header: no JSON value is parsed, no
event is built) and sends one `encode_frame` per owner key; the decide side `decode_frame`s it
and runs the real decoders. Why not events:

- the work per record on the ingest side stays a few microseconds (decode once, on the owner);
- one internal record holds every event of a batch for one connector, so the consumer of the
  internal topic (faust) handles tens of events per message instead of one;
- the decoders stay the single place where records are judged: a record the router can place
  but the decoder rejects is counted as malformed on the decide side, with its coordinates.

A DLQ record is framed with its `__connect.errors.*` headers only (the decoder reads nothing
else: the failing record's payload is not ours to copy around), and its stack trace header with
its first `TRACE_HEAD_CHARS` characters only: all the decoder reads of it (`trace_head`). Connect's
traces run to 8 KB and more; in a DLQ storm they were most of the bytes the daemon moved.

Format (version 1, big-endian): `b"\\x01"`, u16 topic count, then each topic (u16 length, UTF-8),
then per record: u16 topic index, i32 partition, i64 offset, i64 timestamp, i32 key length,
i32 value length (-1: null), u16 header count, the key, the value, then each header (u16 name
length, i32 value length or -1, name, value). Pure: no I/O.

A *nudge* shares the topic and the key: `b"\\x02"` then a JSON object. It carries no record, only
news for the connector's owner that it must apply itself, in order with the connector's events
(one writer of the state): `{"type": "outcome", ...}` (the executor's outcome of a planned
decision, see `offsetd.engine.later`) and `{"type": "metadata"}` (the connector's metadata is
known now: decide its deferred events).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from offsetd.events.decode import Malformed, RawRecord, excerpt, malformed, new_raw, utf8
from offsetd.events.dlq import DLQ_HEADER_PREFIX, H_STACKTRACE
from offsetd.events.models import TRACE_HEAD_CHARS, owner_key

__all__ = [
    "FRAME_VERSION",
    "FramePlan",
    "Router",
    "decode_frame",
    "decode_nudge",
    "encode_frame",
    "encode_nudge",
    "frame_head_size",
    "framed_size",
    "plan_frames",
    "route_dlq",
    "route_offsets",
    "route_status",
    "route_status_or_dlq",
]

FRAME_VERSION = 1
NUDGE_VERSION = 2
_VERSION = bytes([FRAME_VERSION])
_NUDGE = bytes([NUDGE_VERSION])
_RECORD = struct.Struct(">HiqqiiH")  # the topic index, then `_REST`
_REST = struct.Struct(">iqqiiH")
_U16 = struct.Struct(">H")
_HEADER = struct.Struct(">Hi")
_H_CONNECTOR = DLQ_HEADER_PREFIX + "connector.name"
# Header names as bytes, and back: a handful of names repeat on every record.
_NAME_BYTES: dict[str, bytes] = {}
_NAME_TEXT: dict[bytes, str] = {}
_MAX_NAMES = 4096

Router = Callable[[str, RawRecord], str]
"""(Connect cluster, raw record) -> owner key; raises `Malformed` when it names no connector."""


def route_status(connect_cluster: str, raw: RawRecord) -> str:
    """The owner of a connect-status record, from its key alone (as `decode_status` splits it)."""
    if raw.key is None:
        raise malformed(raw, "status record has no key")
    key = utf8(raw, raw.key, "status key")
    connector = ""
    if key.startswith("status-connector-"):
        connector = key[17:]
    elif key.startswith("status-task-"):
        connector = key[12:].rpartition("-")[0]
    elif key.startswith("status-topic-"):
        connector = key[13:].partition(":connector-")[2]
    else:
        raise malformed(raw, f"unknown status key prefix: {excerpt(key)}")
    if not connector:
        raise malformed(raw, f"status key names no connector: {excerpt(key)}")
    return owner_key(connect_cluster, connector)


def route_dlq(connect_cluster: str, raw: RawRecord) -> str:
    """The owner of a DLQ record: its last `__connect.errors.connector.name` header."""
    name: bytes | None = None
    for header, value in raw.headers:
        if header == _H_CONNECTOR:
            name = value
    connector = utf8(raw, name, f"header {_H_CONNECTOR}") if name else ""
    if not connector:
        raise malformed(raw, f"DLQ record has no {_H_CONNECTOR} header: its connector is unknown")
    return owner_key(connect_cluster, connector)


def route_status_or_dlq(connect_cluster: str, raw: RawRecord) -> str:
    """The owner of a record of a topic that carries both status and DLQ records (the
    benchmark's copy topic): a record with a `status-` key and no headers is routed as a status
    record (`route_status`), any other as a DLQ record (`route_dlq`)."""
    if raw.key is not None and raw.key.startswith(b"status-") and not raw.headers:
        return route_status(connect_cluster, raw)
    return route_dlq(connect_cluster, raw)


def route_offsets(connect_cluster: str, raw: RawRecord) -> str:
    """The owner of a connect-offsets record: the connector its key `["<name>", {...}]` names."""
    if raw.key is None:
        raise malformed(raw, "offsets record has no key")
    try:
        key = json.loads(utf8(raw, raw.key, "offsets key"))
    except (ValueError, RecursionError):
        raise malformed(raw, "offsets key is not valid JSON") from None
    if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str) and key[0]):
        raise malformed(raw, 'offsets key is not a JSON array ["<connector>", {partition}]')
    return owner_key(connect_cluster, key[0])


def encode_frame(
    records: Sequence[RawRecord],
    *,
    dlq_topics: frozenset[str] = frozenset(),
    encoded: Sequence[bytes] | None = None,
) -> bytes:
    """Records (of one owner, in consumption order) as one internal record's value.

    Records of `dlq_topics` keep only their `__connect.errors.*` headers (no key, no value).
    `encoded`: the records' `encode_record`s, when the caller has them already (`plan_frames`).
    """
    if encoded is None:
        encoded = [encode_record(raw, dlq=raw.topic in dlq_topics) for raw in records]
    topics: dict[str, int] = {}
    body: list[bytes] = []
    index_of = _U16.pack
    for raw, chunk in zip(records, encoded, strict=True):
        index = topics.get(raw.topic)
        if index is None:
            index = topics[raw.topic] = len(topics)
        body.append(index_of(index))
        body.append(chunk)
    head = [_VERSION, _U16.pack(len(topics))]
    for topic in topics:
        name = topic.encode()
        head.append(_U16.pack(len(name)))
        head.append(name)
    return b"".join(head + body)


def encode_record(raw: RawRecord, *, dlq: bool = False) -> bytes:
    """One record as a frame carries it, but for the topic index in front (`encode_frame`).

    `dlq`: a record of a DLQ topic keeps its `__connect.errors.*` headers only (no key, no
    value). Each record is encoded once, in one pass over its headers: its size decides its
    frame (`plan_frames`), and the frame is these bytes joined.
    """
    key, value, headers = raw.key, raw.value, raw.headers
    if dlq:
        key = value = None
        headers = tuple(
            (name, _trace_head(data)) if name == H_STACKTRACE else (name, data)
            for name, data in headers
            if name.startswith(DLQ_HEADER_PREFIX)
        )
    parts = [
        _REST.pack(
            raw.partition,
            raw.offset,
            raw.timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            len(headers),
        )
    ]
    if key:
        parts.append(key)
    if value:
        parts.append(value)
    names = _NAME_BYTES
    for name, data in headers:
        encoded = names.get(name)
        if encoded is None:
            encoded = name.encode()
            if len(names) < _MAX_NAMES:
                names[name] = encoded
        parts.append(_HEADER.pack(len(encoded), -1 if data is None else len(data)))
        parts.append(encoded)
        if data:
            parts.append(data)
    return b"".join(parts)


def _trace_head(data: bytes | None) -> bytes | None:
    """A stack trace header cut to its first `TRACE_HEAD_CHARS` characters (whole if shorter;
    as it is if it is not UTF-8: the decoder reports that)."""
    if data is None or len(data) <= TRACE_HEAD_CHARS:
        return data
    if data.isascii():
        return data[:TRACE_HEAD_CHARS]
    try:
        return data.decode()[:TRACE_HEAD_CHARS].encode()
    except UnicodeDecodeError:
        return data


def framed_size(raw: RawRecord, *, dlq: bool = False) -> int:
    """The bytes `encode_frame` writes for `raw` (its frame's head aside), exactly.

    `dlq`: as a record of a DLQ topic (its `__connect.errors.*` headers only). What the ingest
    uses to keep frames small and to tell a record no frame can carry (`frame_head_size`).
    """
    return _U16.size + len(encode_record(raw, dlq=dlq))


def frame_head_size(topics: Iterable[str]) -> int:
    """The bytes of a frame's head when its records come from (at most) `topics`: an upper
    bound for any frame of records from these topics."""
    return len(_VERSION) + _U16.size + sum(_U16.size + len(t.encode()) for t in set(topics))


@dataclass
class FramePlan:
    """A batch's routed records as frames, and the records no frame can carry."""

    frames: list[tuple[str, list[RawRecord]]] = field(default_factory=list)  # (owner, records)
    too_large: list[tuple[RawRecord, int]] = field(default_factory=list)  # (record, framed size)
    encoded: list[list[bytes]] = field(default_factory=list)  # each frame's `encode_record`s


def plan_frames(
    routed: Iterable[tuple[str, RawRecord]],
    *,
    max_frame_bytes: int,
    max_record_bytes: int,
    dlq_topics: frozenset[str] = frozenset(),
) -> FramePlan:
    """Group (owner, record) pairs, in order, into frames per owner. Pure.

    A frame's records take at most `max_frame_bytes` (`framed_size`), except a record larger
    than that, which travels alone. A record larger than `max_record_bytes` (the largest internal
    record the producer and the topic accept, less the frame's head) cannot travel at all: it is
    left out, in `too_large`, and the records around it are framed as if it were not there.
    Each record is encoded here, once (`encode_record`): `encode_frame(..., encoded=)` joins them.
    """
    max_frame_bytes = min(max_frame_bytes, max_record_bytes)
    plan = FramePlan()
    # owner -> (records, their encodings, [bytes so far])
    groups: dict[str, tuple[list[RawRecord], list[bytes], list[int]]] = {}
    for owner, raw in routed:
        chunk = encode_record(raw, dlq=raw.topic in dlq_topics)
        size = _U16.size + len(chunk)
        if size > max_record_bytes:
            plan.too_large.append((raw, size))
            continue
        group = groups.get(owner)
        if group is None:
            groups[owner] = group = ([], [], [0])
        elif group[2][0] + size > max_frame_bytes:
            plan.frames.append((owner, group[0]))  # full: send it, start the next one
            plan.encoded.append(group[1])
            groups[owner] = group = ([], [], [0])
        group[0].append(raw)
        group[1].append(chunk)
        group[2][0] += size
    for owner, (records, encoded, _) in groups.items():
        plan.frames.append((owner, records))
        plan.encoded.append(encoded)
    return plan


def decode_frame(data: bytes) -> list[RawRecord]:
    """The records of a frame; `Malformed` (coordinates unknown: -1) if it is not one."""
    try:
        return _decode_frame(data)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise Malformed(f"not an offsetd frame ({type(exc).__name__})", "<frame>", -1, -1) from None


def _decode_frame(data: bytes) -> list[RawRecord]:
    if not data or data[0] != FRAME_VERSION:
        raise ValueError("unknown frame version")
    (count,) = _U16.unpack_from(data, 1)
    at = 3
    topics: list[str] = []
    for _ in range(count):
        (length,) = _U16.unpack_from(data, at)
        at += 2
        topics.append(data[at : at + length].decode())
        at += length
    if at > len(data):
        raise ValueError("truncated frame")
    unpack = _RECORD.unpack_from
    size = _RECORD.size
    end = len(data)
    records: list[RawRecord] = []
    names = _NAME_TEXT
    while at < end:
        index, partition, offset, timestamp, klen, vlen, hcount = unpack(data, at)
        at += size
        key = value = None
        if klen >= 0:
            key = data[at : at + klen]
            at += klen
        if vlen >= 0:
            value = data[at : at + vlen]
            at += vlen
        if not hcount:  # a status record: no headers
            if at > end:
                raise ValueError("truncated frame")
            records.append(new_raw(topics[index], partition, offset, timestamp, key, value))
            continue
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(hcount):
            nlen, hlen = _HEADER.unpack_from(data, at)
            at += 6
            raw_name = data[at : at + nlen]
            name = names.get(raw_name)
            if name is None:
                name = raw_name.decode()
                if len(names) < _MAX_NAMES:
                    names[raw_name] = name
            at += nlen
            header: bytes | None = None
            if hlen >= 0:
                header = data[at : at + hlen]
                at += hlen
            headers.append((name, header))
        if at > end:
            raise ValueError("truncated frame")
        records.append(
            new_raw(topics[index], partition, offset, timestamp, key, value, tuple(headers))
        )
    return records


def encode_nudge(news: dict[str, object]) -> bytes:
    """A nudge's value: news for a connector's owner (a JSON object with a `type`)."""
    return _NUDGE + json.dumps(news, separators=(",", ":")).encode()


def decode_nudge(data: bytes) -> dict[str, object] | None:
    """The news of a nudge; None if `data` is not a nudge (a frame); `Malformed` if broken."""
    if not data or data[0] != NUDGE_VERSION:
        return None
    try:
        news = json.loads(data[1:])
    except (ValueError, RecursionError):
        raise Malformed("not an offsetd nudge (JSON)", "<nudge>", -1, -1) from None
    if not isinstance(news, dict) or not isinstance(news.get("type"), str):
        raise Malformed("not an offsetd nudge (no type)", "<nudge>", -1, -1)
    return news
