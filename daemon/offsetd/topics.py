"""offsetd's own small compacted topics (audit, sagas, control): created once, the same way."""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.errors import OffsetdError
from offsetd.kafkaaccess import raise_if_denied

__all__ = ["ensure_compacted_topic"]


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
        _wait_for_leader(admin, topic, timeout_s)
    except KafkaException as exc:
        reason = exc.args[0]
        if isinstance(reason, KafkaError) and reason.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise_if_denied(reason, conf, topic=("CREATE", topic))
        text = reason.str() if isinstance(reason, KafkaError) else str(reason)
        raise error(f"cannot create {what} {topic}: {text}") from None


def _wait_for_leader(admin: AdminClient, topic: str, timeout_s: float) -> None:
    """A topic just created has no leader for a moment; its first watermark query or produce
    would fail with NOT_LEADER_FOR_PARTITION (seen starting `offsetd run` on a fresh stack)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        partitions = found.partitions.values() if found is not None and found.error is None else []
        if partitions and all(p.leader >= 0 and p.error is None for p in partitions):
            return
        time.sleep(0.1)
