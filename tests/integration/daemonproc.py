"""`offsetd run` as a child process of a test: its own session, stopped by its PID."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import unique, wait_for

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def decide_only_config(
    stack: StackInfo,
    path: Path,
    *,
    app_id: str,
    rules_dir: Path,
    partitions: int,
    audit_topic: str,
    data_dir: Path,
    dlq_topics: list[str] | None = None,
) -> dict[str, Any]:
    """Write (to `path`) and return the config of an `offsetd run` on the stack that decides
    but never acts: remediation is opted out for every connector, its topics are this test's."""
    data = stack.offsetd_config()
    if dlq_topics is not None:
        data["connect_clusters"]["local"]["dlq_topics"] = dlq_topics
    data["daemon"] = {
        "app_id": app_id,
        "partitions": partitions,
        "rules_dir": str(rules_dir),
        "audit_topic": audit_topic,
        "web_port": free_port(),
        "data_dir": str(data_dir),
    }
    data["remediation"] = {
        "opt_out": ["*"],
        "sagas_topic": unique("offsetd.sagas"),
        "control_topic": unique("offsetd.control"),
        "quarantine_topic": unique("offsetd.quarantine"),
    }
    with path.open("w") as out:
        YAML().dump(data, out)
    return data


class Daemon:
    """One `offsetd run` process in its own session, signalled by its PID (process group)."""

    def __init__(
        self,
        config: Path,
        log: Path,
        port: int,
        *,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """`args` replace `run --config <config>` (e.g. a Deployment's container args); `env`
        is added to the environment; `wrap` turns the command line into the one started (e.g.
        in a pod's mount namespace: offsetd.devstack.kubelet)."""
        self.config, self.log_path, self.port = config, log, port
        self.args = args if args is not None else ["run", "--config", str(config)]
        self.env = env or {}
        self.wrap = wrap or (lambda argv: argv)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> None:
        """Start it; with `wait`, until /metrics answers."""
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.wrap([sys.executable, "-m", "offsetd", *self.args]),
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                start_new_session=True,
            )
        if wait:
            wait_for("the daemon's /metrics", self._metrics_up, timeout_s=120)

    def _metrics_up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"offsetd run exited: {self.log()[-3000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample of the daemon's /metrics (0 when the series does not exist)."""
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the daemon's process group; a daemon slow to stop gets SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
