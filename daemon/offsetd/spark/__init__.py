"""Content-based rewind plans computed with PySpark (`offsetd rewind plan`).

A time-only target never needs this package: the offsets toolkit resolves it with ListOffsets.
When the target depends on the data ("the first record after 14:02 whose value.order_id > 1000"),
the job here reads concrete offset ranges with Spark's own Kafka source, evaluates a Spark SQL
predicate in the JVM and reduces the matches to one target per partition; the result is an
ordinary offsets document that `offsetd offsets import` (or the daemon's `rewind` action) applies.

Modules, one concern each:

- `plan`: the pure part — ranges, per-partition results, modes, the document and its summary;
- `jars`: spark-sql-kafka for local runs, fetched with `mvn` into its own cache folder;
- `session`: the SparkSession (master and conf from offsetd.yaml, secrets never in its conf);
- `predicate`: the predicate checked by Spark's own parser and analyzer;
- `scan`: the Kafka source over the ranges, the predicate, the per-partition aggregation;
- `progress`: stages, records scanned and rate while the job runs;
- `resolve`: which partitions and ranges (Connect REST and ListOffsets, no Spark);
- `job`: the whole run, shared by the CLI and `spark-submit` (`__main__`);
- `skiprun`: applying a skip-run plan — its runs copied to the quarantine topic before the patch.

Only `session`, `predicate`, `scan`, `progress` and `job` import pyspark, so the CLI can import
`plan` and `skiprun` (and the daemon `load_plan`) without the `spark` extra installed.
"""
