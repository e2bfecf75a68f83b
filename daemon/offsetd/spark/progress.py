"""Progress while the scan runs: stage, tasks done, records read so far and the rate.

A background thread polls Spark's status tracker every few seconds and prints one line when
something changed: active stages, tasks done, records and rate. Records come from the driver's
status store when the source reports input metrics; Spark's batch Kafka source does not, so the
line then shows an estimate (`~`): the planned records times the share of finished scan tasks,
which are even slices of the ranges (`maxRecordsPerPartition`). The summary has exact counts.
Nothing here touches the scan itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark import SparkContext

__all__ = ["ScanProgress"]


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
        elapsed = max(time.monotonic() - self._started, 1e-3)
        records = self.records_read()
        if records:
            parts.append(f"{records:,}/{self._planned:,} records")
        else:
            records = self.records_estimated()
            parts.append(f"~{records:,}/{self._planned:,} records")
        parts.append(f"{records / elapsed:,.0f} records/s")
        return "scanning: " + ", ".join(parts)

    def records_estimated(self) -> int:
        """The planned records times the share of finished scan tasks (tasks are even slices).

        Spark's batch Kafka source does not report records read while it runs, so this is what
        a person watching gets; the summary at the end has the exact counts.
        """
        tracker = self._sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            if job is None or not job.stageIds:
                continue
            info = tracker.getStageInfo(min(job.stageIds))  # the scan is the job's first stage
            if info is not None:
                done, total = done + info.numCompletedTasks, total + info.numTasks
        return self._planned * done // total if total else 0

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
