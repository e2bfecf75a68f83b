"""The Spark standalone cluster's pieces that need no JVM: where Spark is, what is submitted,
what a stopped or absent cluster says (the cluster itself runs in test_spark_cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from offsetd.cli.spark_cluster import spark_cluster
from offsetd.config import SparkSettings
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.spark_cluster import (
    EXECUTOR_MEMORY,
    SPARK_CLUSTER_DIR,
    SparkCluster,
    SparkClusterInfo,
    spark_home,
)


def _info() -> SparkClusterInfo:
    return SparkClusterInfo(
        run_dir="/tmp/x/spark-cluster",
        spark_home="/opt/pyspark",
        spark_version="4.0.0",
        master_url="spark://127.0.0.1:7077",
        master_web_url="http://127.0.0.1:8080",
        workers=[],
    )


def test_spark_is_pyspark_own_distribution() -> None:
    home = spark_home()
    assert (home / "bin" / "spark-class").is_file()
    assert (home / "jars").is_dir()
    assert not (home / "sbin" / "start-master.sh").exists()  # why the classes are run directly


def test_jobs_are_submitted_small_and_on_loopback() -> None:
    options = _info().submit_options()
    assert options[:2] == ["--master", "spark://127.0.0.1:7077"]
    confs = dict(o.split("=", 1) for o in options[3::2])
    assert confs == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": "1",
    }


def test_the_offsetd_yaml_section_is_valid_config() -> None:
    jars = [Path("/cache/a.jar"), Path("/cache/b.jar")]
    section = _info().spark_settings(jars)
    settings = SparkSettings.model_validate(section)
    assert settings.master == "spark://127.0.0.1:7077"
    assert settings.conf["spark.jars"] == "/cache/a.jar,/cache/b.jar"


def test_the_cluster_lives_beside_the_stack_not_in_its_files(tmp_path: Path) -> None:
    cluster = SparkCluster.of_stack(tmp_path)
    assert cluster.root == (tmp_path / SPARK_CLUSTER_DIR).resolve()


def test_an_absent_cluster_is_named_and_down_is_idempotent(tmp_path: Path) -> None:
    cluster = SparkCluster.of_stack(tmp_path)
    with pytest.raises(DevStackError, match="no Spark cluster is running"):
        cluster.info()
    assert cluster.down() == []
    assert cluster.down() == []


def test_a_cluster_needs_a_worker(tmp_path: Path) -> None:
    with pytest.raises(DevStackError, match="at least one worker"):
        SparkCluster.of_stack(tmp_path).up(workers=0)


def test_the_cli_says_when_nothing_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(spark_cluster, ["env", "--run-dir", str(tmp_path)])
    assert result.exit_code == DevStackError.exit_code
    assert "no Spark cluster is running" in result.output
    result = CliRunner().invoke(spark_cluster, ["down", "--run-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert result.output == "nothing was running\n"
