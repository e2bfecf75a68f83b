"""Test lanes: the suite runs in several pytest-xdist workers, each in a lane of its own.

A lane owns a run folder (`.offsetd/lanes/<worker>/`, where it keeps every stack it starts:
plain, secure, Kubernetes, Spark) and a block of loopback ports below the kernel's ephemeral
range (`offsetd.devstack.ports`: every process of the lane, its stacks and daemons and the
`offsetd` commands it runs, takes its ports from there). So no lane can stop, disturb or take the
ports of another's stacks. Without xdist the whole run is one lane, `gw0`.

Tests that share a stack or need the machine to themselves carry an `xdist_group` (see
tests/README.md); `--dist loadgroup` runs each group's tests in one lane, one after another.
Groups that run longest are handed out first.

The slow builds some lanes need (kube-apiserver and helm from the Go module proxy, etcd from
Debian, offsetd's image) start when the run starts, in the controlling process, beside the tests:
a lane that needs one waits for it on its build lock instead of building it at its first test.
"""

from __future__ import annotations

import os
import shutil
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from offsetd.devstack.ports import PORT_BLOCK_ENV

REPO = Path(__file__).resolve().parents[1]
LANE_PORT_BASE = 20_000  # below the ephemeral range (32768-60999): no outgoing socket gets one
LANE_PORT_SPAN = 1_000

# The groups, longest first (measured: tests/README.md). A group's tests run in one lane, in
# order; the scheduler hands out work in collection order, so these lead.
GROUP_ORDER = ("kube", "secure", "timing", "image", "spark")


def lane() -> str:
    """This process's lane: its xdist worker id (`gw0`, `gw1`, ...), `gw0` without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0")


def lane_dir() -> Path:
    """The lane's run folder: stacks started by its tests live here."""
    return REPO / ".offsetd" / "lanes" / lane()


def pytest_configure(config: pytest.Config) -> None:
    """The lane's port block for this process and everything it starts (the xdist controller
    sets gw0's first; each worker then its own); the controller starts the slow builds."""
    index = int(lane().removeprefix("gw") or 0)
    low = LANE_PORT_BASE + index * LANE_PORT_SPAN
    claims = lane_dir() / "port-claims"
    shutil.rmtree(claims, ignore_errors=True)  # a new run: every port of the block is free again
    os.environ[PORT_BLOCK_ENV] = f"{low}-{low + LANE_PORT_SPAN - 1}:{claims}"
    if (
        not hasattr(config, "workerinput")
        and not config.option.collectonly
        and _runs_integration(config)
    ):
        _start_builds()


def _runs_integration(config: pytest.Config) -> bool:
    args = [str(a) for a in config.args] or [str(p) for p in config.getini("testpaths")]
    return any("integration" in a or a.rstrip("/") in ("tests", ".") for a in args)


def _start_builds() -> None:
    """The builds some lanes need, each in a thread of this process (they wait on processes);
    a failure is printed and left to the test that needs the build, which reports it."""
    from offsetd.devstack.image import ensure_image
    from offsetd.devstack.kubebin import ensure_etcd, ensure_helm, ensure_kube_apiserver

    def build(what: str, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception:
            print(f"[lanes] building {what} ahead failed; its tests will try again:")
            traceback.print_exc()

    builds: list[tuple[str, Callable[[], object]]] = [
        ("etcd", lambda: ensure_etcd(log=print)),
        ("kube-apiserver", lambda: ensure_kube_apiserver(log=print)),
        ("helm", lambda: ensure_helm(log=print)),
        ("the image", lambda: ensure_image(log=print)),
    ]
    for what, call in builds:
        threading.Thread(target=build, args=(what, call), name=f"build {what}", daemon=True).start()


def _group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long groups first (in GROUP_ORDER), then the rest in their own order."""

    def rank(item: pytest.Item) -> int:
        group = _group(item)
        return GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)

    items.sort(key=rank)  # stable: each group keeps its tests' order
