"""A Connect worker of a test's own, on the stack's west cluster, that the test may stop at will.

It has its own group id, internal topics and REST port, so stopping it (to write offsets
offline) never touches the shared worker. Built from the devstack's own pieces: the same jars,
java, worker properties and process handling.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from offsetd.devstack import connect, procs
from offsetd.devstack.jars import ensure_kafka_jars, java_executable
from offsetd.devstack.jvm import java_command, render_properties, write_log_config
from offsetd.devstack.ports import HOST, free_ports
from offsetd.devstack.stack import StackInfo

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


@dataclass
class ExtraWorker:
    """One distributed worker, alone in its group; `start`/`stop` may be called repeatedly."""

    group: connect.WorkerGroup
    kafka_cluster_id: str
    run_dir: Path
    port: int = field(default_factory=lambda: free_ports(1)[0])
    record: procs.ProcessRecord | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def offsets_topic(self) -> str:
        return self.group.offsets_topic

    @property
    def running(self) -> bool:
        return self.record is not None and self.record.matches_live_process()

    def start(self, timeout_s: float = 180.0) -> None:
        if self.running:
            return
        config_dir, logs_dir = self.run_dir / "config", self.run_dir / "logs"
        config_dir.mkdir(parents=True, exist_ok=True)
        props = config_dir / "worker.properties"
        props.write_text(render_properties(self.group.worker_properties(self.port)))
        argv = java_command(
            java_executable(),
            ensure_kafka_jars(),
            CONNECT_MAIN,
            [str(props)],
            log_config=write_log_config(config_dir, "worker", "info"),
            logs_dir=logs_dir,
            heap_mb=512,
        )
        self.starts += 1
        log = logs_dir / f"worker-{self.starts}.log"
        self.record = procs.spawn("offline-worker", argv, log, self.run_dir)
        procs.save([self.record], self.run_dir / "processes.json")
        rest = connect.ConnectRest(self.url)
        deadline = time.monotonic() + timeout_s
        try:
            while not connect.is_ready(rest, self.kafka_cluster_id):
                if procs.exited(self.record):
                    raise RuntimeError(f"the extra Connect worker exited; see {log}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the extra Connect worker was not ready; see {log}")
                time.sleep(0.5)
        finally:
            rest.close()

    def stop(self) -> None:
        """Stop the worker (SIGTERM, so it leaves its group and flushes), and wait until gone."""
        if self.record is not None:
            procs.stop([self.record])
            self.record = None


@contextmanager
def extra_worker(stack: StackInfo, run_dir: Path, prefix: str = "offline") -> Iterator[ExtraWorker]:
    """A started worker on west with its own `<prefix>-offsets-<id>` etc.; always stopped after.

    The topic names carry a fresh id, so runs against a reused stack never see each other's
    connectors. The offsets topic gets Connect's default of 25 partitions.
    """
    suffix = uuid.uuid4().hex[:8]
    group = connect.WorkerGroup(
        bootstrap=stack.clusters["west"]["bootstrap.servers"],
        group_id=f"{prefix}-connect-{suffix}",
        offsets_topic=f"{prefix}-offsets-{suffix}",
        configs_topic=f"{prefix}-configs-{suffix}",
        status_topic=f"{prefix}-status-{suffix}",
    )
    worker = ExtraWorker(group, stack.clusters["west"]["cluster.id"], run_dir)
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()
