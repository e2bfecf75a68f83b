"""`LagExporter`: lag collection in a background thread; `render()` is the last page, as bytes.

The daemon embeds it in exactly one worker (`offsetd.lag.ownership`: the owner of partition 0
of its events topic; it reads every offsets topic from the beginning) and appends `render()` to
that worker's `/metrics` page; `offsetd lag serve` runs it alone.

    exporter = LagExporter(settings)
    exporter.start()            # first cycle runs in the background thread
    body = exporter.render()    # b"" until the first cycle has finished
    exporter.stop()             # ends the thread, persists the status windows

A thread, not an asyncio task: the cycle blocks in librdkafka calls (ListOffsets, consume), and
keeping them off the daemon's event loop is the point. The thread swaps in a new snapshot and
page at the end of each cycle (one reference assignment each, atomic under the GIL); readers
never wait for a cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from offsetd.config import Settings
from offsetd.lag.collector import Collector
from offsetd.lag.exposition import render
from offsetd.lag.progress import progress_news
from offsetd.lag.snapshot import Snapshot

__all__ = ["STATE_FILE_NAME", "LagExporter", "ProgressSink"]

#: Where a cycle's progress events go (the daemon: nudges to each connector's owner), called in
#: the collection thread; it returns once they are sent.
ProgressSink = Callable[[Sequence[tuple[str, dict[str, object]]]], None]

STATE_FILE_NAME = "mm2-lag-windows.json"
log = logging.getLogger(__name__)


class LagExporter:
    """Collects MM2 lag every `lag.interval` and keeps the rendered page."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        admin_factory: Callable[[dict[str, str]], Any] | None = None,
        state_file: Path | None = None,
        read_only_state: bool = False,
        refusals_fatal: bool = False,
        on_progress: ProgressSink | None = None,
    ) -> None:
        self.settings = settings
        self.on_progress = on_progress if settings.progress.events else None
        path = state_file or settings.lag.state_file or settings.daemon.data_dir / STATE_FILE_NAME
        self._collector = Collector(
            settings,
            clock=clock,
            admin_factory=admin_factory,
            state_file=path,
            read_only_state=read_only_state,
            refusals_fatal=refusals_fatal,
        )
        self._snapshot: Snapshot | None = None
        self._page = b""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one cycle at a time (thread vs. run_once)
        self.cycles = 0

    @property
    def state_file(self) -> Path:
        return self._collector.state_file or Path()

    def run_once(self) -> Snapshot:
        """One cycle now, in the caller's thread; the page is updated as well."""
        with self._lock:
            snapshot = self._collector.collect()
            page = render(
                snapshot,
                aggregate_per_topic=self.settings.lag.aggregate_per_topic,
                errors_total=dict(self._collector.errors_total),
            )
            self._snapshot, self._page = snapshot, page
            self.cycles += 1
        for stage, message in snapshot.errors.items():
            log.warning("mm2 lag: %s: %s", stage, message)
        self._send_progress(snapshot)
        return snapshot

    def _send_progress(self, snapshot: Snapshot) -> None:
        tracker = self._collector.progress
        reports = self._collector.reports
        if self.on_progress is None or tracker is None or not reports:
            return
        clusters = {r.progress.connect_cluster for r in reports}
        stuck = {cluster: tracker.stuck(cluster) for cluster in clusters}
        news = progress_news(reports, snapshot.taken_ms, stuck)
        try:
            self.on_progress(news)
        except Exception as exc:  # the next cycle sends the stuck states again
            # A send that fails is the daemon stopping (its sends cancelled) or Kafka not
            # answering: one line, not a traceback in the middle of an ordinary shutdown.
            log.warning(
                "could not send %d progress event(s): %s", len(reports), str(exc) or repr(exc)
            )

    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def render(self) -> bytes:
        """The last rendered page (Prometheus text format 0.0.4); b"" before the first cycle."""
        return self._page

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="offsetd-mm2-lag", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        with self._lock:
            self._collector.close()

    def _loop(self) -> None:
        interval = self.settings.lag.interval / 1000.0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.run_once()
            except Exception:  # never let the thread die: the page would silently freeze
                log.exception("mm2 lag collection cycle failed")
            self._stop.wait(max(0.0, interval - (time.monotonic() - started)))
