"""Reading the quarantine topic back (`offsetd quarantine list`, the demo, the tests): every
copy decoded, oldest first; a topic offsetd may not read is an error, never an empty list.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException

from offsetd.kafkaaccess import raise_if_denied
from offsetd.remediation.quarantine.topic import DEFAULT_TOPIC, Quarantine, QuarantineFailed
from offsetd.remediation.quarantine_format import (
    QuarantinedRecord,
    decode_copy,
)
from offsetd.remediation.records import to_record

__all__ = ["read_quarantined"]


def read_quarantined(
    conf: Mapping[str, str], topic: str = DEFAULT_TOPIC, *, timeout_s: float = 30.0
) -> list[QuarantinedRecord]:
    """Every record in the quarantine topic, oldest quarantine time first ([] if no topic)."""
    quarantine = Quarantine(conf, topic, timeout_s=timeout_s)
    consumer = quarantine._consumer()
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        meta = metadata.topics.get(topic)
        if meta is not None and meta.error is not None:
            # not readable is not empty: a missing ACL must not look like nothing quarantined
            raise_if_denied(meta.error, conf, topic=("READ", topic))
        if meta is None or meta.error is not None:
            return []
        partitions = sorted(meta.partitions)
    except KafkaException as exc:
        raise QuarantineFailed(f"cannot read {topic}: {exc.args[0].str()}") from None
    finally:
        consumer.close()
    out: list[QuarantinedRecord] = []
    for partition in partitions:
        low, _high = quarantine._watermarks(partition)
        out.extend(decode_copy(to_record(msg)) for msg in quarantine._scan(partition, low))
    return sorted(out, key=lambda q: (q.quarantined_at_ms or 0, q.ref.partition, q.ref.offset))
