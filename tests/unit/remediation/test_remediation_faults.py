"""The crash hooks ship in the wheel, so they must be inert unless a test turns them on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from offsetd.remediation import faults

CRASH_AT_STOP = "crash:stop:after-action"


def _point_in_child(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "from offsetd.remediation import faults; faults.point('stop', 'after-action'); print('on')"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_a_fault_variable_alone_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFSETD_FAULT", CRASH_AT_STOP)
    monkeypatch.delenv("OFFSETD_TEST_HOOKS", raising=False)
    faults.point("stop", "after-action")  # returns: a stray variable in production is inert
    env = {k: v for k, v in os.environ.items() if k != "OFFSETD_TEST_HOOKS"}
    child = _point_in_child({**env, "OFFSETD_FAULT": CRASH_AT_STOP})
    assert (child.returncode, child.stdout.strip()) == (0, "on")


def test_the_hooks_crash_only_where_asked_when_turned_on() -> None:
    env = {**os.environ, "OFFSETD_TEST_HOOKS": "1"}
    elsewhere = _point_in_child({**env, "OFFSETD_FAULT": "crash:patch:before"})
    assert (elsewhere.returncode, elsewhere.stdout.strip()) == (0, "on")
    here = _point_in_child({**env, "OFFSETD_FAULT": CRASH_AT_STOP})
    assert here.returncode == faults.CRASH_EXIT_CODE
    assert "injected crash at stop:after-action" in here.stderr
    assert here.stdout == ""
