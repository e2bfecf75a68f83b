"""Kafka source options, Spark conf and the jar pins: what reaches Spark, and what must not."""

from __future__ import annotations

import json
from pathlib import Path

import pyspark
import pytest

from offsetd.config import Settings, SparkSettings
from offsetd.offsets.rewind_plan import PartitionRange
from offsetd.spark import jars
from offsetd.spark.errors import SparkJobFailed
from offsetd.spark.scan import kafka_options, source_options
from offsetd.spark.session import jvm_start_settings, session_conf


def test_source_options_read_exactly_the_ranges_and_skip_empty_ones() -> None:
    ranges = [
        PartitionRange("a", 0, 10, 30),
        PartitionRange("a", 2, 5, 5),  # empty: not assigned at all
        PartitionRange("b", 1, 0, 7),
    ]
    options = source_options(ranges, 50_000, include_headers=False)
    assert json.loads(options["assign"]) == {"a": [0], "b": [1]}
    assert json.loads(options["startingOffsets"]) == {"a": {"0": 10}, "b": {"1": 0}}
    assert json.loads(options["endingOffsets"]) == {"a": {"0": 30}, "b": {"1": 7}}
    assert options["maxRecordsPerPartition"] == "50000"
    assert options["includeHeaders"] == "false"


def test_kafka_options_translate_sasl_and_tls_for_the_java_client() -> None:
    settings = Settings(
        kafka_clusters={
            "prod": {
                "bootstrap_servers": "k1:9093",
                "security_protocol": "SASL_SSL",
                "tls": {"ca_file": "/etc/ca.pem"},
                "sasl": {"mechanism": "SCRAM-SHA-512", "username": "u", "password": 'p"w'},
            }
        }
    )
    options = kafka_options(settings.kafka_clusters["prod"].client_config())
    assert options["kafka.bootstrap.servers"] == "k1:9093"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p\\"w";'
    )


_CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
_KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def _mtls_client(tmp_path: Path, key_text: str = _KEY) -> dict[str, str]:
    (tmp_path / "c.crt").write_text(_CERT)
    (tmp_path / "c.key").write_text(key_text)
    settings = Settings(
        kafka_clusters={
            "prod": {
                "bootstrap_servers": "k1:9093",
                "security_protocol": "SSL",
                "tls": {
                    "ca_file": "/etc/ca.pem",
                    "cert_file": str(tmp_path / "c.crt"),
                    "key_file": str(tmp_path / "c.key"),
                },
            }
        }
    )
    return settings.kafka_clusters["prod"].client_config()


def test_a_client_certificate_becomes_a_pem_key_store_by_value(tmp_path: Path) -> None:
    options = kafka_options(_mtls_client(tmp_path))
    assert options["kafka.security.protocol"] == "SSL"
    assert options["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == _CERT
    assert options["kafka.ssl.keystore.key"] == _KEY
    assert "kafka.ssl.keystore.location" not in options  # by value: executors need no file
    assert "kafka.ssl.key.password" not in options  # an unencrypted key has none
    assert not any(k.startswith("kafka.sasl.") for k in options)


def test_a_pkcs1_key_is_refused_naming_the_field_and_the_conversion(tmp_path: Path) -> None:
    pkcs1 = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"
    with pytest.raises(SparkJobFailed, match=r"tls.key_file .*c.key is not a PKCS#8") as err:
        kafka_options(_mtls_client(tmp_path, pkcs1))
    assert "openssl pkcs8 -topk8" in str(err.value)
    assert "MIIE" not in str(err.value)


def test_an_unreadable_key_file_is_named(tmp_path: Path) -> None:
    client = _mtls_client(tmp_path)
    (tmp_path / "c.key").unlink()
    with pytest.raises(SparkJobFailed, match=r"cannot read tls.key_file .*c.key"):
        kafka_options(client)


def test_the_key_option_is_redacted_by_spark() -> None:
    import re

    conf = session_conf(SparkSettings(), "local[2]")
    for key in ("spark.redaction.regex", "spark.sql.redaction.options.regex"):
        assert re.search(conf[key], "kafka.ssl.keystore.key")
        assert not re.search(conf[key], "kafka.ssl.keystore.type")


def test_local_conf_has_the_pinned_jars_and_no_secrets() -> None:
    conf = session_conf(SparkSettings(conf={"spark.driver.memory": "2g"}), "local[2]")
    assert conf["spark.driver.memory"] == "2g"  # offsetd.yaml wins over the local defaults
    names = [Path(p).name for p in conf["spark.jars"].split(",")]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert any(n.startswith("kafka-clients-3.") for n in names)  # not the broker's 4.x
    assert not any(n.startswith("hadoop-") or n.startswith("spark-sql_") for n in names)
    assert not any("password" in k.lower() or "jaas" in k.lower() for k in conf)


def test_cluster_conf_uses_packages_and_fetches_nothing() -> None:
    packages = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"
    conf = session_conf(SparkSettings(conf={"spark.jars.packages": packages}), "yarn")
    assert conf["spark.jars.packages"] == packages
    assert "spark.jars" not in conf
    assert "spark.driver.memory" not in conf  # local defaults stay local
    assert "jaas" in conf["spark.sql.redaction.options.regex"]


def test_a_standalone_master_gets_a_quiet_driver_and_no_local_defaults() -> None:
    conf = session_conf(SparkSettings(), "spark://127.0.0.1:7077")
    assert conf["spark.ui.showConsoleProgress"] == "false"  # offsetd's own progress lines only
    assert "log4j2.properties" in conf["spark.driver.extraJavaOptions"]
    assert "spark.jars" not in conf  # the cluster's: spark.jars or spark.jars.packages
    assert "spark.driver.memory" not in conf
    assert "spark.sql.shuffle.partitions" not in conf


def test_ansi_mode_is_off_unless_the_spark_conf_sets_it() -> None:
    for master in ("local[2]", "yarn"):
        assert session_conf(SparkSettings(), master)["spark.sql.ansi.enabled"] == "false"
    chosen = SparkSettings(conf={"spark.sql.ansi.enabled": "true"})
    assert session_conf(chosen, "yarn")["spark.sql.ansi.enabled"] == "true"


def test_secret_looking_spark_conf_is_refused() -> None:
    with pytest.raises(ValueError, match="looks like a secret"):
        SparkSettings(conf={"spark.kafka.sasl.password": "x"})


def test_the_pom_serves_the_installed_pyspark() -> None:
    pom = jars.find_pom()
    assert jars.pom_property(pom, "pyspark.version") == pyspark.__version__
    jars.check_pyspark(pom, pyspark.__version__)
    with pytest.raises(SparkJobFailed, match="pins Spark's Kafka source for pyspark"):
        jars.check_pyspark(pom, "3.5.0")


def test_a_finished_jar_folder_is_reused_without_mvn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETD_JAR_CACHE", str(tmp_path / "jars"))
    monkeypatch.setenv("PATH", "")  # no mvn: reuse must not need it
    pom = jars.find_pom()
    with pytest.raises(SparkJobFailed, match="mvn was not found"):
        jars.ensure_spark_kafka_jars(pyspark.__version__, pom)
    import hashlib

    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    version = jars.pom_property(pom, "spark.kafka.version")
    done = tmp_path / "spark-jars" / f"spark-kafka-{version}-{digest}"
    done.mkdir(parents=True)
    (done / "x.jar").write_bytes(b"")
    (done / ".complete").write_text(digest)
    assert jars.ensure_spark_kafka_jars(pyspark.__version__, pom) == [done / "x.jar"]


def test_settings_only_the_jvm_start_reads_are_named_for_spark_submit() -> None:
    """Under spark-submit these offsetd.yaml settings come too late; the job says which."""
    conf = {
        "spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0",
        "spark.driver.memory": "2g",
        "spark.driver.maxResultSize": "1g",  # read at run time: fine
        "spark.sql.shuffle.partitions": "8",
        "spark.submit.deployMode": "client",
    }
    assert jvm_start_settings(conf) == [
        "spark.driver.memory",
        "spark.jars.packages",
        "spark.submit.deployMode",
    ]
    assert jvm_start_settings({"spark.executor.memory": "4g"}) == []
