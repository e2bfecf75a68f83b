"""The daemon's internal events topic (`<app_id>-events`): created with its partitions and a
`max.message.bytes` large enough for a frame that carries one large record, or checked.

The ingest (`offsetd.ingest`) frames into it and the owners read it; how large a frame may be
follows from the limit this returns.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType as _AlterOp  # type: ignore[attr-defined]
from confluent_kafka.admin import ConfigEntry as _ConfigEntry  # type: ignore[attr-defined]
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

__all__ = [
    "EVENTS_MAX_MESSAGE_BYTES",
    "KAFKA_DEFAULT_MAX_MESSAGE_BYTES",
    "IngestError",
    "ensure_events_topic",
]

log = logging.getLogger("offsetd.ingest")

# The internal topic's `max.message.bytes` (a topic may exceed the broker's `message.max.bytes`):
# a frame holding one record as large as a source topic accepts by default (1 MiB, more when
# the record was compressed) fits with room to spare.
EVENTS_MAX_MESSAGE_BYTES = 8 << 20
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1048588  # a topic's limit when nobody raised it
_MAX_MESSAGE_BYTES = "max.message.bytes"


class IngestError(RuntimeError):
    """The ingest cannot go on (the internal topic is wrong, a produce was not acknowledged)."""


def ensure_events_topic(
    conf: Mapping[str, str],
    topic: str,
    partitions: int,
    replication: int,
    timeout_s: float = 30,
    *,
    max_message_bytes: int = EVENTS_MAX_MESSAGE_BYTES,
) -> int:
    """Create the internal topic with exactly `partitions` partitions, or check it has them.

    Its `max.message.bytes` is raised to `max_message_bytes` (at creation, or on a topic that
    has less, e.g. created by faust or an older offsetd); a broker that refuses keeps its own.
    Returns the topic's `max.message.bytes` as it is now: what the ingest's frames must fit.
    """
    admin = AdminClient(dict(conf))
    metadata = admin.list_topics(timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None:
        config = {_MAX_MESSAGE_BYTES: str(max_message_bytes)}
        if _create(admin, topic, partitions, replication, config, timeout_s):
            # created with the limit: no describe, which may not see a brand-new topic yet
            return max_message_bytes
    elif len(found.partitions) != partitions:
        raise IngestError(
            f"{topic} has {len(found.partitions)} partitions, the config says {partitions}: "
            "one owner per connector needs the same count everywhere"
        )
    limit = _topic_message_limit(admin, topic, timeout_s)
    if limit is not None and limit >= max_message_bytes:
        return limit
    resource = _ConfigResource(
        _ResourceType.TOPIC,
        topic,
        incremental_configs=[
            _ConfigEntry(
                _MAX_MESSAGE_BYTES,
                str(max_message_bytes),
                incremental_operation=_AlterOp.SET,
            )
        ],
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException as exc:
        reason = exc.args[0]
        text = reason.str() if isinstance(reason, KafkaError) else str(reason)
        log.warning(
            "could not raise %s of %s to %d (%s): records larger than %s bytes will be skipped",
            _MAX_MESSAGE_BYTES,
            topic,
            max_message_bytes,
            text,
            limit,
        )
        return limit or KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    return max_message_bytes


def _create(
    admin: AdminClient,
    topic: str,
    partitions: int,
    replication: int,
    config: dict[str, str],
    timeout_s: float,
) -> bool:
    """True when this call created the topic with `config`."""
    new = NewTopic(topic, partitions, replication, config=config)
    future = admin.create_topics([new], operation_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        code = exc.args[0].code()
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if config and code in (KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION):
            # the limit is a wish, not a need: the broker's own keeps the ingest going
            log.warning("%s refused %s (%s)", topic, config, exc.args[0].str())
            _create(admin, topic, partitions, replication, {}, timeout_s)
            return False
        raise IngestError(f"cannot create {topic}: {exc.args[0].str()}") from None
    return bool(config)


def _topic_message_limit(admin: AdminClient, topic: str, timeout_s: float) -> int | None:
    """The topic's `max.message.bytes` (None when the broker does not say)."""
    resource = _ConfigResource(_ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
        entry = entries.get(_MAX_MESSAGE_BYTES)
        return int(entry.value) if entry is not None and entry.value else None
    except (KafkaException, ValueError):
        return None
