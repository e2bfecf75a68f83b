"""`KafkaSnapshotStore`: snapshots in one compacted, single-partition topic (the daemon's store).

A snapshot is written as chunk records (the zlib-compressed images, split into pieces of at most
`chunk_size` bytes), then a small header record keyed by the id (metadata, a summary for history
listings, the chunk count and checksums). Chunk keys are `<id>/chunk/<set>/<n>`, where `<set>`
is derived from the compressed bytes: a rewrite with different images writes a *new* set, so
the previous header and its chunks stay readable until the new header is acknowledged; only
then is the old set tombstoned. Every prefix of the topic is therefore consistent: a reader (or
a writer that crashed half-way) never pairs a header with chunks of another version.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from offsetd.kafkaaccess import raise_if_denied
from offsetd.offsets.snapshots.errors import (
    Malformed,
    SnapshotCorrupt,
    SnapshotNotFound,
    SnapshotStoreError,
)
from offsetd.offsets.snapshots.format import (
    DEFAULT_CHUNK_SIZE,
    chunk_key,
    dumps,
    int_field,
    pack_snapshot,
    read_header,
    unpack_snapshot,
)
from offsetd.offsets.snapshots.kafka_scan import Scan, scan_topic
from offsetd.offsets.snapshots.kafka_topic import SnapshotTopic, reason
from offsetd.offsets.snapshots.records import (
    Snapshot,
    SnapshotInfo,
    info_of,
    is_snapshot_id,
    str_field,
)
from offsetd.offsets.snapshots.store import Catalogue, SnapshotListing

__all__ = ["DEFAULT_TOPIC", "KafkaSnapshotStore"]

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "offsetd.snapshots"


class KafkaSnapshotStore(SnapshotListing):
    """Snapshots in a compacted single-partition topic, chunked and zlib-compressed.

    `conf` is a librdkafka configuration (e.g. `KafkaCluster.client_config()`); it is only
    handed to clients, never shown. The topic is created on the first `put` if missing
    (1 partition, `cleanup.policy=compact`, replication factor min(3, brokers) unless given);
    an existing topic that is not compacted or has several partitions is refused.
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str = DEFAULT_TOPIC,
        *,
        replication_factor: int | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        timeout_s: float = 30.0,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive ({chunk_size})")
        self._conf = dict(conf)
        self.topic = topic
        self.replication_factor = replication_factor
        self.chunk_size = chunk_size
        self.timeout_s = timeout_s
        self._producer: Producer | None = None
        self._put_lock = threading.Lock()
        self._topic = SnapshotTopic(
            self._conf, topic, replication_factor=replication_factor, timeout_s=timeout_s
        )
        # id -> (chunk set, count) of the latest header this store read or wrote: the set to
        # tombstone once a rewrite with other chunks is acknowledged. Only sets a header
        # referenced: chunks without a header may be another writer's put in progress.
        self._referenced: dict[str, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f"KafkaSnapshotStore(topic={self.topic!r})"

    def __enter__(self) -> KafkaSnapshotStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.timeout_s)

    @property
    def _where(self) -> str:
        return f"Kafka topic {self.topic}"

    def ensure_topic(self, *, create: bool = True) -> bool:
        """Check (and with `create`, create) the topic; False if it is missing. Cached."""
        return self._topic.ensure(create=create)

    # -- writing ------------------------------------------------------------------------------

    def put(self, snapshot: Snapshot) -> None:
        # One put at a time: a store is shared by the daemon's concurrent sagas (in threads).
        with self._put_lock:
            self._put(snapshot)

    def _put(self, snapshot: Snapshot) -> None:
        self.ensure_topic(create=True)
        header, chunks = pack_snapshot(snapshot, self.chunk_size)
        chunk_set = str(header["chunk_set"])
        # Chunks first and acknowledged, then the header: a header never precedes its chunks.
        self._produce(
            [(chunk_key(snapshot.id, chunk_set, i), chunk) for i, chunk in enumerate(chunks)],
            f"snapshot {snapshot.id}",
        )
        self._produce([(snapshot.id, dumps(header, snapshot.id))], f"snapshot {snapshot.id}")
        previous = self._referenced.get(snapshot.id)
        self._referenced[snapshot.id] = (chunk_set, len(chunks))
        stale = []
        if previous is not None and previous[0] != chunk_set:
            stale = [chunk_key(snapshot.id, previous[0], i) for i in range(previous[1])]
        if stale:
            try:
                self._produce([(key, None) for key in stale], f"old chunks of {snapshot.id}")
            except SnapshotStoreError as exc:  # the snapshot is stored; only garbage is left
                log.warning("%s (they are unused and harmless)", exc)

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                {
                    **self._conf,
                    "acks": "all",
                    # Order comes from waiting for every batch (chunks, then header, then
                    # tombstones), and a duplicated record is harmless (same key and value):
                    # idempotence adds nothing but ~0.5 s of producer-id setup per process.
                    "enable.idempotence": "false",
                    "compression.type": "none",  # chunks are compressed already
                    "linger.ms": "5",
                    "message.timeout.ms": str(max(1000, int(self.timeout_s * 1000))),
                    "allow.auto.create.topics": "false",
                    # errors only: librdkafka's info lines (BGQUEUE "Purging 1 unserved
                    # events" at close) would go to the stderr of a one-line command
                    "log_level": "3",
                }
            )
        return self._producer

    def _produce(self, records: Sequence[tuple[str, bytes | None]], what: str) -> None:
        """Produce to partition 0 and wait until every record is acknowledged by all ISRs."""
        producer = self._get_producer()
        errors: builtins.list[str] = []
        acked = 0

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal acked
            if err is not None:
                errors.append(str(err.str()))
            else:
                acked += 1

        deadline = time.monotonic() + self.timeout_s
        try:
            for key, value in records:
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            key=key.encode(),
                            value=value,
                            partition=0,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        if time.monotonic() > deadline:
                            raise
                        producer.poll(0.1)
            remaining = producer.flush(self.timeout_s + 5)
        except (KafkaException, BufferError) as exc:
            self._drop_producer()
            raise SnapshotStoreError(
                f"cannot write {what} to {self._where}: {reason(exc)}"
            ) from None
        if remaining or errors or acked != len(records):
            self._drop_producer()
            if errors:
                raise_if_denied(errors[0], self._conf, topic=("WRITE", self.topic))
            detail = errors[0] if errors else f"{len(records) - acked} not acknowledged in time"
            raise SnapshotStoreError(
                f"cannot write {what} to {self._where}: {len(records) - acked} of "
                f"{len(records)} records failed ({detail})"
            )

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                producer.purge()
                producer.flush(0)

    # -- reading ------------------------------------------------------------------------------

    def get(self, snapshot_id: str) -> Snapshot:
        if not is_snapshot_id(snapshot_id) or not self.ensure_topic(create=False):
            raise SnapshotNotFound(snapshot_id, self._where)
        prefix = f"{snapshot_id}/chunk/"
        scan = self._scan(lambda key: key.startswith(prefix))
        raw = scan.headers.get(snapshot_id)
        if raw is None:
            raise SnapshotNotFound(snapshot_id, self._where)
        where = f"snapshot {snapshot_id} in {self._where}"
        try:
            header = read_header(raw)
        except Malformed as exc:
            raise SnapshotCorrupt(f"{where} is corrupt: {exc}") from None
        return self._assemble(snapshot_id, header, scan)

    def _catalogue(self, *, images: bool) -> Catalogue:
        if not self.ensure_topic(create=False):
            return [], self._get_info
        # One read keeps the chunks of every snapshot (with `images`): only the selected ones
        # are decompressed.
        scan = self._scan(lambda _key: images)
        headers = self._headers(scan)

        def load(info: SnapshotInfo) -> Snapshot:
            return self._assemble(info.id, headers[info.id][1], scan)

        return [info for info, _ in headers.values()], load

    def _get_info(self, info: SnapshotInfo) -> Snapshot:
        return self.get(info.id)

    def _headers(self, scan: Scan) -> dict[str, tuple[SnapshotInfo, dict[str, Any]]]:
        """The readable headers of a scan; unreadable ones are logged and left out."""
        out = {}
        for snapshot_id, raw in scan.headers.items():
            try:
                header = read_header(raw)
                info = info_of(header)
                if info.id != snapshot_id:
                    raise Malformed(f"it holds snapshot {info.id!r}")
            except Malformed as exc:
                log.warning(
                    "skipping unreadable snapshot header %r in %s: %s",
                    snapshot_id,
                    self._where,
                    exc,
                )
                continue
            out[snapshot_id] = (info, header)
        return out

    def _assemble(self, snapshot_id: str, header: dict[str, Any], scan: Scan) -> Snapshot:
        where = f"snapshot {snapshot_id} in {self._where}"
        try:
            chunk_set = str_field(header, "chunk_set")
            count = int_field(header, "chunks")
        except Malformed as exc:
            raise SnapshotCorrupt(f"{where} is corrupt: {exc}") from None
        self._referenced[snapshot_id] = (chunk_set, count)
        chunks = [scan.chunks.get(chunk_key(snapshot_id, chunk_set, i)) for i in range(count)]
        return unpack_snapshot(header, chunks, where)

    def _scan(self, keep_chunk: Callable[[str], bool]) -> Scan:
        return scan_topic(self._conf, self.topic, self.timeout_s, keep_chunk)
