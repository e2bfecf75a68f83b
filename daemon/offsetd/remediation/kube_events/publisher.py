"""Publishes the Events of remediation outcomes on Strimzi's resources, off the remediation's
path.

`publish` is called by the executor's `finish` for every audited outcome and only queues (no
I/O, never raises): a slow or refusing API server must not slow or break a remediation. One
background task writes what is queued, folding repeats of one cause into one write of the
Event's series per batch, then waits `coalesce_s` before the next batch, so a DLQ storm costs
the API server about one request per Event and second, not one per record.

Only connectors of a Connect cluster with a `strimzi:` section get Events, on the resource that
describes them (found as the strimzi backend finds it, `offsetd.offsets.strimzi.site`; cached a
minute). A failure to write one is counted (`offsetd_kube_event_failures_total`) and logged at
most once a minute per Connect cluster, never raised. The series of a cause is remembered for
`series_window_s`; after that (or a restart) a repeat starts a new Event, as client-go's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from offsetd.config import ConnectCluster
from offsetd.engine import Decision
from offsetd.errors import KubernetesError
from offsetd.kube.api import KubeApi, open_kube
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.strimzi.resources import ConnectorResource
from offsetd.offsets.strimzi.site import StrimziSite
from offsetd.remediation.kube_events.body import (
    Regarding,
    event_body,
    event_name,
    series_patch,
)
from offsetd.remediation.kube_events.notes import EventNote, notes_for

__all__ = ["KubeEvents", "regarding_of"]

log = logging.getLogger("offsetd.kube_events")

_Key = tuple[str, ...]


@dataclass
class _Series:
    name: str
    count: int
    first: datetime
    seen_s: float  # monotonic, the last occurrence


@dataclass
class _Place:
    api: KubeApi
    site: StrimziSite


def regarding_of(found: ConnectorResource, namespace: str) -> Regarding:
    """The Event's `regarding` for a located connector (the MM2 resource for an MM2 one)."""
    meta = found.resource.get("metadata") or {}
    field_path = None
    if found.kind == "KafkaMirrorMaker2":  # "/spec/mirrors/0/sourceConnector"
        parts = found.pointer.strip("/").split("/")
        field_path = ".".join(f"[{p}]" if p.isdigit() else p for p in parts).replace(".[", "[")
    return Regarding(
        api_version=str(found.resource.get("apiVersion", "")),
        kind=found.kind,
        name=found.name,
        namespace=namespace,
        uid=str(meta.get("uid", "")),
        field_path=field_path,
    )


class KubeEvents:
    """The Event writer of one worker: one queue, one background task."""

    def __init__(
        self,
        connect: dict[str, ConnectCluster],
        instance: str,
        metrics: RemediationMetrics,
        *,
        coalesce_s: float = 1.0,
        capacity: int = 10_000,
        series_window_s: float = 1800.0,
        locate_ttl_s: float = 60.0,
        complain_every_s: float = 60.0,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._clusters = {n: c for n, c in connect.items() if c.strimzi is not None}
        self.instance = instance
        self.metrics = metrics
        self.coalesce_s = coalesce_s
        self.series_window_s = series_window_s
        self.locate_ttl_s = locate_ttl_s
        self.complain_every_s = complain_every_s
        self.now = now
        self._capacity = capacity
        self._queue: asyncio.Queue[tuple[EventNote, datetime]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._places: dict[str, _Place] = {}
        self._found: dict[tuple[str, str], tuple[float, Regarding | None]] = {}
        self._series: dict[_Key, _Series] = {}
        self._complained: dict[str, tuple[float, int]] = {}  # cluster -> (when, since then)

    @property
    def active(self) -> bool:
        return bool(self._clusters)

    def publish(
        self,
        decision: Decision,
        outcome: str,
        message: str,
        extra: dict[str, Any],
        located: dict[str, Any] | None = None,
    ) -> None:
        """Queue the Events of one audited outcome; no I/O here, never raises."""
        if decision.connect_cluster not in self._clusters:
            return
        try:
            notes = notes_for(decision, outcome, message, extra, located)
            queue = self._started()
            at = self.now()
            for note in notes:
                try:
                    queue.put_nowait((note, at))
                except asyncio.QueueFull:
                    self._failed(note.connect_cluster, "the Event queue is full")
        except Exception as exc:  # an Event is never worth a remediation
            self._failed(decision.connect_cluster, f"{type(exc).__name__}: {exc}")

    async def flush(self, timeout_s: float = 10.0) -> None:
        """Wait (at most `timeout_s`) until everything queued is written or given up."""
        if self._queue is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout_s)

    async def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (bounded), then stop the background task."""
        await self.flush(timeout_s)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def _started(self) -> asyncio.Queue[tuple[EventNote, datetime]]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop:  # a queue belongs to one loop
            self._queue, self._task, self._loop = asyncio.Queue(self._capacity), None, loop
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(self._queue), name="kube-events")
        return self._queue

    async def _run(self, queue: asyncio.Queue[tuple[EventNote, datetime]]) -> None:
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await self._write_batch(batch)
            finally:
                for _ in batch:
                    queue.task_done()
            await asyncio.sleep(self.coalesce_s)

    async def _write_batch(self, batch: list[tuple[EventNote, datetime]]) -> None:
        self._forget_old()
        groups: dict[_Key, list[tuple[EventNote, datetime]]] = {}
        for note, at in batch:
            groups.setdefault(note.key, []).append((note, at))
        for group in groups.values():
            note = group[0][0]
            try:
                await self._write(group)
            except Exception as exc:  # counted and logged, never raised
                self._failed(note.connect_cluster, f"{type(exc).__name__}: {exc}")

    async def _write(self, group: list[tuple[EventNote, datetime]]) -> None:
        note, first = group[0]
        place = self._place(note.connect_cluster)
        regarding = await self._regarding(place, note)
        if regarding is None:
            return  # the cluster is not Strimzi's after all: REST connectors get no Events
        key: _Key = (regarding.uid, *note.key)
        series = self._series.get(key)
        if series is not None and time.monotonic() - series.seen_s > self.series_window_s:
            series = None
        rest = group
        if series is None:
            name = event_name(regarding, note, first)
            body = event_body(note, regarding, name=name, instance=self.instance, first=first)
            await place.api.create_event(body)
            self._counted(note)
            series = self._series[key] = _Series(name, 1, first, time.monotonic())
            rest = group[1:]
        if not rest:
            return
        last_note, last = rest[-1]
        series.count += len(rest)
        series.seen_s = time.monotonic()
        try:
            await place.api.patch_event(series.name, series_patch(series.count, last, last_note))
        except KubernetesError as exc:
            if exc.status != 404:
                raise
            # expired (the API server keeps Events an hour): the series goes on in a new one
            series.name = event_name(regarding, note, last)
            await place.api.create_event(
                event_body(
                    last_note,
                    regarding,
                    name=series.name,
                    instance=self.instance,
                    first=series.first,
                    count=series.count,
                    last=last,
                )
            )
        self._counted(last_note)

    def _forget_old(self) -> None:
        """Series past their window and stale locations: memory stays bounded by what
        happened lately, however long the worker runs."""
        now = time.monotonic()
        for key in [k for k, v in self._series.items() if now - v.seen_s > self.series_window_s]:
            del self._series[key]
        for where in [k for k, (at, _) in self._found.items() if now - at > self.locate_ttl_s]:
            del self._found[where]

    def _place(self, connect_cluster: str) -> _Place:
        place = self._places.get(connect_cluster)
        if place is None:
            cluster = self._clusters[connect_cluster]
            assert cluster.strimzi is not None
            api = open_kube(cluster.strimzi)
            site = StrimziSite(
                api,
                cluster.strimzi,
                connect_cluster=connect_cluster,
                url=str(cluster.url),
                configured=cluster.orchestrator == "strimzi",
                poll_s=1.0,
            )
            place = self._places[connect_cluster] = _Place(api, site)
        return place

    async def _regarding(self, place: _Place, note: EventNote) -> Regarding | None:
        where = (note.connect_cluster, note.connector)
        cached = self._found.get(where)
        if cached is not None and time.monotonic() - cached[0] < self.locate_ttl_s:
            return cached[1]
        found = await place.site.locate(note.connector)
        regarding = regarding_of(found, place.api.namespace) if found is not None else None
        self._found[where] = (time.monotonic(), regarding)
        return regarding

    def _counted(self, note: EventNote) -> None:
        self.metrics.kube_events.labels(note.connect_cluster, note.reason).inc()

    def _failed(self, connect_cluster: str, why: str) -> None:
        """Counted always; logged at most once per `complain_every_s` per Connect cluster."""
        self.metrics.kube_event_failures.labels(connect_cluster).inc()
        now = time.monotonic()
        when, since = self._complained.get(connect_cluster, (float("-inf"), 0))
        if now - when < self.complain_every_s:
            self._complained[connect_cluster] = (when, since + 1)
            return
        more = f" ({since} more since the last report)" if since else ""
        log.warning(
            "could not write a Kubernetes Event for Connect cluster %s: %s%s; "
            "remediation goes on without it",
            connect_cluster,
            why,
            more,
        )
        self._complained[connect_cluster] = (now, 0)
