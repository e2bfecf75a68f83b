"""Only processes whose PID *and* start time match are ever signalled."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from offsetd.devstack import procs


def _sleeper(tmp_path: Path) -> procs.ProcessRecord:
    code = "import time; time.sleep(60)"
    return procs.spawn("sleeper", [sys.executable, "-c", code], tmp_path / "s.log", tmp_path)


def test_a_recycled_pid_is_left_alone(tmp_path: Path) -> None:
    record = _sleeper(tmp_path)
    impostor = dataclasses.replace(record, create_time=record.create_time - 3600)
    try:
        assert procs.stop([impostor], grace_s=1) == []
        assert record.matches_live_process()
    finally:
        assert procs.stop([record], grace_s=5) == ["sleeper"]
    assert not record.matches_live_process()
    assert procs.exited(record)


def test_records_round_trip_and_an_unknown_pid_is_harmless(tmp_path: Path) -> None:
    record = _sleeper(tmp_path)
    try:
        path = tmp_path / "processes.json"
        procs.save([record], path)
        assert procs.load(path) == [record]
    finally:
        procs.stop([record], grace_s=5)
    gone = dataclasses.replace(record, pid=2**22 + 12345)
    assert procs.stop([gone]) == []
    assert procs.load(tmp_path / "missing.json") == []


def test_sigterm_is_followed_by_sigkill_for_a_process_that_ignores_it(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    log = tmp_path / "stubborn.log"
    record = procs.spawn("stubborn", [sys.executable, "-c", code], log, tmp_path)
    while "ready" not in log.read_text():
        pass
    assert procs.stop([record], grace_s=1) == ["stubborn"]
    assert not record.matches_live_process()
