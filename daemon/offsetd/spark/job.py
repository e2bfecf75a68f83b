"""The whole run of a rewind plan, shared by `offsetd rewind plan` and `spark-submit`.

Resolution (Connect REST, ListOffsets) happens before Spark starts, so a bad connector name or
an empty range costs no JVM; then the predicate is checked by Spark, the ranges are scanned,
and the per-partition results become an offsets document through the offsets toolkit.

The session is left running when `compute_plan` returns: a second plan in the same process
reuses it (`getOrCreate`), and the process's exit ends it (the entry points stop it).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from offsetd.config import SparkSettings
from offsetd.offsets.rewind_plan import (
    Mode,
    PartitionScan,
    Request,
    RewindPlan,
    build_plan,
    decide,
    nothing_to_rewind,
)
from offsetd.spark import predicate, scan
from offsetd.spark.errors import NothingToRewind, SparkJobFailed
from offsetd.spark.progress import ScanProgress
from offsetd.spark.resolve import Resolved
from offsetd.spark.session import start_session

__all__ = ["ScanRequest", "compute_plan", "run_scan", "scan_failure"]


@dataclass(frozen=True)
class ScanRequest:
    predicate: str
    mode: Mode
    value_schema: str | None = None
    from_ts: int | None = None
    to_ts: int | None = None
    master: str | None = None
    max_records_per_task: int = scan.DEFAULT_MAX_RECORDS_PER_TASK


def compute_plan(
    settings: SparkSettings,
    resolved: Resolved,
    request: ScanRequest,
    say: Callable[[str], None],
) -> RewindPlan:
    """Scan, decide, and build the plan; raises NothingToRewind when no record matched."""
    spark = start_session(settings, request.master, say)
    try:
        if request.value_schema is not None:
            predicate.check_value_schema(spark, request.value_schema)
        checked = predicate.check_predicate(spark, request.predicate, request.value_schema)
        scans, elapsed = _scan(spark, resolved, request, checked, say)
    except (PySparkException, Py4JError) as exc:
        raise SparkJobFailed(scan_failure(request.predicate, exc)) from None
    decisions = decide(request.mode, resolved.ranges, scans)
    plan = build_plan(
        Request(
            connector=resolved.connector,
            kind=resolved.kind,
            predicate=request.predicate,
            mode=request.mode,
            cluster=resolved.cluster,
            source_alias=resolved.source_alias,
            value_schema=request.value_schema,
            from_timestamp=request.from_ts,
            to_timestamp=request.to_ts,
        ),
        decisions,
        elapsed,
    )
    if not plan.entries:
        raise NothingToRewind(nothing_to_rewind(plan, request.predicate, len(resolved.ranges)))
    return plan


def _scan(
    spark: SparkSession,
    resolved: Resolved,
    request: ScanRequest,
    checked: predicate.CheckedPredicate,
    say: Callable[[str], None],
) -> tuple[dict[tuple[str, int], PartitionScan], float]:
    ranges = [r for r in resolved.ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if not ranges:
        say("no records in the requested range of any partition: nothing to scan")
        return {}, 0.0
    tasks = sum(math.ceil(r.size / request.max_records_per_task) for r in ranges)
    say(
        f"scanning {total:,} records in {len(ranges)} of {len(resolved.ranges)} partitions on "
        f"{resolved.cluster} ({tasks} Spark tasks of at most {request.max_records_per_task:,})"
    )
    options = scan.source_options(
        ranges, request.max_records_per_task, include_headers="headers" in checked.columns
    )
    options.update(scan.kafka_options(resolved.client_config))  # secrets: never logged
    frame = scan.with_predicate_columns(scan.kafka_frame(spark, options), request.value_schema)
    group = f"offsetd-rewind-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, f"rewind plan for {resolved.connector}")
    started = time.monotonic()
    with ScanProgress(spark.sparkContext, total, say, group):
        found = run_scan(frame, request.predicate)
    elapsed = time.monotonic() - started
    rate = total / max(elapsed, 1e-3)
    say(f"scanned {total:,} records in {elapsed:.1f} s ({rate:,.0f} records/s)")
    return found, elapsed


def run_scan(frame: DataFrame, text: str) -> dict[tuple[str, int], PartitionScan]:
    """The per-partition results of `text` over `frame` (the Spark job runs here); a failure
    while it runs is a SparkJobFailed that names the predicate and Spark's reason."""
    try:
        return scan.collect_scans(scan.per_partition(frame, text))
    except (PySparkException, Py4JError) as exc:
        raise SparkJobFailed(scan_failure(text, exc)) from None


# Errors a record's value raises only in ANSI mode (without it, the expression is NULL).
_ANSI_ERRORS = (
    "CAST_INVALID_INPUT",
    "CAST_OVERFLOW",
    "DIVIDE_BY_ZERO",
    "ARITHMETIC_OVERFLOW",
    "INVALID_ARRAY_INDEX",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "spark.sql.ansi.enabled",
)


def scan_failure(text: str, exc: BaseException) -> str:
    """One line: the predicate, Spark's reason, and what to do about an ANSI-mode error."""
    reason = predicate.spark_reason(exc)
    message = f"the scan failed while evaluating the predicate {text!r}: {reason}"
    if any(code in reason for code in _ANSI_ERRORS):
        message += (
            " (spark.sql.ansi.enabled is true in the Spark conf, so one value the predicate "
            "cannot convert fails the whole scan: remove it from spark.conf, offsetd turns it "
            "off, or use try_cast)"
        )
    return message
