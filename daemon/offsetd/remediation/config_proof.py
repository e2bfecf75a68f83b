"""Has this sink delivered a record with the configuration it runs now? Read before acting.

A run of bad records and a configuration wrong for every record (a converter that cannot read
the topic's format) look the same at the second failure: the record after a skipped one fails
too. What tells them apart is proof that the connector's current configuration handles records
at all. Before the incident, that proof is in Kafka: the sink's committed offset C says the
record at C-1 was delivered, and if that record was written after the connector's configuration
last changed (Connect's configs topic: the connector's config and its task configs' commit, each
a record with its time), it was delivered with that configuration. Read once, at the start of
the incident, because locating the record itself rewrites the config (one-record batches).

In doubt (nothing committed, a record older than the configuration, the configs topic or the
record unreadable) there is no proof, and the caller stops after the first skipped record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offsetd.remediation.records import RecordUnavailable, read_records

__all__ = ["ConfigProof", "config_changed_ms", "delivered_since_config"]


@dataclass(frozen=True)
class ConfigProof:
    proven: bool
    why: str


def config_changed_ms(
    conf: Mapping[str, str], configs_topic: str, connector: str, timeout_s: float = 30.0
) -> int | None:
    """When the connector's configuration last changed: the newest of its `connector-<name>`
    and `commit-<name>` records in Connect's configs topic (None: none found)."""
    keys = {f"connector-{connector}".encode(), f"commit-{connector}".encode()}
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
        newest: int | None = None
        for partition in metadata.partitions:
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
                    if msg.key() in keys:
                        stamp = msg.timestamp()[1]
                        newest = stamp if newest is None else max(newest, stamp)
            if position < high:
                return None  # not read to its end in time: no answer rather than a wrong one
        return newest
    except KafkaException:
        return None
    finally:
        consumer.close()


def delivered_since_config(
    data_conf: Mapping[str, str],
    changed_ms: int | None,
    topic: str,
    partition: int,
    committed: int | None,
    timeout_s: float = 30.0,
) -> ConfigProof:
    """Whether the record before `committed` on topic-partition was delivered with the
    connector's current configuration, last changed at `changed_ms` (`config_changed_ms`, read
    before anything was changed; see the module docstring)."""
    if committed is None or committed <= 0:
        return ConfigProof(False, f"nothing was ever committed on {topic}-{partition}")
    if changed_ms is None:
        return ConfigProof(False, "the configuration's age cannot be read from the configs topic")
    try:
        records = read_records(data_conf, topic, partition, committed - 1, 1, timeout_s=timeout_s)
    except RecordUnavailable as exc:
        return ConfigProof(False, f"the last delivered record cannot be read ({exc})")
    if not records or records[0].offset != committed - 1 or records[0].timestamp_ms < 0:
        return ConfigProof(False, f"no record at {topic}-{partition}@{committed - 1} to date")
    last = records[0]
    if last.timestamp_ms < changed_ms:
        return ConfigProof(
            False,
            f"the last record delivered ({last.coordinates}) is older than the connector's "
            "configuration",
        )
    return ConfigProof(
        True,
        f"{last.coordinates} was delivered with the current configuration (written after it)",
    )
