"""Durable progress of remediations: one compacted topic, one record per saga, rewritten per step.

A faust Table is not used on purpose: its changelog writes are not awaited, so a crash could lose
the record of a step that already acted. Here every progress record is produced with acks=all and
awaited before the step it announces runs (or after the step it confirms), and the whole topic is
read back on start, so a restarted daemon knows exactly where each remediation stopped.

The key is the remediation's identity: `<connect cluster>/<connector>/<topic>/<partition>/<offset>`
for a skip (so the same record is never skipped twice), `locate/<cluster>/<connector>` for the
temporary one-record-batch override while a record is being located. Each record carries an
owner epoch: whoever resumes a saga raises it, and an older owner that sees a newer epoch stops
before its next step instead of acting twice.

Each record also names its owner process (`owner`, from `worker_identity`). When that process
provably died (`owner_is_dead`: its liveness beacon, an abstract Unix socket it holds for its
whole life, can be bound again in its own network namespace on its own kernel boot), a restarted
daemon resumes the saga at once instead of waiting for the consumer group to expire the dead
member: a connector must not stay STOPPED for a session timeout after a crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from offsetd.errors import OffsetdError
from offsetd.topics import ensure_compacted_topic

__all__ = [
    "STEPS",
    "TERMINAL",
    "SagaRecord",
    "SagaStore",
    "SagaStoreError",
    "Status",
    "Superseded",
    "beacon_of",
    "ensure_topic",
    "hold_beacon",
    "locate_key",
    "owner_is_dead",
    "skip_key",
]

Status = Literal["running", "done", "aborted", "left_stopped", "failed", "superseded"]
TERMINAL: tuple[Status, ...] = ("done", "aborted", "left_stopped", "failed", "superseded")

# The skip saga's steps, in order. Progress names the last step that completed.
STEPS = ("recheck", "quarantine", "snapshot", "stop", "patch", "resume", "verify")


class SagaStoreError(OffsetdError):
    exit_code = 43


class Superseded(OffsetdError):
    """A newer owner took this saga over (rebalance): this one must not act again."""

    exit_code = 44


@dataclass(frozen=True)
class SagaRecord:
    """One remediation's progress. JSON in the sagas topic; no secrets, no connector configs."""

    key: str
    kind: str  # "skip" | "locate"
    connect_cluster: str
    connector: str
    decision_id: str
    rule: str
    epoch: int
    owner: str
    status: Status = "running"
    completed: tuple[str, ...] = ()  # steps done, in order
    record: dict[str, Any] | None = None  # topic, partition, offset of the skipped record
    located_by: str | None = None
    quarantine_mark: dict[str, int] | None = None  # partition, offset: where the copy must land
    quarantine_ref: dict[str, Any] | None = None
    snapshot_id: str | None = None
    prior_state: str | None = None
    prior_tasks: int = 0
    connector_kind: str | None = None
    connector_class: str | None = None
    patch: tuple[dict[str, Any], ...] = ()  # the offsets entries written (JSON form)
    override: dict[str, Any] | None = None  # locate: the original max.poll.records override
    error: str | None = None
    started_at_ms: int = 0
    updated_at_ms: int = 0
    stopped_at_ms: int | None = None  # when offsetd stopped the connector (time STOPPED metric)
    resumed_at_ms: int | None = None
    events: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # step log for the audit

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def done(self, step: str) -> bool:
        return step in self.completed

    def to_json(self) -> bytes:
        data = asdict(self)
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SagaRecord:
        data = json.loads(raw)
        data["completed"] = tuple(data.get("completed", ()))
        data["patch"] = tuple(data.get("patch", ()))
        data["events"] = tuple(data.get("events", ()))
        return cls(**data)

    def step_done(self, step: str, now_ms: int, **changes: Any) -> SagaRecord:
        note = {"step": step, "at_ms": now_ms, **{k: v for k, v in changes.items() if k == "error"}}
        return replace(
            self,
            completed=(*self.completed, step),
            updated_at_ms=now_ms,
            events=(*self.events, note),
            **changes,
        )

    def ended(self, status: Status, now_ms: int, error: str | None = None) -> SagaRecord:
        note = {"step": f"end:{status}", "at_ms": now_ms, **({"error": error} if error else {})}
        return replace(
            self,
            status=status,
            error=error or self.error,
            updated_at_ms=now_ms,
            events=(*self.events, note),
        )


def skip_key(connect_cluster: str, connector: str, topic: str, partition: int, offset: int) -> str:
    return f"{connect_cluster}/{connector}/{topic}/{partition}/{offset}"


def locate_key(connect_cluster: str, connector: str) -> str:
    return f"locate/{connect_cluster}/{connector}"


def ensure_topic(conf: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> None:
    """Create the sagas topic: compacted, one partition (few records, read whole on start)."""
    ensure_compacted_topic(
        conf, topic, what="sagas topic", error=SagaStoreError, timeout_s=timeout_s
    )


class SagaStore:
    """The sagas topic, read whole on `start` and kept current by `catch_up`.

    `put` returns only once the record is fully acknowledged (acks=all, idempotent producer).
    """

    def __init__(self, conf: Mapping[str, str], topic: str) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._producer = Producer(
            {**self._conf, "acks": "all", "enable.idempotence": "true", "linger.ms": "0"}
        )
        self._consumer: Consumer | None = None
        self._position = 0
        self._records: dict[str, SagaRecord] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        ensure_topic(self._conf, self.topic)
        self._consumer = Consumer(
            {
                **self._conf,
                "group.id": f"{self.topic}-reader",  # never used to commit: assign() only
                "enable.auto.commit": "false",
                "enable.partition.eof": "false",
            }
        )
        # Assigned only while catching up: an assigned, idle consumer keeps a fetch waiting at
        # the broker (fetch.wait.max.ms, 500 ms), and the watermark query that starts every
        # catch-up would queue behind it on the same connection, before every saga step.
        self._position = 0
        self.catch_up_sync()

    def close(self) -> None:
        self._producer.flush(10)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def get(self, key: str) -> SagaRecord | None:
        return self._records.get(key)

    def all(self) -> list[SagaRecord]:
        return list(self._records.values())

    def unfinished(self) -> list[SagaRecord]:
        return [r for r in self._records.values() if not r.terminal]

    async def catch_up(self) -> None:
        await asyncio.to_thread(self.catch_up_sync)

    def catch_up_sync(self, timeout_s: float = 30.0) -> None:
        """Read what others (or an earlier life of this process) wrote since the last read."""
        consumer = self._consumer
        if consumer is None:
            raise SagaStoreError("the saga store was not started")
        with self._lock:
            tp = TopicPartition(self.topic, 0)
            _low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
            if self._position >= high:
                return
            deadline = time.monotonic() + timeout_s
            consumer.assign([TopicPartition(self.topic, 0, self._position)])
            try:
                while self._position < high:
                    if time.monotonic() > deadline:
                        raise SagaStoreError(
                            f"could not read the sagas topic {self.topic} to its end within "
                            f"{timeout_s:g} s (at {self._position} of {high})"
                        )
                    # consume(n) returns once n records are there or at its timeout: ask for no
                    # more than are left (a compacted gap at the end costs one timeout).
                    wanted = max(1, min(500, high - self._position))
                    for msg in consumer.consume(wanted, timeout=1.0):
                        if msg.error() is not None:
                            continue
                        self._position = (msg.offset() or 0) + 1
                        self._apply(msg)
            finally:
                consumer.unassign()

    def _apply(self, msg: Message) -> None:
        key, value = msg.key(), msg.value()
        if not isinstance(key, bytes):
            return
        if value is None:
            self._records.pop(key.decode(), None)
            return
        try:
            record = SagaRecord.from_json(value)
        except (ValueError, TypeError):
            return  # not ours; a malformed progress record must not stop recovery of the rest
        self._keep(record)

    def _keep(self, record: SagaRecord) -> None:
        """The newest record of a saga, except that a lower epoch never replaces a higher one.

        An owner that was taken over may still write the step it was in the middle of, after
        the takeover: its record must not hide the newer owner's epoch, or neither would see
        that it is not alone (`check_owner`).
        """
        current = self._records.get(record.key)
        if current is None or current.epoch <= record.epoch:
            self._records[record.key] = record

    async def put(self, record: SagaRecord) -> SagaRecord:
        await asyncio.to_thread(self._put_sync, record)
        return record

    def _put_sync(self, record: SagaRecord, timeout_s: float = 30.0) -> None:
        errors: list[str] = []
        offsets: list[int] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err.str())
            elif msg.offset() is not None:
                offsets.append(int(msg.offset() or 0))

        self._producer.produce(
            self.topic, key=record.key.encode(), value=record.to_json(), on_delivery=on_delivery
        )
        remaining = self._producer.flush(timeout_s)
        if remaining or errors:
            raise SagaStoreError(
                f"progress of {record.key} was not acknowledged by {self.topic}: "
                f"{errors[0] if errors else 'timed out'}"
            )
        with self._lock:
            self._keep(record)
            if offsets and offsets[0] == self._position:
                # Nobody wrote in between: our own record needs no reading back, so the next
                # catch-up (before every step) finds nothing to fetch. A fetch for it would wait
                # for the broker's fetch.wait.max.ms (500 ms) on every step.
                self._position = offsets[0] + 1

    async def check_owner(self, record: SagaRecord) -> None:
        """Before a step: stop if a newer owner has taken this saga over.

        Two owners that took it over at once hold the same epoch: the one whose record was
        written last goes on, the other stops here.
        """
        await self.catch_up()
        current = self._records.get(record.key)
        if current is not None and (
            current.epoch > record.epoch
            or (current.epoch == record.epoch and current.owner != record.owner)
        ):
            raise Superseded(
                f"saga {record.key} was taken over by {current.owner} (epoch {current.epoch}, "
                f"this worker's {record.epoch}); this worker stops acting on it"
            )


# -- the owner's liveness: a beacon only a live process holds -----------------------------------

_BEACON_PREFIX = "offsetd-saga-owner/"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_TAG = re.compile(r"#(?P<nonce>[0-9a-f]{16}) on (?P<boot>[0-9a-f-]{36})/net:\[(?P<net>[0-9]+)\]$")
_held_beacons: list[socket.socket] = []  # never closed: the kernel releases them at exit only


def _place() -> tuple[str, str] | None:
    """(kernel boot id, network namespace inode) of this process, or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open(_BOOT_ID) as f:
            boot = f.read().strip()
        net = os.readlink("/proc/self/ns/net")  # "net:[4026531840]"
    except OSError:
        return None
    inode = net.removeprefix("net:[").removesuffix("]")
    if not re.fullmatch(r"[0-9a-f-]{36}", boot) or not inode.isdigit():
        return None
    return boot, inode


def _beacon_socket(nonce: str) -> socket.socket | None:
    """The beacon named by `nonce`, bound; None when a live process holds it (EADDRINUSE)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"\0{_BEACON_PREFIX}{nonce}")  # abstract: no file, one name per net namespace
    except OSError:
        sock.close()
        return None
    return sock


def hold_beacon() -> str:
    """Bind a new liveness beacon for this process and return the owner tag that names it.

    The tag is `#<nonce>` (unique per process: a restarted container keeps its hostname and may
    keep PID 1, so `user@host/pid` alone names the dead process and its successor alike), plus,
    on Linux, ` on <boot id>/net:[<inode>]`: where the beacon can be looked for. The beacon is
    bound before the tag exists and released only by the kernel when the process ends (SIGKILL
    and OOM kills too), so a saga record can never name a beacon that was not held.
    """
    place = _place()
    for _ in range(3):
        nonce = secrets.token_hex(8)
        if place is None:
            return f"#{nonce}"
        sock = _beacon_socket(nonce)
        if sock is not None:
            _held_beacons.append(sock)
            return f"#{nonce} on {place[0]}/net:[{place[1]}]"
    return f"#{secrets.token_hex(8)}"  # no beacon: this process's sagas wait for the group


def beacon_of(owner: str) -> tuple[str, str, str] | None:
    """(nonce, boot id, network namespace inode) of the beacon an owner names, if it names one."""
    found = _TAG.search(owner)
    return None if found is None else (found["nonce"], found["boot"], found["net"])


def owner_is_dead(owner: str) -> bool:
    """True only when the process named by `owner` has provably ended.

    Proof: the owner's beacon (see `hold_beacon`) is on this kernel boot and in this network
    namespace, and it can be bound now. The owner held it from before it wrote its first saga
    record until its end, and nothing else binds that name, so it is free only once the owner is
    gone. This holds for a daemon restarted in place — the same host, the same Kubernetes pod
    (its containers share the pod's network namespace across restarts), `--network host` —
    whatever its PID and hostname. Anything else (another host, a new pod, an owner from before
    beacons, a beacon still held) is not proven: the saga waits for the consumer group then.
    """
    beacon = beacon_of(owner)
    here = _place()
    if beacon is None or here is None or beacon[1:] != here:
        return False
    sock = _beacon_socket(beacon[0])
    if sock is None:
        return False  # held: the owner (or something it forked) still runs
    sock.close()
    return True
