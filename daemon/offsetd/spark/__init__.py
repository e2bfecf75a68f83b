"""Content-based rewind plans computed with PySpark (`offsetd rewind plan`).

A time-only target never needs this package: the offsets toolkit resolves it with ListOffsets.
When the target depends on the data ("the first record after 14:02 whose value.order_id > 1000"),
the job here reads concrete offset ranges with Spark's own Kafka source, evaluates a Spark SQL
predicate in the JVM and reduces the matches to one target per partition; the result is an
ordinary offsets document that `offsetd offsets import` (or the daemon's `rewind` action) applies.

Modules, one concern each:

- `jars`: spark-sql-kafka for local runs, fetched with `mvn` into its own cache folder;
- `session`: the SparkSession (master and conf from offsetd.yaml, secrets never in its conf);
- `predicate`: the predicate checked by Spark's own parser and analyzer;
- `scan`: the Kafka source over the ranges, the predicate, the per-partition aggregation;
- `progress`: stages, records scanned and rate while the job runs;
- `resolve`: which partitions and ranges (Connect REST and ListOffsets, no Spark);
- `job`: the whole run, shared by the CLI and `spark-submit` (`offsetd.cli.spark_submit`);
- `errors`: the errors of a rewind plan, each with its exit code.

What needs no Spark lives below this package, so the CLI and the daemon use it without the
`spark` extra installed: the plan itself (ranges, modes, the document and its summary) is
`offsetd.offsets.rewind_plan`, and applying a skip-run plan (its runs copied to the quarantine
topic before the patch) is `offsetd.remediation.skiprun`. This package imports them, never the
other way round, and pyspark is imported nowhere else.
"""

__all__: list[str] = []
