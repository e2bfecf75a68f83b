"""Predicates checked by Spark's own parser and analyzer, and the scan's columns and reduction,
on Spark local over in-memory frames with the Kafka source's schema (no broker needed)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from offsetd.config import SparkSettings
from offsetd.spark import scan
from offsetd.spark.errors import InvalidPredicate, SparkJobFailed
from offsetd.spark.job import run_scan
from offsetd.spark.predicate import check_predicate, check_value_schema
from offsetd.spark.progress import ScanProgress
from offsetd.spark.session import ANSI, start_session

SCHEMA = "order_id INT, status STRING"


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    # Left running: later tests in this process reuse it (getOrCreate); the process ends it.
    return start_session(SparkSettings())


@pytest.mark.parametrize(
    ("predicate", "columns"),
    [
        ("value.order_id > 1000", {"value"}),
        ("value_corrupt OR value.status = 'bad'", {"value_corrupt", "value"}),
        ("exists(headers, h -> h.key = 'trace')", {"headers"}),
        ("upper(cast(key AS STRING)) = 'A' AND offset >= 5", {"key", "offset"}),
    ],
)
def test_accepted_predicates_and_their_columns(
    spark: SparkSession, predicate: str, columns: set[str]
) -> None:
    assert check_predicate(spark, predicate, SCHEMA).columns == columns


@pytest.mark.parametrize(
    ("predicate", "reason"),
    [
        ("offset >= (5", "does not parse"),
        ("offset >= 5 and", "Spark reads its end as an alias"),
        ("reflect('java.lang.System', 'exit', 0) IS NULL", "reflect() calls JVM methods"),
        ("java_method('java.lang.Runtime', 'getRuntime') IS NULL", "java_method() calls JVM"),
        ("try_reflect('java.lang.System', 'exit', 0) IS NULL", "try_reflect() calls JVM"),
        ("REFLECT('a', 'b') IS NULL", "REFLECT() calls JVM methods"),
        ("coalesce(reflect('a', 'b'), 'x') = 'x'", "reflect() calls JVM methods"),
        ("my_udf(value) = 1", "my_udf() is not a Spark built-in function"),
        ("system.builtin.reflect('a', 'b') IS NULL", "qualified name"),
        ("offset IN (SELECT 1)", "subqueries are not allowed"),
        ("no_such_column > 1", "UNRESOLVED_COLUMN"),
        ("max(offset) > 1", "INVALID_WHERE_CONDITION"),
        ("offset + 1", "DATATYPE_MISMATCH"),
        ("", "empty"),
    ],
)
def test_refused_predicates_name_the_expression_and_the_reason(
    spark: SparkSession, predicate: str, reason: str
) -> None:
    with pytest.raises(InvalidPredicate) as info:
        check_predicate(spark, predicate, SCHEMA)
    message = str(info.value)
    assert reason in message
    assert repr(predicate) in message or not predicate
    assert "\n" not in message  # one line, no JVM stack trace
    assert "at org.apache" not in message


def test_value_schema_must_parse(spark: SparkSession) -> None:
    check_value_schema(spark, SCHEMA)
    with pytest.raises(InvalidPredicate, match=r"--value-schema 'order_id INTT,'.*PARSE_SYNTAX"):
        check_value_schema(spark, "order_id INTT,")


def _records(spark: SparkSession, rows: Sequence[tuple[int, int, bytes | None]]) -> DataFrame:
    when = dt.datetime(2026, 11, 21, 14, 2, tzinfo=dt.UTC)
    data: list[tuple[Any, ...]] = [
        (None, value, "t", partition, offset, when + dt.timedelta(seconds=offset), 0, [])
        for partition, offset, value in rows
    ]
    return spark.createDataFrame(data, scan.KAFKA_SCHEMA)


def test_reduction_per_partition_in_the_jvm(spark: SparkSession) -> None:
    rows = [
        (0, 0, b'{"order_id": 5, "status": "ok"}'),
        (0, 1, b'{"order_id": 1500, "status": "ok"}'),
        (0, 2, b'{"order_id": 7, "status": "ok"}'),
        (0, 3, b'{"order_id": 2000, "status": "ok"}'),
        (0, 4, b'{"order_id": '),  # corrupt: order_id NULL, so the predicate is NULL
        (1, 0, None),  # a tombstone: NULL value
        (1, 1, b'{"status": "ok"}'),  # no order_id: NULL
    ]
    frame = scan.with_predicate_columns(_records(spark, rows), SCHEMA)
    found = scan.collect_scans(scan.per_partition(frame, "value.order_id > 1000"))
    p0, p1 = found[("t", 0)], found[("t", 1)]
    assert (p0.scanned, p0.matched, p0.first_match, p0.last_match, p0.first_miss) == (5, 2, 1, 3, 0)
    assert (p1.scanned, p1.matched, p1.first_match) == (2, 0, None)
    assert p0.min_timestamp == int(
        dt.datetime(2026, 11, 21, 14, 2, tzinfo=dt.UTC).timestamp() * 1000
    )
    corrupt = scan.collect_scans(scan.per_partition(frame, "value_corrupt"))
    assert (corrupt[("t", 0)].matched, corrupt[("t", 0)].first_match) == (1, 4)
    assert corrupt[("t", 1)].matched == 0  # a NULL value is not corrupt


def test_raw_values_without_a_schema(spark: SparkSession) -> None:
    rows = [(0, 0, b"hello"), (0, 1, b"BAD record"), (0, 2, b"ok")]
    frame = scan.with_predicate_columns(_records(spark, rows), None)
    found = scan.collect_scans(scan.per_partition(frame, "cast(value AS STRING) LIKE 'BAD%'"))
    assert (found[("t", 0)].matched, found[("t", 0)].first_match) == (1, 1)


AMOUNTS = [
    (0, 0, b'{"amount": "7"}'),
    (0, 1, b'{"amount": "abc"}'),  # CAST('abc' AS INT) throws in ANSI mode, is NULL without
    (0, 2, b'{"amount": "3"}'),
    (0, 3, b'{"amount": "12"}'),
    (0, 4, b'{"amount": "99999999999"}'),  # overflows INT: the same
]
CAST_PREDICATE = "CAST(value.amount AS INT) > 5"


def test_a_value_the_predicate_cannot_convert_does_not_match(spark: SparkSession) -> None:
    """Spark 4 turns ANSI mode on by default; offsetd's session turns it off, so a failing cast
    is NULL (no match) instead of failing the whole scan."""
    assert spark.conf.get(ANSI) == "false"
    check_predicate(spark, CAST_PREDICATE, "amount STRING")
    frame = scan.with_predicate_columns(_records(spark, AMOUNTS), "amount STRING")
    found = run_scan(frame, CAST_PREDICATE)[("t", 0)]
    assert (found.scanned, found.matched, found.first_match, found.last_match) == (5, 2, 0, 3)
    assert found.first_miss == 1


def test_with_ansi_set_explicitly_the_failing_scan_names_the_predicate(
    spark: SparkSession,
) -> None:
    frame = scan.with_predicate_columns(_records(spark, AMOUNTS), "amount STRING")
    spark.conf.set(ANSI, "true")  # as a user's spark.conf may
    try:
        with pytest.raises(SparkJobFailed) as info:
            run_scan(frame, CAST_PREDICATE)
    finally:
        spark.conf.set(ANSI, "false")
    message = str(info.value)
    assert f"while evaluating the predicate {CAST_PREDICATE!r}" in message
    assert "CAST_INVALID_INPUT" in message
    assert "spark.sql.ansi.enabled is true" in message
    assert "\n" not in message
    assert "at org.apache" not in message


def test_progress_reports_tasks_and_estimated_records(spark: SparkSession) -> None:
    lines: list[str] = []
    group = "offsetd-test-progress"
    spark.sparkContext.setJobGroup(group, "progress test")
    progress = ScanProgress(spark.sparkContext, 8_000, lines.append, group, interval_s=0.2)
    with progress:
        # Eight tasks of at least 300 ms each on 2 cores: several polls on any machine.
        spark.range(0, 8, numPartitions=8).selectExpr(
            "java_method('java.lang.Thread', 'sleep', 300L) AS slept"
        ).collect()
    assert lines, "no progress line while the job ran"
    assert all(line.startswith("scanning: stage ") for line in lines)
    assert any("/8 tasks" in line and "records/s" in line for line in lines)
    assert progress.records_estimated() == 8_000  # every task of the first stage is done
