"""Progress while the scan runs: stage, tasks done, records read so far and the rate.

A background thread polls Spark's status tracker (tasks) and the driver's status store (records
read by the Kafka source, refreshed by executor heartbeats) every few seconds and prints one line
when something changed. Progress is best effort: if the status store is not reachable through
py4j, the line carries task counts only. Nothing here touches the scan itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import SparkContext


class ScanProgress:
    def __init__(
        self,
        sc: SparkContext,
        planned_records: int,
        say: Callable[[str], None],
        group: str,
        interval_s: float = 3.0,
    ) -> None:
        self._sc = sc
        self._group = group
        self._planned = planned_records
        self._say = say
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offsetd-scan-progress", daemon=True)
        self._started = time.monotonic()
        self._last = ""

    def __enter__(self) -> ScanProgress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                line = self.line()
            except Py4JError:  # the context is stopping
                return
            if line and line != self._last:
                self._last = line
                self._say(line)

    def line(self) -> str:
        tracker = self._sc.statusTracker()
        parts = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        if not parts:
            return ""
        records = self.records_read()
        elapsed = max(time.monotonic() - self._started, 1e-3)
        if records is not None:
            parts.append(
                f"{records:,}/{self._planned:,} records, {records / elapsed:,.0f} records/s"
            )
        return "scanning: " + ", ".join(parts)

    def records_read(self) -> int | None:
        """Records read so far by the stages of this job group (the Kafka source's input)."""
        tracker = self._sc.statusTracker()
        try:
            store: Any = self._sc._jsc.sc().statusStore()  # no Python API
        except Py4JError:
            return None
        total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else []:
                try:
                    total += int(store.lastStageAttempt(stage_id).inputRecords())
                except Py4JError:  # not started yet
                    continue
        return total
