"""The scan: Spark's Kafka source over concrete offset ranges, the predicate, one row per partition.

Everything on the hot path runs in the JVM: the Kafka source reads the ranges (split into tasks
of at most `maxRecordsPerPartition` records, so one big partition uses every core), `from_json`
parses values when a schema is given, the predicate is a Catalyst expression, and the reduction
is a single aggregation per Kafka partition. No Python UDF and no Kafka client of ours.

The predicate sees these columns:

- `key`, `headers` (array of {key, value}), `topic`, `partition`, `offset`, `timestamp`;
- `value`: the raw bytes, or with `--value-schema` the struct `from_json` parsed in PERMISSIVE
  mode (malformed JSON gives a struct of nulls);
- `value_corrupt`: true when the value is not valid JSON for the schema (false without one).

A predicate that evaluates to NULL does not match.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from offsetd.offsets.rewind_plan import PartitionRange, PartitionScan
from offsetd.spark.errors import SparkJobFailed

__all__ = [
    "CORRUPT_FIELD",
    "DEFAULT_MAX_RECORDS_PER_TASK",
    "KAFKA_SCHEMA",
    "collect_scans",
    "empty_kafka_frame",
    "kafka_frame",
    "kafka_options",
    "matches",
    "per_partition",
    "source_options",
    "with_predicate_columns",
]

CORRUPT_FIELD = "_offsetd_corrupt_record"
KAFKA_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
DEFAULT_MAX_RECORDS_PER_TASK = 1_000_000


# -- Kafka client options -----------------------------------------------------------------------

_JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def kafka_options(client: Mapping[str, str]) -> dict[str, str]:
    """Java client options (`kafka.*`) from offsetd's librdkafka config of the cluster.

    The result holds secrets (SASL password, the client key, key password): it goes only into
    the Kafka source's options, which Spark redacts (`session.REDACTION`); never print or log it.
    A client certificate (`tls.cert_file`/`key_file`) becomes a PEM key store given by value
    (`ssl.keystore.certificate.chain`, `ssl.keystore.key`), read here on the driver: the
    executors need no copy of the files, as they need none of a SASL password.
    """
    out = {
        "kafka.bootstrap.servers": client["bootstrap.servers"],
        "kafka.security.protocol": client.get("security.protocol", "PLAINTEXT"),
    }
    if "ssl.ca.location" in client:
        out["kafka.ssl.truststore.type"] = "PEM"
        out["kafka.ssl.truststore.location"] = client["ssl.ca.location"]
    if "ssl.certificate.location" in client or "ssl.key.location" in client:
        out.update(_key_store(client))
    if client.get("ssl.endpoint.identification.algorithm") == "none":
        out["kafka.ssl.endpoint.identification.algorithm"] = ""
    mechanism = client.get("sasl.mechanism")
    if mechanism is not None and mechanism.upper() == "OAUTHBEARER":
        # Kafka's Java login takes the client secret in sasl.jaas.config, whose redaction
        # in Spark's logs covers only `password=`: the secret would be logged.
        raise SparkJobFailed(
            "SASL OAUTHBEARER is not supported by the Spark scan: Spark's Kafka source would "
            "log the OAuth client secret; give the scan's cluster a SCRAM or PLAIN principal"
        )
    if mechanism is not None:
        module = _JAAS.get(mechanism.upper())
        if module is None:
            raise SparkJobFailed(f"SASL mechanism {mechanism} is not supported by the Spark scan")
        out["kafka.sasl.mechanism"] = mechanism.upper()
        user, password = _jaas_quote(client["sasl.username"]), _jaas_quote(client["sasl.password"])
        out["kafka.sasl.jaas.config"] = (
            f'{module} required username="{user}" password="{password}";'
        )
    return out


_PKCS8 = ("-----BEGIN PRIVATE KEY-----", "-----BEGIN ENCRYPTED PRIVATE KEY-----")


def _key_store(client: Mapping[str, str]) -> dict[str, str]:
    """The Java client's PEM key store: the certificate chain and a PKCS#8 key (the only key
    format Kafka's PEM key store reads; librdkafka also takes PKCS#1, so say so plainly)."""
    cert_file, key_file = client["ssl.certificate.location"], client["ssl.key.location"]
    cert, key = _read_pem(cert_file, "tls.cert_file"), _read_pem(key_file, "tls.key_file")
    if "-----BEGIN CERTIFICATE-----" not in cert:
        raise SparkJobFailed(f"tls.cert_file {cert_file} holds no PEM certificate")
    if not any(marker in key for marker in _PKCS8):
        raise SparkJobFailed(
            f"tls.key_file {key_file} is not a PKCS#8 PEM key, the only kind Kafka's Java "
            "client (Spark's Kafka source) reads ('-----BEGIN PRIVATE KEY-----'); convert it: "
            f"openssl pkcs8 -topk8 -nocrypt -in {key_file} -out <new key file>"
        )
    out = {
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": cert,
        "kafka.ssl.keystore.key": key,
    }
    if "ssl.key.password" in client:
        out["kafka.ssl.key.password"] = client["ssl.key.password"]
    return out


def _read_pem(path: str, field: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SparkJobFailed(f"cannot read {field} {path}: {exc.__class__.__name__}") from None


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


# -- the frame ----------------------------------------------------------------------------------


def source_options(
    ranges: Sequence[PartitionRange], max_records_per_task: int, include_headers: bool
) -> dict[str, str]:
    """`assign` plus explicit starting/ending offsets: the scan reads exactly these ranges."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for rng in ranges:
        if rng.size == 0:
            continue
        assign.setdefault(rng.topic, []).append(rng.partition)
        starting.setdefault(rng.topic, {})[str(rng.partition)] = rng.start
        ending.setdefault(rng.topic, {})[str(rng.partition)] = rng.end
    return {
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        "maxRecordsPerPartition": str(max_records_per_task),
        "includeHeaders": "true" if include_headers else "false",
        # Records that retention removed after the ranges were resolved cannot be delivered
        # again either: skip them rather than fail the whole scan.
        "failOnDataLoss": "false",
    }


def kafka_frame(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    reader = spark.read.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def empty_kafka_frame(spark: SparkSession) -> DataFrame:
    """A frame with the Kafka source's schema and no rows: for checking a predicate offline."""
    return spark.createDataFrame([], KAFKA_SCHEMA)


def with_predicate_columns(df: DataFrame, value_schema: str | None) -> DataFrame:
    """The columns a predicate sees (see the module docstring)."""
    if value_schema is None:
        return df.withColumn("value_corrupt", F.lit(False))
    schema = f"{value_schema}, {CORRUPT_FIELD} STRING"
    parsed = F.from_json(
        F.col("value").cast("string"),
        schema,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_FIELD},
    )
    return (
        df.withColumn("_offsetd_parsed", parsed)
        .withColumn(
            "value_corrupt",
            F.coalesce(F.col("_offsetd_parsed").getField(CORRUPT_FIELD).isNotNull(), F.lit(False)),
        )
        .withColumn("value", F.col("_offsetd_parsed").dropFields(CORRUPT_FIELD))
        .drop("_offsetd_parsed")
    )


def matches(predicate: str) -> Column:
    """The predicate as a boolean that is never NULL (NULL does not match)."""
    return F.coalesce(F.expr(predicate), F.lit(False))


def per_partition(df: DataFrame, predicate: str) -> DataFrame:
    """One row per Kafka partition: counts and the offsets the modes need."""
    m = matches(predicate)
    return (
        df.select("topic", "partition", "offset", "timestamp", m.alias("m"))
        .groupBy("topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("scanned"),
            F.sum(F.when(F.col("m"), 1).otherwise(0)).alias("matched"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min(F.when(F.col("m"), F.col("offset"))).alias("first_match"),
            F.max(F.when(F.col("m"), F.col("offset"))).alias("last_match"),
            F.min(F.when(~F.col("m"), F.col("offset"))).alias("first_miss"),
            F.unix_millis(F.min("timestamp")).alias("min_ts"),
            F.unix_millis(F.max("timestamp")).alias("max_ts"),
        )
    )


def collect_scans(df: DataFrame) -> dict[tuple[str, int], PartitionScan]:
    out = {}
    for row in df.collect():
        scan = PartitionScan(
            topic=row["topic"],
            partition=int(row["partition"]),
            scanned=int(row["scanned"]),
            matched=int(row["matched"] or 0),
            first_offset=row["first_offset"],
            last_offset=row["last_offset"],
            first_match=row["first_match"],
            last_match=row["last_match"],
            first_miss=row["first_miss"],
            min_timestamp=row["min_ts"],
            max_timestamp=row["max_ts"],
        )
        out[(scan.topic, scan.partition)] = scan
    return out
