"""Start and stop exactly the processes we started.

A PID alone is not an identity: after a crash or a reboot the number can belong to someone else.
Each record therefore keeps the process start time, and a process is signalled only while its
PID still has that start time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

__all__ = ["ProcessRecord", "exited", "load", "save", "spawn", "stop"]

_START_TIME_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class ProcessRecord:
    """One process of the stack, as written to the run folder."""

    name: str
    pid: int
    create_time: float
    log: str
    argv: tuple[str, ...]

    def matches_live_process(self) -> bool:
        """True only if the PID is alive and is still the process we started."""
        try:
            proc = psutil.Process(self.pid)
            alive = proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
            return alive and abs(proc.create_time() - self.create_time) < _START_TIME_TOLERANCE_S
        except psutil.Error:
            return False


def spawn(name: str, argv: Sequence[str], log_path: Path, cwd: Path) -> ProcessRecord:
    """Start `argv` in its own session (so Ctrl-C in a terminal reaches only our supervisor)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )
    create_time = psutil.Process(proc.pid).create_time()
    return ProcessRecord(name, proc.pid, create_time, str(log_path), tuple(argv))


def stop(records: Sequence[ProcessRecord], grace_s: float = 20.0) -> list[str]:
    """SIGTERM every still-matching process, then SIGKILL what is left after `grace_s`.

    Returns the names of the processes that were signalled. Processes whose PID no longer matches
    are skipped: they already exited, and the PID may now be someone else's.
    """
    live = [r for r in records if r.matches_live_process()]
    for record in live:
        _signal(record, signal.SIGTERM)
    _wait_gone(live, grace_s)
    for record in live:
        if record.matches_live_process():
            _signal(record, signal.SIGKILL)
    _wait_gone(live, 10.0)
    return [r.name for r in live]


def _wait_gone(records: Sequence[ProcessRecord], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(exited(r) for r in records) and time.monotonic() < deadline:
        time.sleep(0.1)


def _signal(record: ProcessRecord, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, sig)


def exited(record: ProcessRecord) -> bool:
    """True once the process is gone, reaping it if it was our child (so no zombie stays)."""
    try:
        pid, _ = os.waitpid(record.pid, os.WNOHANG)
        if pid == record.pid:
            return True
    except ChildProcessError:
        pass  # not our child, e.g. started by an earlier `dev up --detach`
    return not record.matches_live_process()


def save(records: Sequence[ProcessRecord], path: Path) -> None:
    """Write the records atomically, so a crash mid-write never loses the PIDs of live JVMs."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in records], indent=2))
    tmp.replace(path)


def load(path: Path) -> list[ProcessRecord]:
    if not path.exists():
        return []
    raw = json.loads(path.read_text())
    return [
        ProcessRecord(r["name"], r["pid"], r["create_time"], r["log"], tuple(r["argv"]))
        for r in raw
    ]
