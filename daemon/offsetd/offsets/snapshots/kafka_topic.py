"""The snapshot topic: compacted, exactly one partition, created on the first write if missing.

An existing topic that is not compacted (old snapshots would be deleted) or has several
partitions (chunks and their header must stay in order) is refused. Errors carry librdkafka's
own text (`reason`), never the client configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as _ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.admin import ResourceType as _ResourceType  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.snapshots.errors import SnapshotStoreError

__all__ = ["SnapshotTopic", "reason"]

log = logging.getLogger(__name__)


def reason(exc: BaseException) -> str:
    """A librdkafka error's own text (never the client configuration)."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return str(err.str())
    return str(exc)


class SnapshotTopic:
    """Checks (and creates) one snapshot topic; a topic found fit is not checked again."""

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str,
        *,
        replication_factor: int | None,
        timeout_s: float,
    ) -> None:
        self._conf = dict(conf)
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self._ok = False

    @property
    def where(self) -> str:
        return f"Kafka topic {self.topic}"

    def ensure(self, *, create: bool = True) -> bool:
        """Check (and with `create`, create) the topic; False if it is missing. Cached."""
        if self._ok:
            return True
        admin = AdminClient({**self._conf, "allow.auto.create.topics": "false"})
        try:
            # All topics, not just ours: a metadata request naming a topic can auto-create it
            # (with the broker's defaults, i.e. not compacted).
            metadata = admin.list_topics(timeout=self.timeout_s)
            found = metadata.topics.get(self.topic)
            if found is None or (
                found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):
                if not create:
                    return False
                self._create(admin, len(metadata.brokers))
                return True
            if found.error is not None:
                raise_if_denied(found.error, self._conf, topic=("READ", self.topic))
                raise SnapshotStoreError(f"cannot use {self.where}: {found.error.str()}")
            self._check(admin, len(found.partitions))
        except KafkaException as exc:
            raise SnapshotStoreError(f"cannot check {self.where}: {reason(exc)}") from None
        self._ok = True
        return True

    def _create(self, admin: AdminClient, brokers: int) -> None:
        replicas = self.replication_factor or max(1, min(3, brokers))
        config = {"cleanup.policy": "compact", "min.insync.replicas": "2" if replicas >= 3 else "1"}
        future = admin.create_topics(
            [NewTopic(self.topic, 1, replicas, config=config)], operation_timeout=self.timeout_s
        )[self.topic]
        try:
            future.result(timeout=self.timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise_if_denied(exc, self._conf, topic=("CREATE", self.topic))
                raise SnapshotStoreError(
                    f"cannot create {self.where} (compacted, replication factor {replicas}): "
                    f"{reason(exc)}"
                ) from None
            # Someone else created it meanwhile: check theirs like any existing topic.
            metadata = admin.list_topics(timeout=self.timeout_s)
            found = metadata.topics.get(self.topic)
            self._check(admin, len(found.partitions) if found is not None else 0)
        else:
            log.info("created snapshot topic %s (replication factor %d)", self.topic, replicas)
        self._ok = True

    def _check(self, admin: AdminClient, partitions: int) -> None:
        resource = _ConfigResource(_ResourceType.TOPIC, self.topic)
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=self.timeout_s)
        except KafkaException as exc:
            raise_if_denied(exc, self._conf, topic=("DESCRIBE_CONFIGS", self.topic))
            raise SnapshotStoreError(
                f"cannot read the configuration of {self.where}: {reason(exc)}"
            ) from None
        entry = entries.get("cleanup.policy")
        policy = str(entry.value) if entry is not None and entry.value is not None else "delete"
        if "compact" not in [p.strip() for p in policy.split(",")]:
            raise SnapshotStoreError(
                f"refusing to use {self.where} for snapshots: its cleanup.policy is {policy!r}, "
                "so old snapshots would be deleted; set cleanup.policy=compact or choose another "
                "topic"
            )
        if partitions != 1:
            raise SnapshotStoreError(
                f"refusing to use {self.where} for snapshots: it has {partitions} partitions, "
                "it needs exactly 1 (chunks and their header must stay in order)"
            )
