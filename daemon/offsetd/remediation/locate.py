"""Locate the record a FAILED sink task died on, exactly, or say why it cannot be done.

A sink's committed offset C is only where the failed *batch* started: records C..N-1 before the
poison record N were converted but never delivered (reference/connect-offsets.md §6), so skipping
from C loses good records. The record is located, in this order:

1. the decision names it (`record_status == "exact"`: the DLQ's `__connect.errors.*` headers);
2. one-record batches: the connector is reconfigured with `consumer.override.max.poll.records=1`
   (when the worker's override policy allows it; asked first through config/validate, which
   changes nothing), its failed tasks are restarted, and once a task is seen alive and then
   FAILED again, every record before the poison one has been delivered and committed on its own,
   so the committed offset *is* the failing record. The original config is put back afterwards
   whatever happened, and compared;
3. a rule-supplied check (`offsetd.recordchecks`) of the record at C: C is the poison
   record only if it fails the check; a first failing record after C means the records between
   were never delivered (`undelivered_prefix`), and nothing is located.

A partition the sink has committed nothing on yet (a new sink whose first record is poison) has
no committed offset to read: before its task is restarted the consumer's own start there is
written as the group's offset (`offsetd.remediation.sink_start`: the log start for `earliest`,
the log end when the failed run began for `latest`), so the restart begins where the failed run
did, and the answer says which start it used.

A task reading several partitions cannot say which one failed; a partition can be ruled out only
when its committed offset is already at its end (no record left to fail on). If more than one
remains, the answer is `ambiguous_partition`. In doubt the answer is always NotLocated: not
acting loses nothing, a wrong skip loses a good record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient, ConnectorState
from offsetd.engine.decision import Decision
from offsetd.errors import ConfigError, ConnectBusy, ConnectUnavailable, OffsetdError
from offsetd.events.models import RecordRef
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, OffsetEntry, connector_kind
from offsetd.recordchecks import (
    KeyMatches,
    NotJson,
    TooLarge,
    ValueMatches,
    describe,
    fails,
)
from offsetd.remediation.records import RecordUnavailable, read_records, subscribed_watermarks
from offsetd.remediation.sink_start import (
    Start,
    StartNotPinned,
    effective_reset,
    pin_starts,
    pinned_partitions,
    start_of,
    task_run_started_ms,
)
from offsetd.remediation.status_trail import StatusTrail

__all__ = [
    "MAX_POLL_RECORDS_KEY",
    "ConfigNotRestored",
    "LocateAnswer",
    "Located",
    "NotLocated",
    "NotLocatedReason",
    "committed_by_partition",
    "locate",
    "pick_partition",
    "pin_latest_start",
    "restore_override",
    "source_config",
]

log = logging.getLogger("offsetd.remediation")

MAX_POLL_RECORDS_KEY = "consumer.override.max.poll.records"
DEFAULT_MAX_POLL_RECORDS = 500  # the Java consumer's default: the largest batch a poll returns
_ALIVE = frozenset({"RUNNING", "RESTARTING", "UNASSIGNED", "PAUSED"})

How = Literal["dlq", "single_record_batches", "check"]
NotLocatedReason = Literal[
    "not_a_sink",  # MirrorSource and other sources: no consumer group, no DLQ
    "not_failed",  # no task is FAILED (any more)
    "override_not_allowed",  # the worker's connector.client.config.override.policy refuses it
    "config_rejected",  # Connect refused the one-record config for another reason
    "failure_did_not_repeat",  # no task failed again within locate_timeout
    "no_committed_offset",  # the failing partition has no committed offset
    "ambiguous_partition",  # several partitions still have records the task may have failed on
    "no_pending_record",  # every partition is committed to its end: nothing left to fail on
    "offset_moved_back",  # the committed offset went below where it was: someone else acts
    "record_unavailable",  # the record at the committed offset cannot be read
    "undelivered_prefix",  # the check names a record after C: records before it never delivered
    "check_passed",  # the records after C all pass the check: it does not explain the failure
    "no_method",  # no DLQ record, one-record batches off, and no check supplied
]
Check = NotJson | ValueMatches | KeyMatches | TooLarge
OverrideHook = Callable[[str | None], Awaitable[None]]


@dataclass(frozen=True)
class Located:
    """The failing record, and which method named it; `delivered`: records of its partition
    the task delivered one by one while it was located (proof that the connector's current
    configuration handles some records: `offsetd.remediation.poison_run`)."""

    record: RecordRef
    how: How
    detail: str = ""
    delivered: int = 0


@dataclass(frozen=True)
class NotLocated:
    """Why the record could not be named exactly; `earlier` holds the methods tried before."""

    reason: NotLocatedReason
    detail: str
    earlier: tuple[NotLocated, ...] = ()

    def describe(self) -> str:
        parts = [f"{n.reason}: {n.detail}" for n in (*self.earlier, self)]
        return "; then ".join(parts)


LocateResult = Located | NotLocated


@dataclass(frozen=True)
class LocateAnswer:
    """What a skip acts on: the record (None: not located, `how` is the reason), how it was
    found, the sentence for the audit, the records delivered while locating it, and whether the
    connector's current configuration is known to handle records (`config_proof`)."""

    record: dict[str, int | str] | None
    how: str
    why: str
    delivered: int = 0
    proof: str | None = None  # why the configuration is known to work; None: no proof
    no_proof: str = ""  # why there is none


class ConfigNotRestored(OffsetdError):
    """The connector's original config could not be put back after one-record batches."""

    exit_code = 41


# -- the entry point ----------------------------------------------------------------------------


async def locate(
    client: ConnectClient,
    decision: Decision,
    settings: Settings,
    *,
    check: Check | None = None,
    single_record_batches: bool = True,
    timeout_s: float | None = None,
    on_override: OverrideHook | None = None,
    poll_s: float = 0.1,
    read_timeout_s: float = 30.0,
    settle_s: float = 20.0,
) -> LocateResult:
    """Locate the failing record of `decision`'s connector (see the module docstring).

    `on_override(original_value)` is awaited right before the one-record override is written,
    with the connector's own `consumer.override.max.poll.records` (None: not set), so the caller
    can persist it and `restore_override` after a crash. `timeout_s` (default
    `remediation.locate_timeout`) bounds the wait for the failure to repeat. `settle_s` bounds
    the wait for a FAILED task first: Connect writes the DLQ record about 0.5 s before it reports
    the task FAILED, and a decision made on the DLQ record gets here in between.
    """
    if decision.record_status == "exact" and decision.record is not None:
        return Located(decision.record, "dlq", "named by the DLQ record's context headers")
    name = decision.connector
    info = await client.info(name)
    if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
        return NotLocated(
            "not_a_sink",
            f"{name} is a {info.type} connector ({info.connector_class}): only sink tasks have a "
            "consumer group whose committed offset points at the failed batch",
        )
    if timeout_s is None:
        timeout_s = settings.remediation.locate_timeout / 1000
    locator = _locator_for(client, decision, info.config, settings, read_timeout_s, poll_s)
    locator.settle_s = settle_s
    earlier: tuple[NotLocated, ...] = ()
    if single_record_batches:
        result = await locator.by_single_record_batches(timeout_s, on_override)
        if isinstance(result, Located) or check is None:
            return result
        earlier = (result,)
    if check is None:
        return NotLocated(
            "no_method",
            "the decision names no record (no DLQ context), one-record batches are off and the "
            "rule supplies no check",
        )
    result = await locator.by_check(check)
    if isinstance(result, NotLocated):
        return NotLocated(result.reason, result.detail, earlier)
    return result


def _locator_for(
    client: ConnectClient,
    decision: Decision,
    config: Mapping[str, str],
    settings: Settings,
    read_timeout_s: float,
    poll_s: float,
) -> _Locator:
    """The locator of a sink: its data cluster, its status trail, its consumer's starts."""
    name = decision.connector
    conf = source_config(settings, decision.connect_cluster, name, config)
    connect = settings.connect_clusters.get(decision.connect_cluster)
    internal = settings.kafka_clusters.get(connect.kafka_cluster) if connect else None
    trail = (
        StatusTrail(internal.client_config(), connect.status_topic, name)
        if connect is not None and internal is not None
        else None
    )
    worker = worker_view(settings, decision.connect_cluster)
    starts = _Starts(
        conf,
        resolve_location(name, config, ConnectorKind.SINK, worker).sink_group or f"connect-{name}",
        connect.consumer_auto_offset_reset if connect is not None else "earliest",
        (internal.client_config(), connect.status_topic)
        if connect is not None and internal is not None
        else None,
        name,
        read_timeout_s,
    )
    return _Locator(client, name, conf, read_timeout_s, poll_s, trail, starts=starts)


async def pin_latest_start(
    client: ConnectClient, decision: Decision, settings: Settings, read_timeout_s: float = 30.0
) -> str | None:
    """Before restarting the failed tasks of a sink whose consumer starts at `latest`: commit
    its start on every partition with records and nothing committed (`sink_start`), so the
    restart does not begin at the log end, past the failed record and everything written since.
    Returns the sentence for the audit (None: nothing to pin). Raises OffsetdError when the
    start cannot be committed."""
    info = await client.info(decision.connector)
    if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
        return None
    connect = settings.connect_clusters.get(decision.connect_cluster)
    worker_reset = connect.consumer_auto_offset_reset if connect is not None else "earliest"
    if effective_reset(info.config, worker_reset) != "latest":
        return None
    failed = _failed_tasks(await client.status(decision.connector))
    if not failed:
        return None
    locator = _locator_for(client, decision, info.config, settings, read_timeout_s, 0.1)
    pinned = await locator.pin_unstarted(failed, info.config)
    if isinstance(pinned, NotLocated):
        raise StartNotPinned(pinned.detail)
    if not pinned:
        return None
    return "pinned where its consumer starts before restarting: " + "; ".join(
        f"{t}-{p} at {s.offset} ({s.how})" for (t, p), s in sorted(pinned.items())
    )


def committed_by_partition(entries: list[OffsetEntry]) -> dict[tuple[str, int], int]:
    """A sink's committed offsets (next to read) by (topic, partition)."""
    return _committed(entries)


def source_config(
    settings: Settings, connect_cluster: str, connector: str, config: Mapping[str, str]
) -> dict[str, str]:
    """Client settings for the cluster a sink reads: `consumer.override.bootstrap.servers`
    (matched to a configured alias for its TLS/SASL), else the Connect cluster's Kafka cluster."""
    worker = worker_view(settings, connect_cluster)
    where = resolve_location(connector, config, ConnectorKind.SINK, worker, settings)
    if where.data_cluster is None:
        raise ConfigError(
            f"the Kafka cluster {connector} reads is unknown: add Connect cluster "
            f"{connect_cluster!r} to offsetd.yaml"
        )
    return where.data_cluster.client_config(settings)


# -- restoring the config -----------------------------------------------------------------------


async def restore_override(
    client: ConnectClient, name: str, original: str | None, *, attempts: int = 3
) -> dict[str, str]:
    """Put `consumer.override.max.poll.records` back to `original` (None: remove it).

    Only that key is changed, on top of the config as it is now, so a change someone made in
    between is kept; when nobody did, this restores the original config exactly. Verified by
    reading the config back; returns it. Raises ConfigNotRestored, naming the connector and the
    key (never a config value, which may hold secrets), if it cannot be done.
    """
    problem = ""
    for attempt in range(attempts):
        try:
            current = await client.config(name)
            target = dict(current)
            if original is None:
                target.pop(MAX_POLL_RECORDS_KEY, None)
            else:
                target[MAX_POLL_RECORDS_KEY] = original
            if target == current:
                return current
            await client.put_config(name, target)
            after = await client.config(name)
            if after == target:
                return after
            problem = "the config read back differs from the one written"
        except (ConnectUnavailable, ConnectBusy) as exc:
            problem = str(exc)
        await asyncio.sleep(0.5 * (attempt + 1))
    raise ConfigNotRestored(
        f"{name} may still have {MAX_POLL_RECORDS_KEY}=1 from locating a poison record; set it "
        f"back to {'its original value' if original is not None else 'unset'} ({problem})"
    )


# -- the methods --------------------------------------------------------------------------------


class _Locator:
    def __init__(
        self,
        client: ConnectClient,
        name: str,
        conf: dict[str, str],
        read_s: float,
        poll_s: float,
        trail: StatusTrail | None = None,
        settle_s: float = 20.0,
        starts: _Starts | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.conf = conf
        self.read_s = read_s
        self.poll_s = poll_s
        self.trail = trail
        self.settle_s = settle_s
        self.starts = starts

    async def _settled_status(self) -> ConnectorState:
        """The connector's status once a task is FAILED, or as it is after `settle_s`.

        The decision can come before Connect reports the failure: from the DLQ record (written
        ~0.5 s before FAILED), or from a task that a restart or a config change had just set
        running again and that is on its way back to the poison record. Reading the status once
        would answer `not_failed` for a task that fails a moment later.
        """
        deadline = time.monotonic() + self.settle_s
        while True:
            status = await self.client.status(self.name)
            if _failed_tasks(status) or time.monotonic() >= deadline:
                return status
            await asyncio.sleep(min(self.poll_s, 0.05))

    async def by_single_record_batches(
        self, timeout_s: float, on_override: OverrideHook | None
    ) -> LocateResult:
        name = self.name
        status = await self._settled_status()
        failed = _failed_tasks(status)
        if not failed:
            return _not_failed(status)
        original = await self.client.config(name)
        original_value = original.get(MAX_POLL_RECORDS_KEY)
        modified = {**original, MAX_POLL_RECORDS_KEY: "1"}
        if original_value != "1":
            errors = await self.client.validate_config(original["connector.class"], modified)
            if MAX_POLL_RECORDS_KEY in errors:
                return NotLocated(
                    "override_not_allowed",
                    f"Connect refuses {MAX_POLL_RECORDS_KEY} for {name}: "
                    + " ".join(errors[MAX_POLL_RECORDS_KEY]),
                )
        pinned = await self.pin_unstarted(failed, original)
        if isinstance(pinned, NotLocated):
            return pinned
        earlier_pins = await self.starts.pinned() if self.starts is not None else set()
        before = await self.client.offsets(name)
        if on_override is not None:
            await on_override(original_value)
        if self.trail is not None:
            # Before the config change: Connect restarts the tasks for a new config by itself,
            # and that run can fail before the restart request (which then finds no FAILED task).
            await asyncio.to_thread(self.trail.mark)
        try:
            if original_value != "1":
                try:
                    await self.client.put_config(name, modified)
                except OffsetdError as exc:
                    if isinstance(exc, ConnectUnavailable | ConnectBusy):
                        raise
                    return NotLocated("config_rejected", str(exc))
            await self.client.restart_failed(name)
            repeated = await self._failed_again(failed, timeout_s, before)
            if not repeated:
                return NotLocated(
                    "failure_did_not_repeat",
                    f"task(s) {sorted(failed)} of {name} were not seen running and failing again "
                    f"with one-record batches within {timeout_s:g} s",
                )
            after = await self.client.offsets(name)
        finally:
            await restore_override(self.client, name, original_value)
        picked = await self._pick(after)
        if isinstance(picked, NotLocated):
            return picked
        ref, committed = picked
        previous = _committed(before).get((ref.topic, ref.partition))
        if previous is not None and committed < previous:
            return NotLocated(
                "offset_moved_back",
                f"{ref.topic}-{ref.partition} was committed at {previous} before and at "
                f"{committed} after one-record batches: someone else moves this group",
            )
        start = pinned.get((ref.topic, ref.partition))
        started = (
            f"; {ref.topic}-{ref.partition} had no committed offset: started where its consumer "
            f"does ({start.how})"
            if start is not None
            else ""
        )
        if start is None and (ref.topic, ref.partition) in earlier_pins:
            started = (
                f"; {previous} is where its consumer started, pinned before an earlier restart "
                "(nothing delivered yet)"
            )
        return Located(
            ref,
            "single_record_batches",
            f"task(s) {sorted(failed)} failed again with one-record batches; the group's "
            f"committed offset moved from {previous} to {committed}{started}",
            delivered=committed - previous if previous is not None else 0,
        )

    async def by_check(self, check: Check) -> LocateResult:
        status = await self._settled_status()
        failed = _failed_tasks(status)
        if not failed:
            return _not_failed(status)
        config = await self.client.config(self.name)
        entries = await self.client.offsets(self.name)
        starts: dict[tuple[str, int], Start] = {}
        if self.starts is not None:
            unstarted = await self._unstarted(entries, config)
            if isinstance(unstarted, NotLocated):
                return unstarted
            starts = await self.starts.resolve(unstarted, failed, config)
        picked = await self._pick(entries, {tp: s.offset for tp, s in starts.items()})
        if isinstance(picked, NotLocated):
            return picked
        ref, committed = picked
        limit = _max_poll_records(config)
        isolation = config.get("consumer.override.isolation.level", "read_uncommitted")
        try:
            records = await asyncio.to_thread(
                read_records, self.conf, ref.topic, ref.partition, committed, limit,
                timeout_s=self.read_s, isolation_level=isolation,
            )  # fmt: skip
        except RecordUnavailable as exc:
            return NotLocated("record_unavailable", str(exc))
        if not records or records[0].offset != committed:
            return NotLocated(
                "record_unavailable",
                f"there is no record at {ref.topic}-{ref.partition}@{committed} (compacted away, "
                "a transaction marker, or beyond the end)",
            )
        what = describe(check)
        first = next((r for r in records if fails(check, r)), None)
        if first is None:
            return NotLocated(
                "check_passed",
                f"none of the {len(records)} records from {ref.topic}-{ref.partition}@{committed} "
                f"(one batch at most) fails the check ({what}): it does not explain the failure",
            )
        if first.offset != committed:
            return NotLocated(
                "undelivered_prefix",
                f"the first record failing the check ({what}) is at offset {first.offset}, after "
                f"the committed offset {committed}: records {committed}..{first.offset - 1} were "
                "never delivered, and skipping would lose them",
            )
        start = starts.get((ref.topic, ref.partition))
        where = (
            f"the record where the consumer starts ({start.how}) fails the check: {what}"
            if start is not None
            else f"the record at the committed offset fails the check: {what}"
        )
        return Located(ref, "check", where)

    async def _failed_again(
        self, tasks: frozenset[int], timeout_s: float, before: list[OffsetEntry]
    ) -> bool:
        """Wait until one of `tasks` has run again with one-record batches and FAILED again.

        The status cache may still show the old FAILED for a while after the restart request,
        so a FAILED counts only after the same task was seen in a live state — or when the
        group's committed offsets moved since the restart (the task ran: it delivered records
        of the failed batch one by one), or when the status topic holds RUNNING then FAILED for
        it since the restart (a cycle faster than one poll). Without any of these the failure
        stays unproven: not located, never a guess.
        """
        alive: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = await self.client.status(self.name)
            for task in status.tasks:
                if task.id not in tasks:
                    continue
                if task.state == "FAILED" and task.id in alive:
                    return True
                if task.state in _ALIVE:
                    alive.add(task.id)
            failed_now = any(t.id in tasks and t.state == "FAILED" for t in status.tasks)
            trail = self.trail
            if (
                failed_now
                and trail is not None
                and await asyncio.to_thread(trail.ran_and_failed, tasks)
            ):
                return True
            if failed_now:
                moved = _committed(await self.client.offsets(self.name))
                if moved != _committed(before):
                    # Settled, not a periodic commit caught mid-way: the same twice, 1.5 s apart.
                    await asyncio.sleep(1.5)
                    if _committed(await self.client.offsets(self.name)) == moved:
                        return True
            await asyncio.sleep(self.poll_s)
        return False

    async def _pick(
        self, entries: list[OffsetEntry], starts: Mapping[tuple[str, int], int] | None = None
    ) -> tuple[RecordRef, int] | NotLocated:
        """The one partition the task can have failed on, with its committed offset (or, where
        nothing is committed, the consumer's start from `starts`)."""
        config = await self.client.config(self.name)
        try:
            marks = await asyncio.to_thread(subscribed_watermarks, self.conf, config, self.read_s)
        except RecordUnavailable as exc:
            return NotLocated("record_unavailable", str(exc))
        return pick_partition({**(starts or {}), **_committed(entries)}, marks)

    async def _unstarted(
        self, entries: list[OffsetEntry], config: Mapping[str, str]
    ) -> list[tuple[str, int]] | NotLocated:
        """The subscribed partitions that have records but no committed offset."""
        try:
            marks = await asyncio.to_thread(subscribed_watermarks, self.conf, config, self.read_s)
        except RecordUnavailable as exc:
            return NotLocated("record_unavailable", str(exc))
        committed = _committed(entries)
        return [tp for tp, (lo, hi) in sorted(marks.items()) if hi > lo and tp not in committed]

    async def pin_unstarted(
        self, failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start] | NotLocated:
        """Before a restart: the consumer's start, committed on every partition with records
        and no committed offset (`sink_start`), so the restart begins where the failed run did."""
        if self.starts is None:
            return {}
        unstarted = await self._unstarted(await self.client.offsets(self.name), config)
        if isinstance(unstarted, NotLocated):
            return unstarted
        if not unstarted:
            return {}
        try:
            pinned = await self.starts.pin(unstarted, failed, config)
        except OffsetdError as exc:
            return NotLocated(
                "no_committed_offset",
                f"{_tps(unstarted)} of {self.name} has records but no committed offset, and its "
                f"consumer's start could not be committed before the restart ({exc})",
            )
        if not pinned:
            return NotLocated(
                "no_committed_offset",
                f"{_tps(unstarted)} of {self.name} has records but no committed offset, and "
                "where its consumer starts cannot be told (auto.offset.reset=none?)",
            )
        return pinned


class _Starts:
    """Where the consumer starts on partitions it has committed nothing on, and pinning it."""

    def __init__(
        self,
        conf: dict[str, str],
        group: str,
        worker_reset: str,
        status: tuple[Mapping[str, str], str] | None,
        connector: str,
        read_s: float,
    ) -> None:
        self.conf, self.group, self.worker_reset = conf, group, worker_reset
        self.status, self.connector, self.read_s = status, connector, read_s

    async def resolve(
        self, tps: list[tuple[str, int]], failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start]:
        """Each partition's start (empty unless every one can be told)."""
        if not tps:
            return {}
        reset = effective_reset(config, self.worker_reset)
        run_started = None
        if reset == "latest" and self.status is not None:
            status_conf, status_topic = self.status
            run_started = await asyncio.to_thread(
                task_run_started_ms,
                status_conf,
                status_topic,
                self.connector,
                sorted(failed),
                self.read_s,
            )
        found: dict[tuple[str, int], Start] = {}
        for topic, partition in tps:
            start = await asyncio.to_thread(
                start_of, self.conf, topic, partition, reset, run_started, self.read_s
            )
            if start is not None:
                found[(topic, partition)] = start
        return found if len(found) == len(tps) else {}

    async def pinned(self) -> set[tuple[str, int]]:
        """The partitions whose committed offset is a start offsetd pinned earlier."""
        return await asyncio.to_thread(pinned_partitions, self.conf, self.group, self.read_s)

    async def pin(
        self, tps: list[tuple[str, int]], failed: frozenset[int], config: Mapping[str, str]
    ) -> dict[tuple[str, int], Start]:
        """Resolve and commit the starts (empty: they cannot be told)."""
        starts = await self.resolve(tps, failed, config)
        if starts:
            await asyncio.to_thread(
                pin_starts, self.conf, self.group, {tp: s.offset for tp, s in starts.items()}
            )
            log.info(
                "%s had no committed offset on %s: pinned where its consumer starts (%s)",
                self.connector,
                _tps(list(starts)),
                "; ".join(s.how for s in starts.values()),
            )
        return starts


def pick_partition(
    committed: Mapping[tuple[str, int], int], marks: Mapping[tuple[str, int], tuple[int, int]]
) -> tuple[RecordRef, int] | NotLocated:
    """Rule out every partition committed to its end; exactly one must remain.

    `marks` are (low, high) watermarks of every partition the connector subscribes to. A
    partition without a committed offset but with records remains (its position is unknown).
    """
    pending: list[tuple[str, int]] = []
    for tp, (low, high) in sorted(marks.items()):
        offset = committed.get(tp)
        if (offset is None and high > low) or (offset is not None and offset < high):
            pending.append(tp)
    if not pending:
        return NotLocated(
            "no_pending_record",
            f"all {len(marks)} partitions are committed to their end: no record left to fail on",
        )
    if len(pending) > 1:
        shown = ", ".join(f"{t}-{p}" for t, p in pending[:10])
        return NotLocated(
            "ambiguous_partition",
            f"{len(pending)} partitions have records not yet committed ({shown}): which one the "
            "task failed on cannot be told",
        )
    topic, partition = pending[0]
    offset = committed.get(pending[0])
    if offset is None:
        return NotLocated(
            "no_committed_offset", f"{topic}-{partition} has records but no committed offset"
        )
    return RecordRef(topic=topic, partition=partition, offset=offset), offset


def _tps(tps: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)


def _failed_tasks(status: ConnectorState) -> frozenset[int]:
    return frozenset(t.id for t in status.tasks if t.state == "FAILED")


def _not_failed(status: ConnectorState) -> NotLocated:
    states = ", ".join(f"{t.id}={t.state}" for t in status.tasks) or "none"
    return NotLocated(
        "not_failed", f"{status.name} has no FAILED task (connector {status.state}, tasks {states})"
    )


def _committed(entries: list[OffsetEntry]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for entry in entries:
        if entry.offset is None or "kafka_topic" not in entry.partition:
            continue
        topic = str(entry.partition["kafka_topic"])
        partition = int(str(entry.partition["kafka_partition"]))
        out[(topic, partition)] = int(str(entry.offset["kafka_offset"]))
    return out


def _max_poll_records(config: Mapping[str, str]) -> int:
    try:
        return max(1, int(config.get(MAX_POLL_RECORDS_KEY, DEFAULT_MAX_POLL_RECORDS)))
    except ValueError:
        return DEFAULT_MAX_POLL_RECORDS
