"""Test lanes: the suite runs in several pytest-xdist workers, each in a lane of its own.

A lane owns a run folder (`.offsetd/lanes/<worker>/`, where it keeps every stack it starts:
plain, secure, Kubernetes, Spark) and a block of loopback ports below the kernel's ephemeral
range (`offsetd.devstack.ports`: every process of the lane, its stacks and daemons and the
`offsetd` commands it runs, takes its ports from there). So no lane can stop, disturb or take the
ports of another's stacks. Without xdist the whole run is one lane, `gw0`.

Modules that share a stack, or whose timing assertions must not meet each other, form a group
(`GROUPS`); a group's tests run in one lane, one after another (`LaneScheduling`). So do each
other integration module's (`unit_of`); unit tests go one by one. The units with the most tests
go first, each to whichever lane is free. (xdist's own `--dist
loadgroup` reads the group from a suffix it writes into each node id, which pytest 9.2 no longer
lets it change: pytest-dev/pytest-xdist#1386. The groups here are by module, and need no mark.)

The slow builds some lanes need (kube-apiserver, helm and Ory Hydra from the Go module proxy,
etcd from Debian, offsetd's image) start when the run starts, in the controlling process, beside
the tests: a lane that needs one waits for it on its build lock instead of building it at its
first test.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from offsetd.devstack.ports import PORT_BLOCK_ENV

REPO = Path(__file__).resolve().parents[1]
LANE_PORT_BASE = 20_000  # below the ephemeral range (32768-60999): no outgoing socket gets one
LANE_PORT_SPAN = 1_000

# group -> its modules, in the order the groups are handed out (longest first: tests/README.md)
GROUPS: dict[str, tuple[str, ...]] = {
    # one kube-apiserver pair (v1, v1beta2) for all, and its first use may wait for its build
    "kube": (
        "test_strimzi_skip",
        "test_helm_chart",
        "test_strimzi_daemon",
        "test_strimzi",
        "test_scale_tasks_strimzi",
        "test_strimzi_in_cluster",
    ),
    # timing assertions that must not meet each other: restart gaps, lag cycles and the one-shot
    # command, crash recovery times, the storm's latency
    "timing": (
        "test_restart_backoff",
        "test_lag_field",
        "test_crash_recovery_time",
        "test_dlq_storm",
        "test_lag_list_offsets",
    ),
    # one secure stack (SASL_SSL, ACLs, HTTPS Connect) for all
    "secure": (
        "test_least_privilege",
        "test_secure_toolkit",
        "test_secure_stack",
        "test_secure_failures",
    ),
    # one client-certificate stack (SSL listeners requiring a certificate, mTLS Connect) for all
    "mtls": ("test_mtls",),
    # one secure stack whose offsetd logs in with OAUTHBEARER (Hydra's tokens) for all
    "oauth": ("test_oauth_login",),
    # Spark's JVMs: one at a time
    "spark": ("test_spark_cluster", "test_spark_rewind"),
    "image": ("test_image",),
}
_GROUP_OF = {module: group for group, modules in GROUPS.items() for module in modules}


def group_of(nodeid: str) -> str | None:
    """The group of a test (by its module), None for a test any lane may run."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return _GROUP_OF.get(module)


def unit_of(nodeid: str) -> str:
    """What one lane runs whole, in order: a group; an integration module (its module-scoped
    fixtures, a sink failed once for all its tests or a daemon, are set up once, and tests that
    build on an earlier one's state, as test_locate's do, see it); a unit test alone."""
    group = group_of(nodeid)
    if group is not None:
        return f"group:{group}"
    path = nodeid.split("::", 1)[0]
    return path if path.startswith("tests/integration/") else nodeid


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
    # a new run: the lane's timeline starts empty (xdist's controller runs no test; it starts
    # before its workers, so clearing gw0's here as well changes nothing)
    _timeline().unlink(missing_ok=True)
    if not hasattr(config, "workerinput"):
        config.stash[_RUN_STARTED] = time.time()
    if (
        not hasattr(config, "workerinput")
        and not config.option.collectonly
        and _runs_integration(config)
    ):
        _start_builds()


_RUN_STARTED = pytest.StashKey[float]()


def _timeline() -> Path:
    """One line per test this lane ran: start and end (epoch seconds) and its node id."""
    return lane_dir() / "timeline.tsv"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    started = time.time()
    yield
    _timeline().parent.mkdir(parents=True, exist_ok=True)
    with _timeline().open("a") as out:
        out.write(f"{started:.3f}\t{time.time():.3f}\t{item.nodeid}\n")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Per lane: how many tests, the seconds spent in them, and when its last one ended
    (minutes into the run): a lane that ends long before the others shows a badly spread run."""
    started = config.stash.get(_RUN_STARTED, None)
    if started is None:
        return
    for folder in sorted((REPO / ".offsetd" / "lanes").glob("gw*")):
        path = folder / "timeline.tsv"
        if not path.is_file():
            continue
        rows = [line.split("\t", 2) for line in path.read_text().splitlines() if line]
        rows = [r for r in rows if len(r) == 3 and float(r[0]) >= started]
        if not rows:
            continue
        busy = sum(float(end) - float(begin) for begin, end, _ in rows)
        ended = max(float(end) for _, end, _ in rows) - started
        terminalreporter.write_line(
            f"[lanes] {folder.name}: {len(rows)} tests, {busy:.0f} s in tests, "
            f"its last test ended {ended / 60:.1f} min into the run"
        )


def _runs_integration(config: pytest.Config) -> bool:
    args = [str(a) for a in config.args] or [str(p) for p in config.getini("testpaths")]
    return any("integration" in a or a.rstrip("/") in ("tests", ".") for a in args)


def _start_builds() -> None:
    """The builds some lanes need, each in a thread of this process (they wait on processes);
    a failure is printed and left to the test that needs the build, which reports it."""
    from offsetd.devstack.hydrabin import ensure_hydra
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
        ("Ory Hydra", lambda: ensure_hydra(log=print)),
        ("the image", lambda: ensure_image(log=print)),
    ]
    for what, call in builds:
        threading.Thread(target=build, args=(what, call), name=f"build {what}", daemon=True).start()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The groups first, in `GROUPS` order, then every other test in its own order."""
    order = list(GROUPS)

    def rank(item: pytest.Item) -> int:
        group = group_of(item.nodeid)
        return order.index(group) if group is not None else len(order)

    items.sort(key=rank)  # stable: each group keeps its tests' order


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with our units of work (`unit_of`), handed out most tests first
    (xdist's `--loadscope-reorder`), each to one lane, its tests in order."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class LaneScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return LaneScheduling(config, log)
