"""Has this sink delivered a record with the configuration it runs now? Read before acting.

A run of bad records and a configuration wrong for every record (a converter that cannot read
the topic's format) look the same at the second failure: the record after a skipped one fails
too. What tells them apart is proof that the connector's current configuration passes records at
all. Before the incident that proof is in Kafka. The sink's committed offset C says the record at
C-1 was delivered; Connect's configs topic holds the connector's configuration as it was written,
each version a record with its time. The record at C-1 was delivered with the current
configuration when

- no version retained there differs from the current one (offsetd's own one-record-batch
  override aside): the connector has run with it since it was created (or since the oldest
  version compaction kept); or
- the record at C-1 was written after the last version that changed something: it cannot have
  been delivered before it.

Read once, at the start of the incident: locating the record rewrites the configuration.

In doubt (nothing committed, the record older than a change, the configs topic unreadable) there
is no proof, and the caller stops after the first skipped record. Not caught: a group whose
committed offset was set by hand, or left by an earlier connector of the same name whose
configuration compaction has removed; there the run's bound (`remediation.max_poison_run`) is
what stops it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offsetd.remediation.records import RecordUnavailable, read_records

__all__ = ["ConfigHistory", "ConfigProof", "config_history", "delivered_with_config", "history_of"]

_OVERRIDE = "consumer.override.max.poll.records"  # what locating sets and puts back


@dataclass(frozen=True)
class ConfigProof:
    proven: bool
    why: str


@dataclass(frozen=True)
class ConfigHistory:
    """When the connector's configuration last changed (`changed_ms`), and whether every
    retained version is the same (`unchanged`: the configuration is as old as the oldest)."""

    changed_ms: int
    unchanged: bool


def history_of(versions: list[tuple[int, Mapping[str, Any] | None]]) -> ConfigHistory | None:
    """The history from the retained versions, oldest first: (time, properties or None for a
    deletion). None when there is no version."""
    if not versions:
        return None
    changed_ms, previous = versions[0][0], _normal(versions[0][1])
    unchanged = True
    for at_ms, properties in versions[1:]:
        current = _normal(properties)
        if current != previous:
            changed_ms, unchanged = at_ms, False
        previous = current
    return ConfigHistory(changed_ms, unchanged)


def _normal(properties: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if properties is None:
        return None
    return {k: v for k, v in properties.items() if k != _OVERRIDE}


def config_history(
    conf: Mapping[str, str], configs_topic: str, connector: str, timeout_s: float = 30.0
) -> ConfigHistory | None:
    """The connector's configuration history from Connect's configs topic (its
    `connector-<name>` records); None when it cannot be read whole in time."""
    key = f"connector-{connector}".encode()
    consumer = Consumer(
        {
            **conf,
            "group.id": f"offsetd-configs-reader-{connector}",  # assign() only
            "enable.auto.commit": "false",
        }
    )
    try:
        metadata = consumer.list_topics(configs_topic, timeout=timeout_s).topics.get(configs_topic)
        if metadata is None or not metadata.partitions:
            return None
        versions: list[tuple[int, Mapping[str, Any] | None]] = []
        for partition in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(configs_topic, partition), timeout_s
            )
            if high <= low:
                continue
            consumer.assign([TopicPartition(configs_topic, partition, low)])
            position, deadline = low, time.monotonic() + timeout_s
            while position < high and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() is not None:
                        continue
                    position = (msg.offset() or 0) + 1
                    if msg.key() == key:
                        versions.append((msg.timestamp()[1], _properties(msg.value())))
            if position < high:
                return None  # not read to its end in time: no answer rather than a wrong one
        return history_of(versions)
    except KafkaException:
        return None
    finally:
        consumer.close()


def _properties(value: bytes | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return {"<unreadable>": value.hex()}  # differs from anything readable
    found = parsed.get("properties") if isinstance(parsed, dict) else None
    return found if isinstance(found, dict) else {"<unreadable>": str(parsed)}


def delivered_with_config(
    data_conf: Mapping[str, str],
    history: ConfigHistory | None,
    topic: str,
    partition: int,
    committed: int | None,
    timeout_s: float = 30.0,
) -> ConfigProof:
    """Whether the record before `committed` on topic-partition was delivered with the
    connector's current configuration (`history`, read before anything was changed)."""
    if committed is None or committed <= 0:
        return ConfigProof(False, f"nothing was ever committed on {topic}-{partition}")
    if history is None:
        return ConfigProof(False, "the configuration's history cannot be read")
    if history.unchanged:
        return ConfigProof(
            True,
            f"{topic}-{partition}@{committed - 1} was delivered, and the connector's "
            "configuration has not changed since it was written",
        )
    try:
        records = read_records(data_conf, topic, partition, committed - 1, 1, timeout_s=timeout_s)
    except RecordUnavailable as exc:
        return ConfigProof(False, f"the last delivered record cannot be read ({exc})")
    if not records or records[0].offset != committed - 1 or records[0].timestamp_ms < 0:
        return ConfigProof(False, f"no record at {topic}-{partition}@{committed - 1} to date")
    last = records[0]
    if last.timestamp_ms < history.changed_ms:
        return ConfigProof(
            False,
            f"the last record delivered ({last.coordinates}) is older than the connector's "
            "last configuration change",
        )
    return ConfigProof(
        True, f"{last.coordinates} was delivered with the current configuration (written after it)"
    )
