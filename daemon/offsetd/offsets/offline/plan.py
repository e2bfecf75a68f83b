"""Offline mode, the pure write side: key layouts, planning records, validating, reports.

Given an `OffsetsView` (offline_view) and the requested entries, decide the exact records (key
bytes, value bytes, topic partition) or the consumer-group changes, or refuse with every
problem listed; `offsetd.offsets.offline` sends what is planned here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from offsetd.offsets.model import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
    JsonScalar,
    OffsetEntry,
    OffsetMap,
    PartitionMap,
)
from offsetd.offsets.offline import javahash
from offsetd.offsets.offline.view import (
    KeyForm,
    LogicalPartition,
    OfflineError,
    OffsetsView,
    is_primitive,
)

__all__ = [
    "BUILTIN_LAYOUTS",
    "FILE_STREAM_SOURCE_CLASS",
    "KeyLayout",
    "OfflineWriteIncomplete",
    "PlannedRecord",
    "SinkChange",
    "WriteReport",
    "WrittenOffset",
    "builtin_layout",
    "parse_key_template",
    "plan_sink_writes",
    "plan_source_writes",
]

FILE_STREAM_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"


# -- key layouts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyLayout:
    """The order in which a connector's task puts the keys of its partition maps."""

    name: str
    keys: tuple[str, ...]

    def ordered(self, partition: Mapping[str, JsonScalar]) -> dict[str, JsonScalar]:
        if set(partition) != set(self.keys) or len(partition) != len(self.keys):
            raise ValueError(
                f"its keys {sorted(partition)} are not the keys {sorted(self.keys)} of {self.name}"
            )
        return {k: partition[k] for k in self.keys}


def _java_hashmap_layout(name: str, put_order: Sequence[str]) -> KeyLayout:
    return KeyLayout(f"{name} (Java HashMap order)", tuple(javahash.hashmap_order(put_order)))


# The put order of each task's map (iteration order then follows from HashMap itself).
BUILTIN_LAYOUTS: dict[str, KeyLayout] = {
    # MirrorUtils.wrapPartition: new HashMap, put topic, partition, cluster
    MIRROR_SOURCE_CLASS: _java_hashmap_layout(
        "MirrorSourceConnector", ("topic", "partition", "cluster")
    ),
    # Checkpoint.connectPartition: new HashMap, put group, topic, partition
    MIRROR_CHECKPOINT_CLASS: _java_hashmap_layout(
        "MirrorCheckpointConnector", ("group", "topic", "partition")
    ),
    # Heartbeat.connectPartition: new HashMap, put sourceClusterAlias, targetClusterAlias
    MIRROR_HEARTBEAT_CLASS: _java_hashmap_layout(
        "MirrorHeartbeatConnector", ("sourceClusterAlias", "targetClusterAlias")
    ),
    # FileStreamSourceTask: Collections.singletonMap("filename", filename)
    FILE_STREAM_SOURCE_CLASS: KeyLayout("FileStreamSourceConnector", ("filename",)),
}


def builtin_layout(connector_class: str | None) -> KeyLayout | None:
    """The layout of a class offsetd knows (full or simple class name), else None."""
    if connector_class is None:
        return None
    for full, layout in BUILTIN_LAYOUTS.items():
        if connector_class in (full, full.rsplit(".", 1)[1]):
            return layout
    return None


def parse_key_template(template: str) -> KeyLayout:
    """A `--key-template`: any key in the topic's format; only the order of its map's keys counts.

    `'["any-name", {"file": null, "line": null}]'` says: write `file` first, then `line`. The
    easiest template is a key Connect itself wrote for another partition of the same connector,
    copied from the topic (values and the name are ignored).
    """
    try:
        parsed = json.loads(template, object_pairs_hook=_no_duplicate_keys)
    except ValueError as exc:
        raise OfflineError(f"the key template is not valid JSON ({exc})") from None
    if not (
        isinstance(parsed, list)
        and len(parsed) == 2
        and isinstance(parsed[0], str)
        and isinstance(parsed[1], dict)
        and parsed[1]
    ):
        raise OfflineError(
            'the key template must be a JSON array ["<name>", {"<key>": ..., ...}] with at '
            "least one key, the keys in the order to write"
        )
    return KeyLayout("the key template", tuple(parsed[1]))


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice in one object")
    return dict(pairs)


# -- planning source writes ---------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedRecord:
    """One record to produce to the offsets topic, and why its key is what it is."""

    connector: str
    partition: PartitionMap
    offset: OffsetMap | None
    key: bytes
    value: bytes | None
    kafka_partition: int
    key_source: str  # "existing key" | the layout's name | "tombstone for a conflicting form"


@dataclass
class _Problems:
    lines: list[str] = field(default_factory=list)

    def add(self, partition: Mapping[str, JsonScalar], why: str) -> None:
        self.lines.append(f"partition {json.dumps(partition)}: {why}")


def _offset_problem(layout_class: str | None, entry: OffsetEntry) -> str | None:
    """What the connector's own `alterOffsets` would reject (offline bypasses it)."""
    if entry.offset is None:
        return None  # MM2 and FileStream accept a null for any partition
    if not all(is_primitive(v) for v in entry.offset.values()):
        return "offset values must be primitives (string, number, boolean, null)"
    part, off = entry.partition, entry.offset

    def non_negative_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if layout_class == MIRROR_SOURCE_CLASS:
        if not (isinstance(part.get("cluster"), str) and isinstance(part.get("topic"), str)):
            return "cluster and topic must be strings"
        if not non_negative_int(part.get("partition")):
            return "partition must be an integer >= 0"
        if set(off) != {"offset"} or not non_negative_int(off["offset"]):
            return 'the offset must be {"offset": <integer >= 0>}'
    elif layout_class in (MIRROR_CHECKPOINT_CLASS, MIRROR_HEARTBEAT_CLASS):
        if off != {"offset": 0}:
            return 'MM2 checkpoint and heartbeat offsets must be exactly {"offset": 0}'
    elif layout_class == FILE_STREAM_SOURCE_CLASS and (
        set(off) != {"position"} or not non_negative_int(off["position"])
    ):
        return 'the offset must be {"position": <integer >= 0>}'
    return None


def _encodes_differently(
    connector: str, entry: OffsetEntry, layout: KeyLayout, stored: bytes
) -> bool:
    try:
        return javahash.encode_offset_key(connector, layout.ordered(entry.partition)) != stored
    except (ValueError, javahash.JavaEncodingError):
        return True


def _full_class(connector_class: str | None) -> str | None:
    if connector_class is None:
        return None
    for full in BUILTIN_LAYOUTS:
        if connector_class in (full, full.rsplit(".", 1)[1]):
            return full
    return connector_class


def plan_source_writes(
    connector: str,
    entries: Sequence[OffsetEntry],
    view: OffsetsView,
    *,
    connector_class: str | None,
    key_template: str | None = None,
) -> tuple[list[PlannedRecord], list[str]]:
    """The records that make `entries` the connector's offsets, plus warnings; or refuse.

    Key bytes: the exact bytes already in the topic for that logical partition when there are
    any (and they sit where Java's partitioner puts them); otherwise a new key, only when the
    layout is known (a built-in class, or `key_template`). A null offset on a conflicting
    partition tombstones every live form where it lies; a non-null one is refused. Every
    problem is collected and reported in one `OfflineError`; nothing is planned then.
    """
    if not entries:
        raise OfflineError("no offsets to write")
    full_class = _full_class(connector_class)
    layout = parse_key_template(key_template) if key_template else builtin_layout(full_class)
    job = _SourceWrites(connector, connector_class, full_class, view, layout)
    seen: set[str] = set()
    for entry in entries:
        if entry.key in seen:
            job.problems.add(entry.partition, "listed twice")
            continue
        seen.add(entry.key)
        job.plan(entry)
    if job.problems.lines:
        count = len(job.problems.lines)
        raise OfflineError(
            f"refusing to write offsets for connector {connector}: {count} "
            f"partition{'s' if count > 1 else ''} cannot be written safely; nothing was "
            "written:\n" + "\n".join(job.problems.lines)
        )
    return job.planned, job.warnings


@dataclass
class _SourceWrites:
    """Planning one connector's source records, entry by entry (see `plan_source_writes`)."""

    connector: str
    connector_class: str | None
    full_class: str | None
    view: OffsetsView
    layout: KeyLayout | None
    problems: _Problems = field(default_factory=_Problems)
    planned: list[PlannedRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def plan(self, entry: OffsetEntry) -> None:
        if not all(is_primitive(v) for v in entry.partition.values()):
            self.problems.add(entry.partition, "partition values must be primitives")
            return
        why = _offset_problem(self.full_class, entry)
        if why:
            self.problems.add(entry.partition, why)
            return
        try:
            value = javahash.encode_offset_value(entry.offset)
        except javahash.JavaEncodingError as exc:
            self.problems.add(entry.partition, str(exc))
            return
        lp = self.view.lookup(self.connector, entry.partition)
        if lp is not None and lp.conflict:
            self._conflicting(entry, lp)
            return
        live = [f for f in lp.forms if f.offset is not None] if lp is not None else []
        if entry.offset is None and not live:
            where = json.dumps(entry.partition)
            self.warnings.append(f"partition {where} has no stored offset; nothing to remove")
            return
        stored = live[0] if live else None
        if stored is None and lp is not None and len({f.key for f in lp.forms}) == 1:
            stored = lp.current  # only tombstones, all under one key: reuse those bytes
        if stored is not None:
            self._reuse(entry, stored, value)
        else:
            self._new_key(entry, value)

    def _conflicting(self, entry: OffsetEntry, lp: LogicalPartition) -> None:
        """A partition stored under several key forms: only a null offset, which tombstones
        every live form, may be written."""
        if entry.offset is not None:
            self.problems.add(
                entry.partition,
                "it is stored under more than one key form, so a worker may read either:\n"
                f"{lp.describe()}\n  remove it first (write a null offset, which "
                "tombstones every form), then write the new offset",
            )
            return
        for form in lp.forms:
            if form.offset is not None:
                self.planned.append(
                    PlannedRecord(
                        self.connector,
                        entry.partition,
                        None,
                        form.key,
                        None,
                        form.kafka_partition,
                        "tombstone for a conflicting form",
                    )
                )

    def _reuse(self, entry: OffsetEntry, stored: KeyForm, value: bytes | None) -> None:
        """The key bytes already in the topic, where Java's partitioner puts them."""
        expected = javahash.java_partition(stored.key, self.view.partition_count)
        if stored.offset is not None and stored.kafka_partition != expected:
            self.problems.add(
                entry.partition,
                f"its key is in topic partition {stored.kafka_partition}, but Java's "
                f"partitioner puts it in {expected}: it was not written by a Connect "
                "worker's producer, and another write would create a conflicting copy",
            )
            return
        layout = self.layout
        if layout is not None and _encodes_differently(self.connector, entry, layout, stored.key):
            self.warnings.append(
                f"partition {json.dumps(entry.partition)}: the stored key bytes differ from "
                f"{layout.name}; reusing the stored bytes, which are what the worker has been "
                "reading"
            )
        self.planned.append(
            PlannedRecord(
                self.connector,
                entry.partition,
                entry.offset,
                stored.key,
                value,
                expected,
                "existing key",
            )
        )

    def _new_key(self, entry: OffsetEntry, value: bytes | None) -> None:
        """A key Connect would write, when the layout of the class's keys is known."""
        layout = self.layout
        if layout is None:
            connector_class = self.connector_class
            self.problems.add(
                entry.partition,
                "no key for it is stored yet, and the key order of "
                + (f"class {connector_class}" if connector_class else "this connector's class")
                + " is unknown: pass --key-template (e.g. a key Connect wrote for another "
                "partition of this connector)",
            )
            return
        try:
            key = javahash.encode_offset_key(self.connector, layout.ordered(entry.partition))
        except (ValueError, javahash.JavaEncodingError) as exc:
            self.problems.add(entry.partition, f"cannot encode a new key: {exc}")
            return
        self.planned.append(
            PlannedRecord(
                self.connector,
                entry.partition,
                entry.offset,
                key,
                value,
                javahash.java_partition(key, self.view.partition_count),
                layout.name,
            )
        )


# -- planning sink writes -----------------------------------------------------------------------


@dataclass(frozen=True)
class SinkChange:
    topic: str
    partition: int
    offset: int | None  # None: delete the committed offset


def _sink_int(value: object) -> int | None:
    """SinkUtils accepts numbers or numeric strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def plan_sink_writes(entries: Sequence[OffsetEntry]) -> list[SinkChange]:
    """Validate sink entries the way Connect's `SinkUtils` does; refuse all on any problem."""
    if not entries:
        raise OfflineError("no offsets to write")
    problems = _Problems()
    changes: list[SinkChange] = []
    seen: set[tuple[str, int]] = set()
    for entry in entries:
        topic = entry.partition.get("kafka_topic")
        partition = _sink_int(entry.partition.get("kafka_partition"))
        if set(entry.partition) != {"kafka_topic", "kafka_partition"}:
            problems.add(entry.partition, 'a sink partition is {"kafka_topic", "kafka_partition"}')
            continue
        if not isinstance(topic, str) or not topic or partition is None or partition < 0:
            problems.add(entry.partition, "kafka_topic must be a name, kafka_partition an int >= 0")
            continue
        if (topic, partition) in seen:
            problems.add(entry.partition, "listed twice")
            continue
        seen.add((topic, partition))
        if entry.offset is None:
            changes.append(SinkChange(topic, partition, None))
            continue
        offset = _sink_int(entry.offset.get("kafka_offset"))
        if set(entry.offset) != {"kafka_offset"} or offset is None or offset < 0:
            problems.add(entry.partition, 'the offset must be {"kafka_offset": <integer >= 0>}')
            continue
        changes.append(SinkChange(topic, partition, offset))
    if problems.lines:
        raise OfflineError(
            "refusing to write sink offsets; nothing was written:\n" + "\n".join(problems.lines)
        )
    return changes


class OfflineWriteIncomplete(OfflineError):
    """Some records of an offline write may have been written and others not (exit 13, the code
    of `ChangeIncomplete`): the message lists what failed and what was confirmed, and `report`
    holds the confirmed part."""

    exit_code = 13

    def __init__(self, message: str, report: WriteReport) -> None:
        super().__init__(message)
        self.report = report


# -- reports ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrittenOffset:
    """One offset written (or removed), and where it went."""

    partition: PartitionMap
    offset: OffsetMap | None
    kafka_partition: int | None = None  # source: the offsets topic partition
    kafka_offset: int | None = None  # source: the record's offset there
    key: bytes | None = None  # source: the key bytes written
    key_source: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": self.partition, "offset": self.offset}
        if self.key is not None:
            out.update(
                key=self.key.decode("utf-8", "backslashreplace"),
                key_base64=base64.b64encode(self.key).decode("ascii"),
                topic_partition=self.kafka_partition,
                kafka_offset=self.kafka_offset,
                key_source=self.key_source,
            )
        return out


@dataclass(frozen=True)
class WriteReport:
    """What an offline write did: records produced (source) or group offsets changed (sink)."""

    kind: str  # "source" | "sink"
    target: str  # the offsets topic, or the consumer group
    connector: str | None
    written: tuple[WrittenOffset, ...]
    warnings: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "connector": self.connector,
            "written": [w.as_json() for w in self.written],
            "warnings": list(self.warnings),
        }
