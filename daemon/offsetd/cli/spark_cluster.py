"""`offsetd dev spark-cluster`: a Spark standalone master and workers beside the local stack.

Optional: `offsetd rewind plan` needs no cluster (Spark local is its default). The cluster is
for running the plan job the way it runs in production, on a master with executors in other
JVMs (`offsetd.devstack.spark_cluster`). It lives in `<run dir>/spark-cluster`, so one
`--run-dir` names a stack and its cluster; `up` returns once every worker is registered, and
`down` stops exactly the processes `up` started.

The group is its own module, added to `offsetd dev` by `offsetd.cli.dev`, so that it can be
wired without this module importing that one (the run dir's default is the same).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from ruamel.yaml import YAML

from offsetd.cli.devoptions import fail as _fail
from offsetd.cli.devoptions import run_dir_option
from offsetd.cli.devoptions import say as _say
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.spark_cluster import SparkCluster, SparkClusterInfo
from offsetd.errors import OffsetdError
from offsetd.spark.jars import ensure_spark_kafka_jars

__all__ = ["down", "env", "spark_cluster", "up"]


@click.group("spark-cluster")
def spark_cluster() -> None:
    """A Spark standalone cluster on loopback for `offsetd rewind plan` (optional)."""


@spark_cluster.command()
@run_dir_option
@click.option("--workers", default=2, show_default=True, help="Worker processes.")
@click.option("--cores", default=1, show_default=True, help="Cores each worker offers.")
@click.option("--memory", default="1g", show_default=True, help="Memory each worker offers.")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for it.")
def up(run_dir: Path, workers: int, cores: int, memory: str, timeout: float) -> None:
    """Start a master and its workers (pyspark's own Spark) and wait until all are ALIVE."""
    try:
        info = SparkCluster.of_stack(run_dir, log=_say).up(workers, cores, memory, timeout)
    except DevStackError as exc:
        _fail(exc)
    _print(info)


@spark_cluster.command()
@run_dir_option
def down(run_dir: Path) -> None:
    """Stop exactly the processes `spark-cluster up` started (checked by PID and start time)."""
    stopped = SparkCluster.of_stack(run_dir).down()
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@spark_cluster.command()
@run_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the cluster as JSON.")
def env(run_dir: Path, as_json: bool) -> None:
    """Describe the running cluster and how to submit the plan job to it."""
    try:
        info = SparkCluster.of_stack(run_dir).info()
    except DevStackError as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(info.as_env(), indent=2))
    else:
        _print(info)


def _print(info: SparkClusterInfo) -> None:
    click.echo(f"spark master  {info.master_url} (status {info.master_web_url}/json/)")
    for worker in info.workers:
        click.echo(
            f"spark worker  {worker['url']}: {worker['cores']} core(s), {worker['memory']}; "
            f"work dir {worker['work_dir']}"
        )
    click.echo(f"spark         {info.spark_version} from {info.spark_home}")
    click.echo(f"run dir       {info.run_dir} (started in {info.started_in_s} s)")
    try:
        jars = ensure_spark_kafka_jars(info.spark_version)
    except OffsetdError as exc:  # the cluster runs; only the how-to needs the jars
        click.echo(f"(no submit example: {exc})")
        return
    submit = ["spark-submit", *info.submit_options(), "--jars", ",".join(map(str, jars))]
    submit += ["daemon/offsetd/cli/spark_submit.py", "--config", "offsetd.yaml", "..."]
    click.echo("\nsubmit the plan job with:\n  " + shlex.join(submit))
    click.echo("\nor run `offsetd rewind plan` on it with this spark: section in offsetd.yaml:")
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096  # one line per setting: the jar list has no spaces to fold at
    yaml.dump({"spark": info.spark_settings(jars)}, sys.stdout)
