"""What a failover plan reads from Kafka, and the target group's admin calls.

On the target (which must answer): the checkpoints topic of the flow, the offset syncs where
they live there, the group's state, members and commits, and the watermarks of every partition
the plan may commit. On the source (which may be gone): the groups' commits, through aiokafka
(`lag.groups.GroupReader`: a coordinator that goes away raises, it does not take the process
down as librdkafka's admin requests can), and the offset syncs where they live there.

Reading a topic is assigned, group-less, from the beginning to the end offsets taken first (the
`offsets.offline` reader's consumer); malformed records are counted, never raised.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

from offsetd.adminclient import connected_admin
from offsetd.errors import FailoverError
from offsetd.failover.syncs import OffsetSync, SyncIndex, decode_offset_sync
from offsetd.kafkaaccess import denied, raise_if_denied
from offsetd.lag.checkpoints import Checkpoint, CheckpointError, decode_checkpoint
from offsetd.lag.groups import GroupReader
from offsetd.lag.kafka_io import OffsetSpec
from offsetd.offsets.offline.reader import offline_consumer

__all__ = [
    "Read",
    "TargetGroup",
    "TargetGroups",
    "list_groups",
    "read_checkpoints",
    "read_syncs",
    "source_commits",
]

TP = tuple[str, int]


@dataclass
class Read:
    """A topic read to its end: the records kept, how many were malformed (and where the first
    one is, with why), whether it exists."""

    exists: bool
    records: int = 0
    malformed: int = 0
    first_malformed: str | None = None  # "partition P offset O: why"

    def skip(self, partition: int, offset: int, why: object) -> None:
        self.malformed += 1
        if self.first_malformed is None:
            self.first_malformed = f"partition {partition} offset {offset}: {why}"

    def describe_malformed(self, topic: str) -> str:
        return (
            f"{topic}: {self.malformed} malformed record(s) skipped "
            f"(the first at {self.first_malformed})"
        )


Raw = tuple[bytes | None, bytes | None, int, int, int]  # key, value, timestamp, partition, offset


def _read_topic(conf: Mapping[str, str], topic: str, timeout_s: float) -> tuple[bool, list[Raw]]:
    consumer = offline_consumer(conf)
    try:
        metadata = consumer.list_topics(topic, timeout=min(timeout_s, 30.0)).topics.get(topic)
        if metadata is not None and metadata.error is not None:
            raise_if_denied(metadata.error, conf, topic=("READ", topic))
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False, []
            raise FailoverError(f"cannot read {topic}: {metadata.error.str()}")
        if metadata is None or not metadata.partitions:
            return False, []
        ends: dict[int, int] = {}
        for p in metadata.partitions:
            _low, ends[p] = consumer.get_watermark_offsets(
                KafkaTP(topic, p), timeout=min(timeout_s, 30.0), cached=False
            )
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([KafkaTP(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        out: list[Raw] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise FailoverError(f"reading {topic} did not reach its end in {timeout_s:.0f} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise_if_denied(error, conf, topic=("READ", topic))
                    if error.retriable() or error.code() == KafkaError._TRANSPORT:
                        continue
                    raise FailoverError(f"reading {topic}: {error.str()}")
                partition, offset = msg.partition() or 0, msg.offset() or 0
                out.append((msg.key(), msg.value(), msg.timestamp()[1], partition, offset))
                if offset >= ends[partition] - 1:
                    pending.discard(partition)
        return True, out
    finally:
        consumer.close()


def read_checkpoints(
    conf: Mapping[str, str], topic: str, timeout_s: float = 60.0
) -> tuple[Read, dict[tuple[str, str, int], Checkpoint]]:
    """The newest checkpoint per (group, topic, partition) of a checkpoints topic."""
    exists, records = _read_topic(conf, topic, timeout_s)
    read = Read(exists, len(records))
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value, timestamp, partition, offset in records:
        if value is None:
            continue  # a tombstone deletes nothing MM2 reads back
        try:
            c = decode_checkpoint(key, value, timestamp)
        except CheckpointError as exc:
            read.skip(partition, offset, exc)
            continue
        latest[(c.group, c.topic, c.partition)] = c
    return read, latest


def read_syncs(
    conf: Mapping[str, str], topic: str, timeout_s: float = 60.0
) -> tuple[Read, SyncIndex]:
    """Every offset sync still in an offset-syncs topic."""
    exists, records = _read_topic(conf, topic, timeout_s)
    read = Read(exists, len(records))
    syncs: list[OffsetSync] = []
    for key, value, _ts, partition, offset in records:
        try:
            syncs.append(decode_offset_sync(key, value))
        except CheckpointError as exc:
            read.skip(partition, offset, exc)
    return read, SyncIndex(syncs)


def list_groups(admin: AdminClient, timeout_s: float) -> list[str]:
    """Every consumer group of a cluster (one request per broker; no coordinator request)."""
    result = admin.list_consumer_groups(request_timeout=timeout_s).result()
    if result.errors and not result.valid:  # no broker answered (librdkafka does not raise)
        raise FailoverError(f"listing groups: {result.errors[0].str()}")
    return sorted(g.group_id for g in result.valid)


def source_commits(
    reader: GroupReader, groups: Iterable[str], timeout_s: float
) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
    return reader.offsets(groups, timeout_s)


@dataclass(frozen=True)
class TargetGroup:
    state: str
    members: tuple[str, ...]
    commits: dict[TP, int]


class TargetGroups:
    """The target cluster's groups and watermarks, through one AdminClient."""

    def __init__(self, conf: Mapping[str, str], alias: str, timeout_s: float = 30.0) -> None:
        self.conf = dict(conf)
        self.alias = alias
        self.timeout_s = timeout_s
        self.requests = 0
        self.admin: AdminClient = connected_admin(conf, min(timeout_s, 10.0), where=alias)

    def _group_denied(self, error: object, group: str, operation: str) -> None:
        refused = denied(error, self.conf, group=(operation, group))
        if refused is not None:
            raise refused

    def groups(self) -> list[str]:
        self.requests += 1
        return list_groups(self.admin, self.timeout_s)

    def describe(self, groups: list[str]) -> dict[str, TargetGroup]:
        """State, members and commits of each group on the target."""
        if not groups:
            return {}
        out: dict[str, TargetGroup] = {}
        self.requests += 1
        described = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout_s)
        # The commits: one request per group (librdkafka lists one group's commits per call),
        # all asked now, with the descriptions in flight, and read in order below. 1,000 groups
        # described, then their commits asked one after the other: 1.3-2.4 s; so: 0.9-1.7 s.
        asked = [(group, self._ask_commits(group)) for group in groups]
        states: dict[str, tuple[str, tuple[str, ...]]] = {}
        for group, future in described.items():
            try:
                d = future.result()
            except Exception as exc:
                self._group_denied(_error_of(exc), group, "DESCRIBE")
                raise FailoverError(f"group {group} on {self.alias}: {exc}") from None
            members = tuple(
                sorted(f"{m.client_id}@{m.host.lstrip('/')}" for m in (d.members or []))
            )
            states[group] = (str(getattr(d.state, "name", d.state)), members)
        for group, future in asked:
            state, members = states.get(group, ("UNKNOWN", ()))
            out[group] = TargetGroup(state, members, self._commits_of(group, future))
        return out

    def commits(self, group: str) -> dict[TP, int]:
        return self._commits_of(group, self._ask_commits(group))

    def _ask_commits(self, group: str) -> Future[Any]:
        self.requests += 1
        future: Future[Any] = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
        )[group]
        return future

    def _commits_of(self, group: str, future: Future[Any]) -> dict[TP, int]:
        try:
            result = future.result()
        except Exception as exc:
            self._group_denied(_error_of(exc), group, "DESCRIBE")
            raise FailoverError(f"the commits of group {group} on {self.alias}: {exc}") from None
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions or []
            if tp.offset >= 0 and tp.error is None
        }

    def watermarks(self, partitions: Iterable[TP]) -> dict[TP, tuple[int, int]]:
        """(log start, log end) of each partition that exists on the target."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        metadata = self.admin.list_topics(timeout=self.timeout_s)
        self.requests += 1
        present = [
            (t, p)
            for t, p in wanted
            if t in metadata.topics
            and metadata.topics[t].error is None
            and p in metadata.topics[t].partitions
        ]
        ends: dict[TP, list[int]] = {tp: [0, 0] for tp in present}
        for index, spec in ((0, OffsetSpec.earliest()), (1, OffsetSpec.latest())):
            if not present:
                break
            self.requests += 1
            futures = self.admin.list_offsets(
                {KafkaTP(t, p): spec for t, p in present}, request_timeout=self.timeout_s
            )
            for tp, future in futures.items():
                try:
                    ends[(tp.topic, tp.partition)][index] = int(future.result().offset)
                except Exception as exc:
                    raise_if_denied(_error_of(exc), self.conf, topic=("DESCRIBE", tp.topic))
                    raise FailoverError(
                        f"the log of {tp.topic}-{tp.partition} on {self.alias}: {exc}"
                    ) from None
        return {tp: (v[0], v[1]) for tp, v in ends.items()}

    def alter(self, group: str, offsets: Mapping[TP, int]) -> None:
        """Commit `offsets` for `group` (the broker refuses while the group has members)."""
        partitions = [KafkaTP(t, p, o) for (t, p), o in sorted(offsets.items())]
        self.requests += 1
        future = self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=self.timeout_s
        )[group]
        try:
            result = future.result()
        except Exception as exc:
            self._group_denied(_error_of(exc), group, "READ")
            raise FailoverError(f"committing group {group} on {self.alias}: {exc}") from None
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            tp = failed[0]
            raise_if_denied(tp.error, self.conf, topic=("READ", tp.topic), group=("READ", group))
            raise FailoverError(
                f"committing group {group} on {self.alias}: {tp.topic}-{tp.partition}: "
                f"{tp.error.str()}"
            )

    def delete_group(self, group: str) -> None:
        """Remove an empty group and all its commits (Kafka has no admin call here for one
        partition's commit: an exact undo removes the group, then commits the before-image)."""
        self.requests += 1
        future = self.admin.delete_consumer_groups([group], request_timeout=self.timeout_s)[group]
        try:
            future.result()
        except Exception as exc:
            self._group_denied(_error_of(exc), group, "DELETE")
            raise FailoverError(f"removing group {group} on {self.alias}: {exc}") from None


def _error_of(exc: BaseException) -> object:
    """The KafkaError a future's exception carries (or the exception itself)."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], KafkaError) else exc
