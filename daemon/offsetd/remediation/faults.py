"""Crash points for tests: `OFFSETD_FAULT=crash:<step>:<before|after-action|after-progress>`.

Only active when `OFFSETD_TEST_HOOKS=1` is also set, so a stray variable in production does
nothing. The process ends with `os._exit` — no cleanup, no flush, no finally blocks — which is
what a SIGKILL or an OOM kill looks like to the saga's durable progress.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

__all__ = ["CRASH_EXIT_CODE", "When", "point"]

When = Literal["before", "after-action", "after-progress"]
CRASH_EXIT_CODE = 86


def _configured() -> tuple[str, str] | None:
    if os.environ.get("OFFSETD_TEST_HOOKS") != "1":
        return None
    spec = os.environ.get("OFFSETD_FAULT", "")
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != "crash":
        return None
    return parts[1], parts[2]


def point(step: str, when: When) -> None:
    """Exit right here if the test asked for a crash at this step and moment."""
    wanted = _configured()
    if wanted == (step, when):
        sys.stderr.write(f"offsetd: injected crash at {step}:{when}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
