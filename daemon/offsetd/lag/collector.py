"""One lag collection cycle: read everything, compute with the pure parts, return a Snapshot.

Per cycle:
1. Connect REST per Connect cluster (states; MM2 connectors; MirrorSource task assignments);
2. each Connect cluster's offsets topic, tailed group-less from the beginning (the first cycle
   reads it whole), folded into N per MirrorSourceConnector partition;
3. per *source cluster*: one ListOffsets (latest, read_committed: the LSO) for every replicated
   partition, and one more (earliest for lagging or not-started partitions, max-timestamp for
   the local `heartbeats` topic); librdkafka sends each as one request per leader broker;
4. the timestamp of the record at N + 1, only for lagging partitions whose N + 1 is not cached,
   at most `lag.seconds_lag_max_fetches` per cycle, `lag.seconds_lag_concurrency` at a time;
5. per *target cluster*: one ListOffsets (max-timestamp) for the replicated `<source>.heartbeats`
   and the local `heartbeats`; the checkpoints topic tailed; the groups' committed offsets on the
   source (the checkpointed groups and those `lag.failover_groups` expects), and each group's
   failover readiness;
6. status windows updated and evaluated; persisted now and then.

A failing step is recorded in `Snapshot.errors` (and counted per stage) and the rest carries on.
Clients are made by `admin_factory` (a benchmark passes one that counts requests).

Why one module of ~700 lines: `Collector` holds the state that lives across cycles (rows kept
per partition, status windows, last log ends, timestamp and ListOffsets caches) and every pass
of a cycle reads and updates it; the parts without that state live beside it (`heartbeats`,
`checkpoint_cycle`, `arithmetic`, `status`, `kafka_io`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offsetd.adminclient import connected_admin
from offsetd.config import Settings
from offsetd.errors import ConnectAccessDenied, TlsFailed
from offsetd.lag.arithmetic import first_unreplicated, records_lag, seconds_lag, visible_lag
from offsetd.lag.checkpoint_cycle import CheckpointReader, FailoverPolicy
from offsetd.lag.connect_state import ConnectView, MirrorFlow, read_connect
from offsetd.lag.groups import GroupReader
from offsetd.lag.heartbeats import HEARTBEATS, TP, heartbeat_ages, heartbeat_layout
from offsetd.lag.kafka_io import (
    EndOffsets,
    OffsetSpec,
    Position,
    Tail,
    TimestampFetcher,
    list_offsets,
)
from offsetd.lag.mirror_offsets import MirrorOffsets
from offsetd.lag.mirror_offsets import Position as MirrorPosition
from offsetd.lag.progress import ProgressReport, ProgressTracker
from offsetd.lag.sinks import SinkReader
from offsetd.lag.snapshot import (
    ConnectorHealth,
    HeartbeatAge,
    PartitionLag,
    Snapshot,
)
from offsetd.lag.status import Sample, Status, add_sample, evaluate, worst
from offsetd.lag.window_store import WindowKey, load_windows, save_windows
from offsetd.offsets.model import ConnectorKind

__all__ = ["STAGES", "Collector"]

_PERSIST_EVERY_MS = 60_000
log = logging.getLogger(__name__)
_UNKNOWN: Any = object()  # a lagging partition whose first record was not read this cycle
#: Steps whose failures are counted (exported from the start, at 0, as Prometheus advises).
STAGES = (
    "connect",
    "offsets",
    "source",
    "list_offsets",
    "timestamps",
    "heartbeats",
    "checkpoints",
    "group_offsets",
    "group_list",
    "sinks",
    "persist",
)


ConnectorKey = tuple[str, str]  # (connect cluster, connector)


@dataclass
class _SourceWork:
    """The replicated partitions of one source cluster, across its MirrorSourceConnectors."""

    conf: dict[str, str]
    # (connect cluster, connector) -> {(topic, partition): N's position, None: not started}
    connectors: dict[ConnectorKey, dict[TP, MirrorPosition | None]] = field(default_factory=dict)
    flows: dict[ConnectorKey, MirrorFlow] = field(default_factory=dict)
    # partitions whose N moved (or that came or went) since the last cycle, per connector
    moved: dict[ConnectorKey, set[TP]] = field(default_factory=dict)

    def partitions(self) -> Collection[TP]:
        if len(self.connectors) == 1:
            return next(iter(self.connectors.values())).keys()
        return {tp for parts in self.connectors.values() for tp in parts}


@dataclass
class _Cycle:
    """What pass 1 of a source cluster's cycle leaves for the second ListOffsets and pass 2."""

    earliest: Any = field(default_factory=OffsetSpec.earliest)
    second: dict[TP, Any] = field(default_factory=dict)  # log starts of lagging, heartbeats
    lagging: dict[TP, int | None] = field(default_factory=dict)
    todo: dict[ConnectorKey, list[tuple[TP, int, int | None, int | None]]] = field(
        default_factory=dict
    )
    rows: dict[ConnectorKey, dict[TP, PartitionLag]] = field(default_factory=dict)


def _settled(row: PartitionLag | None, end: int, n: int | None, written: int | None) -> bool:
    """A caught-up partition whose row says exactly this, OK and no lag: nothing to redo."""
    return (
        row is not None
        and row.end == end
        and row.last_replicated == n
        and row.offset_written_ms == written
        and row.status is Status.OK
        and row.lag_records == 0
    )


class _Laps:
    """Wall time per stage of one cycle, the stages laid end to end (what runs between two
    reads counts to the next): a slow cycle names the stage it waited in."""

    def __init__(self, started: float) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = started

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = now - self._mark
        self._mark = now


class Collector:
    """Holds the readers, caches and windows between cycles; `collect()` runs one cycle."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        admin_factory: Callable[[dict[str, str]], Any] | None = None,
        state_file: Path | None = None,
        read_only_state: bool = False,
        refusals_fatal: bool = False,
    ) -> None:
        self.settings = settings
        self.lag = settings.lag
        # read the windows from `state_file` but never write it (a one-shot `offsetd lag` next
        # to a running daemon whose file it is)
        self.read_only_state = read_only_state
        # Connect refusing our credentials or certificate ends the cycle (a one-shot's one
        # error line and exit code) instead of being a stage error the next cycle retries
        self.refusals_fatal = refusals_fatal
        self._clock = clock
        self._admin_factory: Callable[[dict[str, str]], Any] = admin_factory or _admin_client
        self.state_file = state_file
        self.windows: dict[WindowKey, list[Sample]] = (
            load_windows(state_file) if state_file is not None else {}
        )
        self._persisted_ms = 0
        self._admins: dict[str, Any] = {}
        self._fetchers: dict[str, TimestampFetcher] = {}
        self._offsets_tails: dict[str, Tail] = {}
        self._mirror: dict[str, MirrorOffsets] = {}
        self._views: dict[str, ConnectView] = {}
        self._assigned: dict[tuple[str, str], set[TP]] = {}
        # (cluster, topic, partition) -> (first unreplicated offset, first visible record or
        # None, log end when read): a None is only valid while the log end has not moved.
        self._ts_cache: dict[tuple[str, str, int], tuple[int, Position | None, int]] = {}
        self._checkpoints = CheckpointReader()
        self.errors_total: Counter[str] = Counter(dict.fromkeys(STAGES, 0))
        # The last cycle's rows per connector: a partition whose N and log end did not move
        # and that was caught up and OK keeps its row (and gets no new window sample), so an
        # idle estate costs a comparison per partition per cycle, not a status evaluation.
        self._rows: dict[ConnectorKey, dict[TP, PartitionLag]] = {}
        self._order: list[tuple[dict[TP, PartitionLag], TP]] = []  # the rows' sort order
        self._layout_changed = True  # partitions came or went: re-sort, prune the windows
        self._unsettled: dict[ConnectorKey, set[TP]] = {}  # rows not caught up and OK
        self._sources_of: dict[ConnectorKey, tuple[str, str]] = {}  # the rows' aliases
        # When each connector was last seen to become RUNNING (connector and every task): a
        # stall is counted from there, so a resumed connector gets its time to flush. None: not
        # RUNNING when last seen; 0: RUNNING since before this collector looked.
        self._running_since: dict[ConnectorKey, int | None] = {}
        self._end_offsets: dict[str, EndOffsets] = {}  # per source cluster: requests reused
        self._ends: dict[str, dict[TP, int]] = {}  # per source cluster: the last log ends
        # sink progress and stuck tasks (offsetd.lag.progress); None: not collected
        progress = settings.progress
        self.progress: ProgressTracker | None = None
        if progress.enabled:
            self.progress = ProgressTracker(
                stall_after_ms=progress.stall_after_ms(self.lag.flush_interval),
                stuck_after_ms=progress.stuck_after,
                slo_seconds=self.lag.slo_seconds,
            )
        self._sink_readers: dict[str, SinkReader] = {}  # per Connect cluster
        self._groups: dict[str, GroupReader] = {}  # per Kafka cluster (bootstrap servers)
        self.reports: list[ProgressReport] = []  # the last cycle's, for the daemon to send

    # -- clients --------------------------------------------------------------------------------

    def _conf(self, alias: str, bootstrap: str | None) -> dict[str, str] | None:
        """The configured cluster of that alias (TLS/SASL included), else the connector's view."""
        cluster = self.settings.kafka_clusters.get(alias)
        if cluster is not None:
            return cluster.client_config()
        return {"bootstrap.servers": bootstrap} if bootstrap else None

    def _admin(self, conf: Mapping[str, str]) -> Any:
        key = conf["bootstrap.servers"]
        if key not in self._admins:
            self._admins[key] = self._admin_factory(dict(conf))
        return self._admins[key]

    def _fetcher(self, conf: Mapping[str, str]) -> TimestampFetcher:
        key = conf["bootstrap.servers"]
        if key not in self._fetchers:
            self._fetchers[key] = TimestampFetcher(
                conf, concurrency=self.lag.seconds_lag_concurrency
            )
        return self._fetchers[key]

    def _group_reader(self, conf: Mapping[str, str]) -> GroupReader:
        key = conf["bootstrap.servers"]
        if key not in self._groups:
            self._groups[key] = GroupReader(conf)
        return self._groups[key]

    def close(self) -> None:
        self.persist()
        for reader in self._groups.values():
            try:
                reader.close()
            except Exception as exc:  # closing must go on
                log.warning("could not close a group reader: %s", exc)
        self._groups.clear()
        closeables: list[TimestampFetcher | Tail] = [
            *self._fetchers.values(),
            *self._offsets_tails.values(),
        ]
        for closeable in closeables:
            closeable.close()
        self._fetchers.clear()
        self._offsets_tails.clear()
        self._checkpoints.close()

    def persist(self) -> None:
        if self.state_file is not None and not self.read_only_state:
            save_windows(self.state_file, self.windows)

    # -- the cycle ------------------------------------------------------------------------------

    def collect(self) -> Snapshot:
        started = time.monotonic()
        laps = _Laps(started)
        errors: dict[str, str] = {}
        self._read_connect(errors)
        laps.lap("connect")
        self._read_offsets(errors)
        laps.lap("offsets")
        now_ms = int(self._clock() * 1000)
        self._note_running(now_ms)
        sources = self._source_work()
        beats = self._heartbeat_plan()
        heartbeats: list[HeartbeatAge] = []
        for key, work in sorted(sources.items()):
            try:
                topics = beats.pop(key, (work.conf, set()))[1]
                heartbeats.extend(self._source_cycle(work, topics, now_ms, errors))
            except Exception as exc:  # a cluster down must not stop the others
                errors[f"source:{key}"] = str(exc)
                for connector in work.connectors:  # its rows are unknown now, not unchanged
                    self._rows.pop(connector, None)
                self._layout_changed = True
                continue
        laps.lap("source")
        heartbeats.extend(self._target_heartbeats(beats, now_ms, errors))
        laps.lap("heartbeats")
        unique = {(h.cluster, h.topic, h.source, h.target): h for h in heartbeats}
        heartbeats = list(unique.values())
        replicated = self._replicated_topics()
        checkpoints = self._checkpoints.cycle(
            self._flows(ConnectorKind.MIRROR_CHECKPOINT),
            self._conf,
            self._group_reader,
            now_ms,
            errors,
            failover=FailoverPolicy(self.lag.failover_groups, self.lag.failover_max_checkpoint_age),
            replicated_of=lambda flow: replicated.get((flow.source, flow.target)),
        )
        laps.lap("checkpoints")
        live = {connector for work in sources.values() for connector in work.connectors}
        for gone in self._rows.keys() - live:  # a connector gone (or no longer MM2's)
            del self._rows[gone]
            self._layout_changed = True
        if self._layout_changed:
            self._prune()
            self._order = self._sorted_keys()
            self._layout_changed = False
        partitions = [rows[tp] for rows, tp in self._order]
        self.reports = self._progress_cycle(now_ms, errors)
        laps.lap("sinks")
        if now_ms - self._persisted_ms >= min(_PERSIST_EVERY_MS, self.lag.window // 12):
            self._persisted_ms = now_ms
            try:
                self.persist()
            except OSError as exc:
                errors["persist"] = str(exc)
            laps.lap("persist")
        for stage in errors:
            self.errors_total[stage.split(":", 1)[0]] += 1
        return Snapshot(
            taken_ms=now_ms,
            partitions=tuple(partitions),
            connectors=tuple(c for v in self._views.values() for c in v.connectors),
            heartbeats=tuple(heartbeats),
            checkpoints=tuple(checkpoints.checkpoints),
            refresh_seconds=time.monotonic() - started,
            stage_seconds=laps.seconds,
            slo_seconds=self.lag.slo_seconds,
            errors=errors,
            sink_partitions=tuple(self.progress.partitions) if self.progress else (),
            progress=tuple(self.progress.states) if self.progress else (),
            stall_after_seconds=self.progress.stall_after_ms / 1000 if self.progress else None,
            failover=tuple(checkpoints.readiness),
        )

    def _progress_cycle(self, now_ms: int, errors: dict[str, str]) -> list[ProgressReport]:
        """Sink progress read, MM2 flows' statuses gathered, every task judged."""
        if self.progress is None:
            return []
        partitions: dict[ConnectorKey, Any] = {}
        for name, view in sorted(self._views.items()):
            cluster = self.settings.connect_clusters.get(name)
            if cluster is None:
                continue
            sinks = [
                (health, view.configs.get(health.name, {}))
                for health in view.connectors
                if health.connector_type == "sink"
            ]
            try:
                read = self._sink_reader(name).read(
                    name, sinks, cluster.consumer_auto_offset_reset, errors
                )
            except Exception as exc:  # the rest of the cycle carries on
                errors[f"sinks:{name}"] = str(exc)
                continue
            partitions.update(read.partitions)
        flows = {
            key: worst(row.status for row in rows.values())
            for key, rows in self._rows.items()
            if rows
        }
        connectors = [c for view in self._views.values() for c in view.connectors]
        # No holders and no worker-group state: no client reads a group's members reliably
        # here (offsetd.lag.groups); the tracker falls back on what it remembers and the
        # statuses' layout.
        return self.progress.observe(now_ms, connectors, partitions, {}, flows)

    def _sink_reader(self, connect_cluster: str) -> SinkReader:
        reader = self._sink_readers.get(connect_cluster)
        if reader is None:
            cluster = self.settings.connect_clusters[connect_cluster]
            conf = self.settings.kafka_clusters[cluster.kafka_cluster].client_config()
            reader = self._sink_readers[connect_cluster] = SinkReader(
                conf, self._admin(conf), lambda: self._fetcher(conf), self._group_reader(conf)
            )
        return reader

    def _read_connect(self, errors: dict[str, str]) -> None:
        for name, cluster in sorted(self.settings.connect_clusters.items()):
            try:
                self._views[name] = asyncio.run(read_connect(name, cluster))
            except Exception as exc:  # keep the last view: states are unknown, not changed
                if self.refusals_fatal and isinstance(exc, ConnectAccessDenied | TlsFailed):
                    raise
                errors[f"connect:{name}"] = str(exc)

    def _note_running(self, now_ms: int) -> None:
        for name, view in self._views.items():
            for health in view.connectors:
                key = (name, health.name)
                if not health.running:
                    self._running_since[key] = None
                elif key not in self._running_since:
                    self._running_since[key] = 0  # first sight: running since before we looked
                elif self._running_since[key] is None:
                    self._running_since[key] = now_ms

    def _running_for(self, key: ConnectorKey, now_ms: int) -> int | None:
        since = self._running_since.get(key)
        return None if not since else now_ms - since

    def _read_offsets(self, errors: dict[str, str]) -> None:
        for name, cluster in sorted(self.settings.connect_clusters.items()):
            kafka = self.settings.kafka_clusters[cluster.kafka_cluster]
            tail = self._offsets_tails.get(name)
            if tail is None:
                tail = self._offsets_tails[name] = Tail(
                    kafka.client_config(), cluster.offsets_topic
                )
                self._mirror[name] = MirrorOffsets()
            try:
                # The first read replays the whole topic: give it time.
                budget = 120.0 if not self._mirror[name].positions else 5.0
                records = tail.read(budget)
            except Exception as exc:
                errors[f"offsets:{name}"] = str(exc)
                continue
            self._mirror[name].apply((m.key(), m.value(), m.timestamp()[1]) for m in records)
            if tail.last_error:
                errors[f"offsets:{name}"] = tail.last_error
                tail.last_error = None

    def _source_work(self) -> dict[str, _SourceWork]:
        sources: dict[str, _SourceWork] = {}
        for name, view in self._views.items():
            mirror = self._mirror.get(name)
            for flow in view.flows:
                if flow.kind is not ConnectorKind.MIRROR_SOURCE:
                    continue
                conf = self._conf(flow.source, flow.source_bootstrap)
                if conf is None:
                    continue
                work = sources.setdefault(conf["bootstrap.servers"], _SourceWork(conf))
                key = (name, flow.connector)
                if flow.connector in view.assigned:
                    self._assigned[key] = view.assigned[flow.connector]
                parts: dict[TP, MirrorPosition | None] = dict.fromkeys(self._assigned.get(key, ()))
                if mirror is not None:
                    parts.update(mirror.of_flow(flow.connector, flow.source))
                    work.moved[key] = mirror.drain(flow.connector, flow.source)
                work.connectors[key] = parts
                work.flows[key] = flow
        return sources

    def _source_cycle(
        self,
        work: _SourceWork,
        beats: set[tuple[str, str, str]],
        now_ms: int,
        errors: dict[str, str],
    ) -> list[HeartbeatAge]:
        """Rows of one source cluster's partitions (into `_rows`); its local heartbeat ages."""
        admin = self._admin(work.conf)
        where = work.conf["bootstrap.servers"]
        requests = self._end_offsets.setdefault(where, EndOffsets(self.lag.list_offsets_batch))
        ends, failed = requests(admin, work.partitions())
        if failed:
            errors[f"list_offsets:{where}"] = (
                f"{len(failed)} partitions: {next(iter(failed.values()))}"
            )
            # A long-lived client can keep failing on partitions it learnt of before they had
            # leaders (a burst of new topics: its metadata stays stale for minutes) while a new
            # client answers at once: the next cycle gets a new one.
            self._admins.pop(where, None)
        # Log ends that moved since the last cycle: a set operation in C over the two dicts.
        ended = {tp for tp, _end in ends.items() - self._ends.get(where, {}).items()}
        self._ends[where] = ends
        cycle = _Cycle()
        self._pass_one(work, ends, ended | failed.keys(), cycle)
        layout = heartbeat_layout(admin, beats)
        for *_names, tps in layout:
            cycle.second.update(dict.fromkeys(tps, OffsetSpec.max_timestamp()))
        found, _failed2 = list_offsets(admin, cycle.second, batch=self.lag.list_offsets_batch)
        starts = {tp: pos.offset for tp, pos in found.items() if cycle.second[tp] is cycle.earliest}
        local = heartbeat_ages(layout, found, where_alias(work), now_ms)
        firsts = self._first_records(work.conf, cycle.lagging, starts, ends, errors)
        # Pass 2: new, moving, lagging or not-OK partitions: window, status, a new row.
        for key, changed in cycle.todo.items():
            rows = cycle.rows[key]
            self._pass_two(work, key, changed, rows, starts, firsts, now_ms, where)
        for key, kept in cycle.rows.items():
            if self._rows.get(key) is not kept:
                self._layout_changed = True
            self._rows[key] = kept
        return local

    def _pass_one(
        self, work: _SourceWork, ends: dict[TP, int], moved: set[TP], cycle: _Cycle
    ) -> None:
        """Pass 1: only partitions that may have changed are looked at: a log end or N moved,
        new, failed, or not caught up and OK last time. The others keep their rows."""
        for key, parts in work.connectors.items():
            kept, visit = self._to_visit(work, key, parts, moved)
            cycle.rows[key] = kept
            changed = cycle.todo[key] = []
            for tp in visit:
                if tp not in parts:
                    continue
                end = ends.get(tp)
                if end is None:
                    if kept.pop(tp, None) is not None:
                        self._layout_changed = True
                    continue
                pos = parts[tp]
                n, written = (None, None) if pos is None else (pos.n, pos.changed_ms)
                # not started: lag = end - log start
                behind = end > 0 if pos is None else end > pos.n + 1
                if behind:
                    cycle.second[tp] = cycle.earliest
                    cycle.lagging[tp] = n
                elif _settled(kept.get(tp), end, n, written):
                    continue
                changed.append((tp, end, n, written))

    def _to_visit(
        self,
        work: _SourceWork,
        key: ConnectorKey,
        parts: dict[TP, MirrorPosition | None],
        moved: set[TP],
    ) -> tuple[dict[TP, PartitionLag], Iterable[TP]]:
        """A connector's rows kept from the last cycle (updated in place: `_order` refers to
        them), and the partitions to look at."""
        flow = work.flows[key]
        kept = self._rows.get(key)
        if kept is None or self._sources_of.get(key) != (flow.source, flow.target):
            # new, or its aliases changed: every row (and label) is rebuilt
            self._sources_of[key] = (flow.source, flow.target)
            self._layout_changed = True
            return {}, parts.keys()
        gone = kept.keys() - parts.keys()
        new = parts.keys() - kept.keys()
        for tp in gone:
            del kept[tp]
        if gone or new:
            self._layout_changed = True
        again = work.moved.get(key, set()) | self._unsettled.get(key, set())
        return kept, moved | again | new

    def _pass_two(
        self,
        work: _SourceWork,
        key: ConnectorKey,
        changed: list[tuple[TP, int, int | None, int | None]],
        kept: dict[TP, PartitionLag],
        starts: dict[TP, int],
        firsts: dict[TP, Any],
        now_ms: int,
        where: str,
    ) -> None:
        """Window, status and a new row for each partition of one connector that changed."""
        connect_cluster, connector = key
        flow = work.flows[key]
        health = self._health(connect_cluster, connector)
        running = health.running if health is not None else False
        running_for = self._running_for(key, now_ms)
        unsettled = self._unsettled[key] = set()  # rows to look at again next cycle
        for tp, end, n, written in changed:
            start = starts.get(tp)
            lag = records_lag(end, n, start)
            first = firsts.get(tp, _UNKNOWN)
            if first is not _UNKNOWN:
                lag = visible_lag(lag, end, None if first is None else first.offset)
            wkey: WindowKey = (connect_cluster, connector, tp[0], tp[1])
            last = -1 if n is None else n
            samples = add_sample(
                self.windows.get(wkey, []),
                # the sample's lag is the visible lag (markers are not a stall; a partition
                # not started lags from its log start, not from 0)
                Sample(last, last + 1 + lag, now_ms),
                self.lag.window,
            )
            self.windows[wkey] = samples
            status = evaluate(
                samples,
                lag=lag,
                now_ms=now_ms,
                running=running,
                offset_written_ms=written,
                window_ms=self.lag.window,
                flush_ms=self.lag.flush_interval,
                stall_after_ms=self.lag.stall_after,
                running_for_ms=running_for,
            )
            previous = kept.get(tp)
            kept[tp] = PartitionLag(
                connect_cluster,
                connector,
                flow.source,
                flow.target,
                tp[0],
                tp[1],
                end,
                start,
                n,
                written,
                lag,
                seconds_lag(
                    lag, first.timestamp_ms if isinstance(first, Position) else None, now_ms
                ),
                status,
                data_loss=n is not None and start is not None and n + 1 < start,
                # same partition, same flow (checked in pass 1): the same label text
                labels=previous.labels if previous is not None else "",
            )
            if status is not Status.OK or lag:
                unsettled.add(tp)
            elif previous is not None and previous.lag_records:  # caught up: forget its
                self._ts_cache.pop((where, tp[0], tp[1]), None)  # first record's timestamp

    def _first_records(
        self,
        conf: Mapping[str, str],
        lagging: Mapping[TP, int | None],
        starts: Mapping[TP, int],
        ends: Mapping[TP, int],
        errors: dict[str, str],
    ) -> dict[TP, Position | None]:
        """The first unreplicated record a consumer sees on each lagging partition (cached),
        None where it sees none up to the log end (transaction markers only)."""
        where = conf["bootstrap.servers"]
        out: dict[TP, Position | None] = {}
        missing: dict[TP, int] = {}
        for tp, n in lagging.items():
            first = first_unreplicated(n, starts.get(tp, 0))
            cached = self._ts_cache.get((where, *tp))
            if (
                cached is not None
                and cached[0] == first
                and (cached[1] is not None or cached[2] == ends.get(tp))
            ):
                out[tp] = cached[1]
            elif len(missing) < self.lag.seconds_lag_max_fetches:
                missing[tp] = first
        if missing:
            try:
                fetched = self._fetcher(conf).fetch(missing)
            except Exception as exc:
                errors[f"timestamps:{where}"] = str(exc)
                fetched = {}
            for tp, pos in fetched.items():
                self._ts_cache[(where, *tp)] = (missing[tp], pos, ends.get(tp, -1))
                out[tp] = pos
        return out

    def _sorted_keys(self) -> list[tuple[dict[TP, PartitionLag], TP]]:
        """Every row's place in the snapshot's order: source, target, topic, partition, connector.

        As (the connector's rows, partition): the rows dict of a connector is only replaced
        when its layout changes, which re-sorts.
        """
        keyed = [
            ((row.source, row.target, tp[0], tp[1], key[1]), (rows, tp))
            for key, rows in self._rows.items()
            for tp, row in rows.items()
        ]
        keyed.sort(key=lambda item: item[0])
        return [item[1] for item in keyed]

    def _health(self, connect_cluster: str, connector: str) -> ConnectorHealth | None:
        view = self._views.get(connect_cluster)
        if view is None:
            return None
        return next((c for c in view.connectors if c.name == connector), None)

    # -- target side ----------------------------------------------------------------------------

    def _flows(self, kind: ConnectorKind) -> Iterable[MirrorFlow]:
        for view in self._views.values():
            yield from (f for f in view.flows if f.kind is kind)

    def _replicated_topics(self) -> dict[tuple[str, str], set[str]]:
        """Per (source, target) alias pair: the topics its MirrorSourceConnectors are assigned
        (the last assignment seen: a stopped connector keeps its topics). A pair none of whose
        connectors was ever seen assigned is absent (readiness then goes by the checkpoints)."""
        out: dict[tuple[str, str], set[str]] = {}
        for name, view in self._views.items():
            for flow in view.flows:
                assigned = self._assigned.get((name, flow.connector))
                if flow.kind is ConnectorKind.MIRROR_SOURCE and assigned is not None:
                    topics = out.setdefault((flow.source, flow.target), set())
                    topics.update(topic for topic, _p in assigned)
        return out

    def _heartbeat_plan(self) -> dict[str, tuple[dict[str, str], set[tuple[str, str, str]]]]:
        """Per target cluster: the replicated `<source>.heartbeats` topics it holds."""
        plan: dict[str, tuple[dict[str, str], set[tuple[str, str, str]]]] = {}
        for flow in self._flows(ConnectorKind.MIRROR_SOURCE):
            conf = self._conf(flow.target, flow.target_bootstrap)
            if conf is None:
                continue
            entry = plan.setdefault(conf["bootstrap.servers"], (conf, set()))
            entry[1].add((flow.source, flow.target, f"{flow.source}{flow.separator}{HEARTBEATS}"))
        return plan

    def _target_heartbeats(
        self,
        plan: dict[str, tuple[dict[str, str], set[tuple[str, str, str]]]],
        now_ms: int,
        errors: dict[str, str],
    ) -> list[HeartbeatAge]:
        """Heartbeats of target clusters that are not also sources: one ListOffsets each."""
        out: list[HeartbeatAge] = []
        for where, (conf, topics) in sorted(plan.items()):
            try:
                admin = self._admin(conf)
                layout = heartbeat_layout(admin, topics)
                specs: dict[TP, Any] = {}
                for *_names, tps in layout:
                    specs.update(dict.fromkeys(tps, OffsetSpec.max_timestamp()))
                found, _failed = list_offsets(admin, specs)
                out.extend(heartbeat_ages(layout, found, next(iter(topics))[1], now_ms))
            except Exception as exc:
                errors[f"heartbeats:{where}"] = str(exc)
        return out

    def _prune(self) -> None:
        """Forget windows of partitions no connector replicates any more.

        Only windows of Connect clusters whose MM2 connectors were read this cycle: a Connect
        cluster that did not answer keeps its windows.
        """
        live = {(*key, *tp) for key, rows in self._rows.items() for tp in rows}
        if not live:
            return
        clusters = {key[0] for key in self._rows}
        for key in [k for k in self.windows if k[0] in clusters and k not in live]:
            del self.windows[key]


def _admin_client(conf: dict[str, str]) -> Any:
    return connected_admin(conf)


def where_alias(work: _SourceWork) -> str:
    """The source alias of a source cluster (any of its flows; they agree on the cluster)."""
    return next(iter(work.flows.values())).source
