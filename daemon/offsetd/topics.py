"""offsetd's own small compacted topics (audit, sagas, control): created once, the same way."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.errors import OffsetdError


def ensure_compacted_topic(
    conf: Mapping[str, str],
    topic: str,
    *,
    what: str,
    error: type[OffsetdError],
    timeout_s: float = 30.0,
) -> None:
    """Create `topic` if missing: compacted, one partition (one order for all its keys).

    Replicas: up to 3, as many as the cluster has. A failure raises `error` naming `what`
    (e.g. "audit topic") and the broker's reason, never the client configuration.
    """
    try:
        admin = AdminClient(dict(conf))
        metadata = admin.list_topics(timeout=timeout_s)
        if topic in metadata.topics:
            return
        replicas = min(3, len(metadata.brokers)) or 1
        future = admin.create_topics(
            [NewTopic(topic, 1, replicas, config={"cleanup.policy": "compact"})],
            operation_timeout=timeout_s,
        )[topic]
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        reason = exc.args[0]
        if isinstance(reason, KafkaError) and reason.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        text = reason.str() if isinstance(reason, KafkaError) else str(reason)
        raise error(f"cannot create {what} {topic}: {text}") from None
