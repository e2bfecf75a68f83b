"""spark-sql-kafka for local Spark runs, fetched with `mvn` into its own cache folder.

The pom in `deploy/local/spark/` pins the connector and names the pyspark it serves; the copy
is made by `offsetd.jarcache`, as for the Kafka jars of the local stack (a finished folder is
named after the pom's hash, a half copy is never used).
It lives beside the Kafka 4.x jars, never inside them: Spark's Kafka source brings its own
kafka-clients 3.9.x, which must not meet the broker's 4.x jars on one classpath.

On a real cluster none of this runs: the job's conf carries `spark.jars.packages` instead.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from offsetd.jarcache import JarFetchError, cache_root, ensure_copied
from offsetd.spark.errors import SparkJobFailed

__all__ = [
    "POM_RELATIVE",
    "check_pyspark",
    "ensure_spark_kafka_jars",
    "find_pom",
    "pom_property",
    "spark_jars_dir",
]

POM_RELATIVE = Path("deploy/local/spark/pom.xml")
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def find_pom() -> Path:
    """The Spark pom in the source checkout (local Spark runs are a checkout's tool)."""
    here = Path(__file__).resolve()
    for root in [here.parents[3], Path.cwd().resolve(), *Path.cwd().resolve().parents]:
        if (root / POM_RELATIVE).is_file():
            return root / POM_RELATIVE
    raise SparkJobFailed(
        f"cannot find {POM_RELATIVE} for the local Spark Kafka jars: run from an offsetd "
        "checkout, or give spark.jars.packages in the spark: section of offsetd.yaml"
    )


def pom_property(pom: Path, name: str) -> str:
    root = ET.parse(pom).getroot()  # noqa: S314 - our own pom, from the checkout
    node = root.find(f"m:properties/m:{name}", _POM_NS)
    if node is None or not node.text:
        raise SparkJobFailed(f"{pom} has no <{name}> property")
    return node.text.strip()


def check_pyspark(pom: Path, pyspark_version: str) -> None:
    """The jars are pinned for one pyspark; a Kafka source of another version fails at runtime
    with a NoClassDefFoundError deep in a task, so refuse up front instead."""
    wanted = pom_property(pom, "pyspark.version")
    source = pom_property(pom, "spark.kafka.version")
    if source != wanted:
        raise SparkJobFailed(
            f"{pom} pins Spark's Kafka source {source} for pyspark {wanted}: the two must be "
            "the same Spark version"
        )
    if wanted != pyspark_version:
        raise SparkJobFailed(
            f"{pom} pins Spark's Kafka source for pyspark {wanted}, but pyspark "
            f"{pyspark_version} is installed: update <pyspark.version> and the connector "
            "version in the pom together"
        )


def spark_jars_dir() -> Path:
    return cache_root().parent / "spark-jars"


def ensure_spark_kafka_jars(pyspark_version: str, pom: Path | None = None) -> list[Path]:
    """The jars of Spark's Kafka source, fetched with mvn the first time; sorted paths."""
    pom = pom or find_pom()
    check_pyspark(pom, pyspark_version)
    name = f"spark-kafka-{pom_property(pom, 'spark.kafka.version')}"
    try:
        target = ensure_copied(pom, name, "Spark's Kafka source", root=spark_jars_dir())
    except JarFetchError as exc:  # same message, this command's exit code
        raise SparkJobFailed(str(exc)) from exc
    return sorted(target.glob("*.jar"))


if __name__ == "__main__":  # scripts/bootstrap: print the folder, fetching it if needed
    from importlib.metadata import version

    print(ensure_spark_kafka_jars(version("pyspark"))[0].parent)
