"""The SparkSession of a rewind scan: master and conf from offsetd.yaml, nothing secret in it.

Spark prints and logs its conf (the UI, event logs, `spark.sparkContext.getConf()`), so the
conf only ever holds what `spark:` in offsetd.yaml holds (secret-looking keys are refused there)
plus a few local defaults. Kafka credentials go into the Kafka source's options instead, which
Spark redacts in plans and never copies into its conf.

Local masters get Spark's Kafka source from the jar cache (`offsetd.spark.jars`); other masters
must name it with `spark.jars.packages` (or ship it in their image).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pyspark
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from offsetd.config import SparkSettings
from offsetd.spark.jars import ensure_spark_kafka_jars

__all__ = [
    "ANSI",
    "APP_NAME",
    "DRIVER_DEFAULTS",
    "LOCAL_DEFAULTS",
    "REDACTION",
    "SEMANTICS",
    "jvm_start_settings",
    "session_conf",
    "start_session",
    "stop_active_session",
    "submitted_master",
]

APP_NAME = "offsetd-rewind-plan"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# On every master, for the driver, which is this process (`offsetd rewind plan` runs it in
# client mode): offsetd prints its own progress lines, so Spark's console bar would only be
# interleaved with them, and the driver logs only errors (a cluster run is as quiet as a local
# one). Under spark-submit the JVM has started already, so the log setting takes no effect.
DRIVER_DEFAULTS: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG_CONFIG}",
}

# Modest on purpose: a laptop or CI runner shares its cores (the scan is I/O and JSON bound).
LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.executor.heartbeatInterval": "2s",  # fresher records-read figures for progress
    # The catalog creates its warehouse folder on first use; never in the caller's checkout.
    "spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / "offsetd-spark-warehouse"),
}


# On every master: Spark redacts matching option keys in plans, logs and event logs; the Kafka
# source's `kafka.sasl.jaas.config` (which holds the password) and `kafka.ssl.keystore.key` (a
# client certificate's key) match neither default pattern.
REDACTION: Mapping[str, str] = {
    "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|jaas|keystore[.]key",
    "spark.sql.redaction.options.regex": "(?i)url|jaas|password|secret|token|keystore[.]key",
}


# On every master, unless offsetd.yaml's spark.conf sets it: Spark 4 turns ANSI mode on by
# default, and then one bad value fails the whole scan (`CAST(value.amount AS INT)` over "abc"
# throws CAST_INVALID_INPUT). A predicate that cannot be evaluated on a record is NULL, and a
# NULL predicate does not match: the scan goes on, as the predicate's documentation promises.
ANSI = "spark.sql.ansi.enabled"
SEMANTICS: Mapping[str, str] = {ANSI: "false"}


def session_conf(settings: SparkSettings, master: str) -> dict[str, str]:
    """The conf to start Spark with (pure, apart from fetching the local jars)."""
    conf: dict[str, str] = {**REDACTION, **SEMANTICS, **DRIVER_DEFAULTS}
    local = master.startswith("local")
    if local:
        conf.update(LOCAL_DEFAULTS)
    conf.update(settings.conf)
    if local and "spark.jars.packages" not in conf and "spark.jars" not in conf:
        jars = ensure_spark_kafka_jars(pyspark.__version__)
        conf["spark.jars"] = ",".join(str(p) for p in jars)
    return conf


# Read only when the JVM starts: under spark-submit, which starts it, offsetd.yaml is too late.
_JVM_START_PREFIXES = ("spark.jars", "spark.files", "spark.submit.")
_JVM_START_KEYS = frozenset(
    {
        "spark.driver.memory",
        "spark.driver.cores",
        "spark.driver.extraJavaOptions",
        "spark.driver.extraClassPath",
        "spark.driver.extraLibraryPath",
    }
)


def jvm_start_settings(conf: Mapping[str, str]) -> list[str]:
    """The keys of `conf` that only the JVM's start reads (sorted)."""
    return sorted(k for k in conf if k in _JVM_START_KEYS or k.startswith(_JVM_START_PREFIXES))


def submitted_master() -> str | None:
    """The master `spark-submit --master` chose, when spark-submit started this process.

    spark-submit launches the JVM first and hands pyspark its gateway; the master it was given
    is then one of the JVM's Spark properties, and it wins over offsetd.yaml's `spark.master`
    (the same job file runs unchanged on YARN, Kubernetes or a standalone cluster)."""
    return _submitted("spark.master") or None


def _submitted(key: str) -> str | None:
    """A Spark property spark-submit was given (`--conf`), when it started this process."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    SparkContext._ensure_initialized()  # connect to that JVM, so the conf reads its properties
    value = SparkConf().get(key, None)
    return None if value is None else str(value)


def start_session(
    settings: SparkSettings, master: str | None = None, say: Callable[[str], None] | None = None
) -> SparkSession:
    master = master or submitted_master() or settings.master
    conf = session_conf(settings, master)
    submitted = _submitted(ANSI)
    if ANSI not in settings.conf and submitted is not None:
        conf[ANSI] = submitted  # spark-submit --conf set it explicitly: that wins
    if say is not None:
        say(f"starting Spark {pyspark.__version__} ({master})")
        late = jvm_start_settings(settings.conf) if os.environ.get("PYSPARK_GATEWAY_PORT") else []
        if late:
            say(
                "spark-submit started the JVM, so these offsetd.yaml spark.conf settings take no "
                f"effect: {', '.join(late)}; give them to spark-submit (--packages, --jars, --conf)"
            )
    builder = SparkSession.builder.master(master).appName(APP_NAME)
    for key, value in sorted(conf.items()):
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # getOrCreate may return a session that already existed: the setting must hold for the scan.
    spark.conf.set(ANSI, conf[ANSI])
    spark.sparkContext.setLogLevel("ERROR")
    # pyspark logs every analysis error with its JVM stack trace; offsetd reports it in one line.
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logging.getLogger(name).disabled = True
    return spark


def stop_active_session() -> None:
    """Stop the session a job left running (the spark-submit entry point, on its way out)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
