"""A Spark standalone cluster on loopback, a master and its workers, from pyspark's own files.

`offsetd rewind plan` runs Spark in local mode unless told otherwise, but people who need Spark
for a rewind run it on a cluster, where the driver, each executor and the shuffle between them
are separate JVMs and Spark's Kafka source must reach the executors. This is the smallest such
cluster, an optional part of the local stack, so that the plan job is submitted to a real
master (`spark-submit --master spark://...`) on this machine.

pyspark's wheel ships `bin/spark-class` but not `sbin/start-master.sh` or `start-worker.sh`, so
the master and the workers are Spark's own JVM classes started directly in the foreground
(`spark-class org.apache.spark.deploy.master.Master` and `...worker.Worker`). Each is recorded
by PID and start time like every process of the stack (`offsetd.devstack.procs`) and stopped
only while it is still that process. Everything lives in one folder: the logs, each worker's
work dir (where its executors run and log), and the records. It is `spark-cluster/` inside a
stack's run dir, beside the stack's own files, so that starting or stopping the stack never
touches it and the other way round. Ports are free ones on 127.0.0.1; readiness is the master's
own status page (`/json/`) counting every worker ALIVE.

Small on purpose, because the machine's cores are shared with Kafka, Connect and the tests: the
master and worker daemons get 256 MiB of heap each, each worker offers 1 core and 1 GiB to
executors, and jobs are submitted with 512 MiB executors of 1 core (so two workers run two
executors, one each).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from offsetd.devstack import procs
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import java_executable
from offsetd.devstack.ports import HOST, free_ports

__all__ = [
    "EXECUTOR_MEMORY",
    "MASTER_CLASS",
    "SPARK_CLUSTER_DIR",
    "WORKER_CLASS",
    "SparkCluster",
    "SparkClusterInfo",
    "master_status",
    "spark_home",
]

SPARK_CLUSTER_DIR = "spark-cluster"  # inside a stack's run dir
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "256m"
EXECUTOR_MEMORY = "512m"
_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"


def spark_home() -> Path:
    """pyspark's folder, which is a Spark distribution (bin/, jars/); found, not imported."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DevStackError(
            "pyspark is not installed: install offsetd with the spark extra (`make install`)"
        )
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise DevStackError(f"{home} has no bin/spark-class: pyspark's distribution is incomplete")
    return home


@dataclass
class SparkClusterInfo:
    """What a running cluster is: written to `spark-cluster.json`, printed for its users."""

    run_dir: str
    spark_home: str
    spark_version: str
    master_url: str  # spark://127.0.0.1:<port>
    master_web_url: str
    workers: list[dict[str, Any]]  # name, url, web_url, cores, memory, work_dir
    logs: dict[str, str] = field(default_factory=dict)
    started_in_s: float = 0.0

    def submit_options(self) -> list[str]:
        """`spark-submit` options for a job on this cluster (the driver on loopback too)."""
        return [
            "--master",
            self.master_url,
            *("--conf", f"spark.driver.host={HOST}"),
            *("--conf", f"spark.driver.bindAddress={HOST}"),
            *("--conf", f"spark.executor.memory={EXECUTOR_MEMORY}"),
            *("--conf", "spark.executor.cores=1"),
        ]

    def spark_settings(self, jars: list[Path]) -> dict[str, Any]:
        """The `spark:` section of offsetd.yaml for `offsetd rewind plan` on this cluster: the
        Kafka source's jars are served to the executors by the driver (`spark.jars`)."""
        return {
            "master": self.master_url,
            "conf": {
                "spark.jars": ",".join(str(j) for j in jars),
                "spark.driver.host": HOST,
                "spark.driver.bindAddress": HOST,
                "spark.executor.memory": EXECUTOR_MEMORY,
                "spark.executor.cores": "1",
            },
        }

    def as_env(self) -> dict[str, Any]:
        return asdict(self)


class SparkCluster:
    """The standalone cluster living in one folder (logs, work dirs, PIDs)."""

    def __init__(self, root: Path, log: Callable[[str], None] = lambda _msg: None) -> None:
        """`root` is the cluster's own folder (a stack's `<run dir>/spark-cluster`)."""
        self.root = root.resolve()
        self.log = log
        self._procs_file = self.root / "processes.json"
        self._state_file = self.root / "spark-cluster.json"
        self._records: list[procs.ProcessRecord] = []

    @classmethod
    def of_stack(cls, run_dir: Path, log: Callable[[str], None] = lambda _msg: None) -> Self:
        return cls(run_dir / SPARK_CLUSTER_DIR, log)

    # -- queries -----------------------------------------------------------------------------

    def live_processes(self) -> list[procs.ProcessRecord]:
        return [r for r in procs.load(self._procs_file) if r.matches_live_process()]

    def info(self) -> SparkClusterInfo:
        if not self._state_file.exists() or not self.live_processes():
            raise DevStackError(
                f"no Spark cluster is running in {self.root}; start one with "
                "`offsetd dev spark-cluster up`"
            )
        return SparkClusterInfo(**json.loads(self._state_file.read_text()))

    def status(self) -> dict[str, Any]:
        """The master's own view (`/json/`): workers, running and completed applications."""
        return master_status(self.info().master_web_url)

    # -- lifecycle ---------------------------------------------------------------------------

    def up(
        self, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 120
    ) -> SparkClusterInfo:
        """Start the master, then the workers; return once every worker is ALIVE."""
        if workers < 1:
            raise DevStackError("a Spark cluster needs at least one worker")
        if self.live_processes():
            raise DevStackError(
                f"a Spark cluster is already running in {self.root}; stop it with "
                "`offsetd dev spark-cluster down`"
            )
        started = time.monotonic()
        home = spark_home()
        launch = ["env", *(f"{k}={v}" for k, v in self._env(home).items())]
        for sub in ("logs", "work", "conf"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._procs_file.unlink(missing_ok=True)
        self._state_file.unlink(missing_ok=True)
        self._records = []
        spark_class = [*launch, str(home / "bin" / "spark-class")]
        ports = free_ports(2 + 2 * workers)
        master_url = f"spark://{HOST}:{ports[0]}"
        master_web = f"http://{HOST}:{ports[1]}"
        info = SparkClusterInfo(
            run_dir=str(self.root),
            spark_home=str(home),
            spark_version=importlib.metadata.version("pyspark"),
            master_url=master_url,
            master_web_url=master_web,
            workers=[],
        )
        try:
            self.log(f"starting the Spark master at {master_url}")
            argv = [*spark_class, MASTER_CLASS, "--host", HOST, "--port", str(ports[0])]
            master = self._spawn("spark-master", [*argv, "--webui-port", str(ports[1])])
            info.logs["spark-master"] = master.log
            deadline = started + timeout_s
            self._wait_until(master_web, deadline, lambda s: s.get("status") == "ALIVE")
            for index in range(workers):
                name = f"spark-worker-{index + 1}"
                port, web = ports[2 + 2 * index], ports[3 + 2 * index]
                work_dir = self.root / "work" / name
                work_dir.mkdir(parents=True, exist_ok=True)
                argv = [*spark_class, WORKER_CLASS, "--host", HOST, "--port", str(port)]
                argv += ["--webui-port", str(web), "--cores", str(cores), "--memory", memory]
                argv += ["--work-dir", str(work_dir), master_url]
                record = self._spawn(name, argv)
                info.logs[name] = record.log
                info.workers.append(
                    {
                        "name": name,
                        "url": f"{HOST}:{port}",
                        "web_url": f"http://{HOST}:{web}",
                        "cores": cores,
                        "memory": memory,
                        "work_dir": str(work_dir),
                    }
                )
            self.log(f"waiting for {workers} Spark workers to register")
            self._wait_until(master_web, deadline, lambda s: _alive_workers(s) >= workers)
        except BaseException:
            self.log("stopping what was started")
            procs.stop(self._records)
            self._procs_file.unlink(missing_ok=True)
            raise
        info.started_in_s = round(time.monotonic() - started, 1)
        self._state_file.write_text(json.dumps(asdict(info), indent=2))
        return info

    def down(self) -> list[str]:
        """Stop exactly the recorded processes that are still ours (workers first); idempotent."""
        records = procs.load(self._procs_file)
        workers = [r for r in records if r.name != "spark-master"]
        stopped = procs.stop(workers) + procs.stop([r for r in records if r not in workers])
        self._procs_file.unlink(missing_ok=True)
        self._state_file.unlink(missing_ok=True)
        return stopped

    # -- internals ---------------------------------------------------------------------------

    def _env(self, home: Path) -> dict[str, str]:
        """What the daemons need on top of the inherited environment. It is given through
        `env K=V ... spark-class`: `env` and `spark-class` exec in turn, so the recorded PID
        and start time are the JVM's own, and the process list shows the settings."""
        java = Path(java_executable()).resolve()
        return {
            "SPARK_HOME": str(home),
            "JAVA_HOME": str(java.parents[1]),  # .../bin/java -> the JDK (spark-class wants it)
            "SPARK_CONF_DIR": str(self.root / "conf"),  # empty: no stray spark-defaults.conf
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_HOSTNAME": HOST,  # what the daemons advertise
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": _JVM_OPTIONS,
            # executors would run Python only for Python UDFs (the scan has none): this one
            "PYSPARK_PYTHON": sys.executable,
        }

    def _spawn(self, name: str, argv: list[str]) -> procs.ProcessRecord:
        record = procs.spawn(name, argv, self.root / "logs" / f"{name}.log", self.root)
        self._records.append(record)
        procs.save(self._records, self._procs_file)
        return record

    def _wait_until(
        self, web_url: str, deadline: float, ready: Callable[[dict[str, Any]], bool]
    ) -> None:
        """Poll the master's status until `ready` holds; fail fast when a process died."""
        last: dict[str, Any] = {}
        while True:
            dead = [r for r in self._records if procs.exited(r)]
            if dead:
                raise DevStackError(_death_message(dead[0]))
            try:
                last = master_status(web_url)
                if ready(last):
                    return
            except (httpx.HTTPError, ValueError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise DevStackError(
                    f"the Spark cluster was not ready in time (master status: "
                    f"{last.get('status', 'no answer')}, {_alive_workers(last)} workers alive); "
                    f"see the logs in {self.root / 'logs'}"
                )
            time.sleep(0.5)


def master_status(web_url: str) -> dict[str, Any]:
    """The standalone master's status page as JSON (its web UI's `/json/`)."""
    response = httpx.get(f"{web_url}/json/", timeout=5)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def _alive_workers(status: dict[str, Any]) -> int:
    return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")


def _death_message(record: procs.ProcessRecord) -> str:
    text = Path(record.log).read_text(errors="replace") if Path(record.log).exists() else ""
    last = next(
        (ln for ln in reversed(text.splitlines()) if "ERROR" in ln or "Exception" in ln), ""
    )
    return f"{record.name} exited during start-up; see {record.log}" + (
        f" ({last.strip()[:200]})" if last else ""
    )
