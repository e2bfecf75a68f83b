"""The Kafka reads of lag collection (confluent-kafka): ListOffsets, record timestamps, tails.

- `list_offsets`: ONE admin ListOffsets call for many partitions; librdkafka sends one request
  per partition leader, never one per partition. Specs may differ per partition (latest,
  earliest, max-timestamp share the request), the isolation level is per call. `end_offsets`
  is the same call for log ends only, returning plain ints (the 100k-partition hot path);
- `TimestampFetcher`: the timestamp of the record at a given offset, for lagging partitions only,
  `concurrency` partitions assigned at a time with small fetch sizes, results cached by the
  caller per (partition, offset);
- `Tail`: a group-less reader (assign, no group join, no commits) of every partition of a topic,
  from the beginning, that on each call reads what is available now.

Consumer groups are read elsewhere (`offsetd.lag.groups`, aiokafka): librdkafka's requests to a
group coordinator can take the process down across a broker restart.
"""

from __future__ import annotations

import concurrent.futures
import operator
import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]
from confluent_kafka.cimpl import _AdminClientImpl

from offsetd.adminclient import connected_admin
from offsetd.kafkaaccess import raise_if_denied

# The C half of AdminClient: one call, one future for the whole request (see _list_offsets_raw).
_C_LIST_OFFSETS: Any = getattr(_AdminClientImpl, "list_offsets", None)

__all__ = [
    "EndOffsets",
    "OffsetSpec",
    "Position",
    "Tail",
    "TimestampFetcher",
    "end_offsets",
    "list_offsets",
    "topic_partitions",
]

TP = tuple[str, int]
OffsetSpec: Any = _OffsetSpec


@dataclass(frozen=True, slots=True)
class Position:
    offset: int
    timestamp_ms: int  # -1 when the spec gives none (latest, earliest)


def _c_list_offsets(
    admin: AdminClient,
    request: list[TopicPartition],
    level: Any,
    timeout_s: float,
    batch: int | None,
) -> list[Any]:
    """The answer (ListOffsetsResultInfo or KafkaError) to each of `request`, in its order.

    One C call per `batch` partitions (all in one call when None), every call in flight at once:
    librdkafka sends one request per partition leader and call. It merges each leader's answer
    into the call's result by a linear search per partition (`rd_kafka_ListOffsets_response_merge`
    in librdkafka 2.16), so one call costs O(n^2) CPU: 0.6 s at 10k partitions, about a minute
    at 100k. `lag.list_offsets_batch` trades requests per broker (ceil(n / batch)) for that CPU.
    """
    size = batch or len(request) or 1
    pending: list[tuple[list[TopicPartition], concurrent.futures.Future[Any]]] = []
    for start in range(0, len(request), size):
        part = request[start : start + size] if batch else request
        future: concurrent.futures.Future[dict[TopicPartition, Any]] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        _C_LIST_OFFSETS(
            admin, part, future, isolation_level_value=level.value, request_timeout=timeout_s
        )
        pending.append((part, future))
    answers: list[Any] = []
    for part, future in pending:
        try:
            result = future.result()
        except KafkaException as exc:  # the whole call failed: every partition of it did
            answers.extend([exc.args[0] if exc.args else exc] * len(part))
            continue
        before = len(answers)
        try:
            answers.extend(map(result.__getitem__, part))  # in C: the 100k-partition path
        except KeyError:  # an answer without some partition: those failed, not the call
            del answers[before:]
            answers.extend(result.get(tp, _NO_ANSWER) for tp in part)
    return answers


_NO_ANSWER = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "no answer for this partition")


def _list_offsets_raw(
    admin: Any,
    specs: Mapping[TP, Any],
    read_committed: bool,
    timeout_s: float,
    batch: int | None = None,
) -> Iterable[tuple[TP, Any]]:
    """((topic, partition), ListOffsetsResultInfo or KafkaError) for every partition.

    confluent-kafka's public `AdminClient.list_offsets` wraps its one C call in one
    `concurrent.futures.Future` per partition (a Condition and a lock each, resolved one by one
    from a callback): at 100k partitions that alone was about half of a lag cycle's CPU. The C
    call takes the request as a list and resolves a single future with the whole dict, so a real
    AdminClient is asked that way (`_c_list_offsets`); anything else (a wrapper, a test double)
    gets the public API.
    """
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    if _C_LIST_OFFSETS is not None and isinstance(admin, AdminClient):
        keys = list(specs)
        request = [TopicPartition(t, p, int(specs[t, p]._value)) for t, p in keys]
        return zip(keys, _c_list_offsets(admin, request, level, timeout_s, batch), strict=True)
    futures = admin.list_offsets(
        {TopicPartition(t, p): spec for (t, p), spec in specs.items()},
        isolation_level=level,
        request_timeout=timeout_s,
    )
    out: list[tuple[TP, Any]] = []
    for tp, done in futures.items():
        try:
            out.append(((tp.topic, tp.partition), done.result()))
        except KafkaException as exc:
            out.append(((tp.topic, tp.partition), exc.args[0] if exc.args else exc))
    return out


def list_offsets(
    admin: AdminClient,
    specs: Mapping[TP, Any],
    *,
    read_committed: bool = True,
    timeout_s: float = 30.0,
    batch: int | None = None,
) -> tuple[dict[TP, Position], dict[TP, str]]:
    """Positions for every partition of `specs` (one call per `batch` partitions, all in one
    call by default); failures per partition, not raised."""
    if not specs:
        return {}, {}
    found: dict[TP, Position] = {}
    failed: dict[TP, str] = {}
    for key, info in _list_offsets_raw(admin, specs, read_committed, timeout_s, batch):
        if isinstance(info, (KafkaError, Exception)):
            failed[key] = str(info)
        else:
            found[key] = Position(int(info.offset), int(info.timestamp))
    return found, failed


_OFFSET = operator.attrgetter("offset")
_RESULT = operator.methodcaller("result")


class EndOffsets:
    """Log ends (the LSO with `read_committed`) of many partitions in one call, as plain ints.

    The request (100k `TopicPartition`s at 100k partitions) is built once and reused while the
    set of partitions stays the same, and the answer is turned into `{(topic, partition): end}`
    by C-level maps; a partition that failed (rare) sends the conversion down a per-partition
    path that reports it.
    """

    def __init__(self, batch: int | None = None) -> None:
        self.batch = batch  # partitions per call (see _c_list_offsets); None: one call
        self._keys: frozenset[TP] = frozenset()
        self._order: list[TP] = []
        self._request: list[TopicPartition] = []
        self._specs: dict[TopicPartition, Any] = {}

    def __call__(
        self,
        admin: AdminClient,
        partitions: Collection[TP],
        *,
        read_committed: bool = True,
        timeout_s: float = 30.0,
    ) -> tuple[dict[TP, int], dict[TP, str]]:
        if not partitions:
            return {}, {}
        direct = _C_LIST_OFFSETS is not None and isinstance(admin, AdminClient)
        if partitions != self._keys:
            latest = OffsetSpec.latest()
            self._keys = frozenset(partitions)
            self._order = list(partitions)
            self._request, self._specs = [], {}
            if direct:  # the C call's form: the spec in the offset field
                self._request = [TopicPartition(t, p, int(latest._value)) for t, p in self._order]
            else:
                self._specs = dict.fromkeys((TopicPartition(t, p) for t, p in self._order), latest)
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        if direct:
            answers = _c_list_offsets(admin, self._request, level, timeout_s, self.batch)
        else:  # anything else (a wrapper, a test double): the public API, a future each
            futures = admin.list_offsets(
                self._specs, isolation_level=level, request_timeout=timeout_s
            )
            answers = []
            for done in map(futures.__getitem__, self._specs):
                try:
                    answers.append(done.result())
                except KafkaException as exc:
                    answers.append(exc.args[0] if exc.args else exc)
        try:
            return dict(zip(self._order, map(_OFFSET, answers), strict=True)), {}
        except AttributeError:  # some partitions failed: a KafkaError has no offset
            found: dict[TP, int] = {}
            failed: dict[TP, str] = {}
            for key, info in zip(self._order, answers, strict=True):
                if isinstance(info, (KafkaError, Exception)):
                    failed[key] = str(info)
                else:
                    found[key] = info.offset
            return found, failed


def end_offsets(
    admin: AdminClient,
    partitions: Collection[TP],
    *,
    read_committed: bool = True,
    timeout_s: float = 30.0,
) -> tuple[dict[TP, int], dict[TP, str]]:
    """One `EndOffsets` call (a collector keeps an `EndOffsets` per cluster to reuse requests)."""
    return EndOffsets()(admin, partitions, read_committed=read_committed, timeout_s=timeout_s)


def topic_partitions(admin: AdminClient, topic: str, timeout_s: float = 10.0) -> list[int]:
    """The partitions of one topic; empty if it does not exist."""
    meta = admin.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None:
        return []
    return sorted(meta.partitions)


def _consumer(conf: Mapping[str, str], **extra: Any) -> Consumer:
    return Consumer(
        {
            **conf,
            "group.id": f"offsetd-lag-{uuid.uuid4().hex}",  # never joined: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


class TimestampFetcher:
    """Reads the timestamp of one record per partition, `concurrency` partitions at a time."""

    def __init__(self, conf: Mapping[str, str], *, concurrency: int = 256) -> None:
        self.concurrency = concurrency
        self._consumer = _consumer(
            conf,
            **{
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.max.bytes": 1 << 20,
                "max.partition.fetch.bytes": 16 << 10,  # one record's timestamp is all we need
                "fetch.wait.max.ms": 50,
                "queued.max.messages.kbytes": 16 << 10,  # bounds what `concurrency` may buffer
            },
        )

    def fetch(self, wanted: Mapping[TP, int], timeout_s: float = 10.0) -> dict[TP, Position | None]:
        """The first record at or after each wanted offset (its real offset and timestamp).

        None for a partition that has no record a consumer would see from there to its end
        (`read_committed`: only transaction markers or aborted records are left); a partition
        whose answer did not come within `timeout_s` is absent.

        `consume` returns early only when it has `num_messages`; a lagging partition often
        holds fewer records than asked, so each wait is kept short (50 ms, librdkafka's fetch
        wait): with 200 ms waits and 32 partitions at a time, 5,000 lagging partitions took
        longer than 6 cycles (bench/README.md).
        """
        out: dict[TP, Position | None] = {}
        items = sorted(wanted.items())
        deadline = time.monotonic() + timeout_s
        for start in range(0, len(items), self.concurrency):
            if time.monotonic() > deadline:
                break
            chunk = dict(items[start : start + self.concurrency])
            self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in chunk.items()])
            pending = set(chunk)
            while pending and time.monotonic() < deadline:
                for msg in self._consumer.consume(num_messages=len(pending), timeout=0.05):
                    key = (cast(str, msg.topic()), cast(int, msg.partition()))
                    if key not in pending:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            out[key] = None  # nothing a consumer sees up to the end
                            pending.discard(key)
                        continue
                    kind, ts = msg.timestamp()
                    if kind != 0:
                        out[key] = Position(cast(int, msg.offset()), int(ts))
                    pending.discard(key)
            self._consumer.unassign()
        return out

    def close(self) -> None:
        self._consumer.close()


class Tail:
    """Every partition of `topic` from the beginning; `read()` returns what is there now."""

    def __init__(self, conf: Mapping[str, str], topic: str, *, batch: int = 10_000) -> None:
        self.topic = topic
        self._batch = batch
        self._conf = dict(conf)
        self._consumer = _consumer(
            conf,
            **{
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.queue.backoff.ms": "10",
                "fetch.wait.max.ms": "100",
            },
        )
        self._admin: AdminClient | None = None
        self._next: dict[int, int] = {}  # the offset after the last record read, per partition
        self.last_error: str | None = None

    def _assign(self) -> bool:
        """Assign every partition at its log start, looked up first: a partition assigned at
        OFFSET_BEGINNING is looked up by the consumer itself and joins the fetches only after
        the long poll in flight returns (up to `fetch.wait.max.ms`, 500 ms, later)."""
        if self._next:
            return True
        # The admin client's metadata: it is connected already (the consumer's first metadata
        # call waits about 50 ms for its own connection).
        meta = self._admin_client().list_topics(self.topic, timeout=10).topics.get(self.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return False
        starts = self._offsets(sorted(meta.partitions), OffsetSpec.earliest())
        self._next = {p: starts.get(p, 0) for p in sorted(meta.partitions)}
        self._consumer.assign(
            [TopicPartition(self.topic, p, starts.get(p, OFFSET_BEGINNING)) for p in self._next]
        )
        return True

    def _offsets(self, partitions: Iterable[int], spec: Any) -> dict[int, int]:
        """One ListOffsets for the partitions (read_committed: `latest` is the LSO)."""
        try:
            found, _failed = list_offsets(
                self._admin_client(),
                dict.fromkeys(((self.topic, p) for p in partitions), spec),
                timeout_s=10.0,
            )
        except KafkaException as exc:  # unknown: those partitions wait for the end event
            self.last_error = str(exc.args[0] if exc.args else exc)
            return {}
        return {p: pos.offset for (_t, p), pos in found.items()}

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            # a producer-type client: its metadata requests could create a missing topic
            self._admin = connected_admin({**self._conf, "allow.auto.create.topics": "false"})
        return self._admin

    def read(self, budget_s: float = 5.0) -> list[Message]:
        """The records up to each partition's end as of this call.

        The ends come from one ListOffsets at the start, and a partition is done once a record
        at or past its end - 1 was read, or the consumer reports its end (a log that ends in
        transaction markers, or whose records were all deleted). Waiting for that end-of-
        partition event alone cost a long-poll fetch (`fetch.wait.max.ms`, 500 ms) per read:
        most of the time of a one-shot `offsetd lag`. A partition whose end is unknown (the
        ListOffsets failed) waits for the event.
        """
        if not self._assign():
            return []
        ends = self._offsets(self._next, OffsetSpec.latest())
        pending = {p for p in self._next if ends.get(p, 1 << 62) > self._next[p]}
        out: list[Message] = []
        deadline = time.monotonic() + budget_s
        while pending and time.monotonic() < deadline:
            # `consume` waits its whole timeout unless it fills the batch: keep the waits short
            for msg in self._consumer.consume(num_messages=self._batch, timeout=0.02):
                partition = cast(int, msg.partition())
                err = msg.error()
                if err is None:
                    out.append(msg)
                    self._next[partition] = cast(int, msg.offset()) + 1
                    if self._next[partition] >= ends.get(partition, 1 << 62):
                        pending.discard(partition)
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(partition)
                else:
                    # a missing ACL never heals by waiting: say so now, not after the budget
                    raise_if_denied(err, self._conf, topic=("READ", self.topic))
                    self.last_error = err.str()
        return out

    def close(self) -> None:
        self._consumer.close()
