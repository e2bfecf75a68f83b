"""The stacks of the integration tests, one set per test lane (tests/conftest.py).

The plain stack (Kafka east + west, Connect, MM2) starts at a lane's first test that needs it and
stays for the lane's run. The secure stack and the Kubernetes API servers serve one group of
tests each (the groups "secure" and "kube" of tests/conftest.py, run in one lane one after
another): each starts at its group's first test and stops after the group's last, instead of
holding memory and CPU for the rest of the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.ports import free_ports
from offsetd.devstack.stack import Stack, StackInfo
from tests.conftest import group_of, lane_dir
from tests.integration.kafkautil import ConnectClient
from tests.integration.strimzi_env import StrimziNamespace, new_namespace

REPO = Path(__file__).resolve().parents[2]


class _Held:
    """A stack one group of tests shares: started by the group's first test in this lane and
    stopped right after the lane's last test that needs it (`pytest_runtest_teardown`). The
    group's tests run one after another in one lane (`LaneScheduling`; a test outside the
    group that asks for the stack fails collection), so it is never asked for again once
    stopped. Its run folder is fixed per lane, so a run killed before teardown leaves PID
    records that the next start stops first (`down` signals only processes whose start time
    still matches)."""

    def __init__(self, group: str, start: Callable[[], object], stop: Callable[[], object]) -> None:
        self.group, self._start, self._stop = group, start, stop
        self.value: object | None = None
        self.released = False

    def get(self) -> object:
        if self.released:
            raise RuntimeError(
                f"this lane stopped its {self.group} stack already: every test that needs it "
                f"must be in the group '{self.group}' (tests/conftest.py GROUPS)"
            )
        if self.value is None:
            self._stop()  # a stale one from a killed run
            self.value = self._start()
        return self.value

    def release(self) -> None:
        if self.value is not None:
            self.value = None
            self.released = True
            self._stop()


def _stack_held(name: str, group: str, *, secure: bool, login: str = "scram") -> _Held:
    local = Stack(lane_dir() / name, log=print)
    return _Held(group, lambda: local.up(workers=1, secure=secure, login=login), local.down)


def _kube_held(release: str, group: str) -> _Held:
    cluster = KubeCluster(lane_dir() / f"test-kube-{release}", log=print)

    def start() -> KubeCluster:
        cluster.up(free_ports(3), strimzi_release=release)
        return cluster

    return _Held(group, start, cluster.down)


_HELD: dict[str, _Held] = {
    "secure_stack": _stack_held("test-secure-stack", "secure", secure=True),
    "mtls_stack": _stack_held("test-mtls-stack", "mtls", secure=True, login="mtls"),
    "oauth_stack": _stack_held("test-oauth-stack", "oauth", secure=True, login="oauth"),
    "kube_v1": _kube_held("1.2.0", "kube"),
    "kube_v1beta2": _kube_held("0.45.0", "kube"),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a held stack must be in that stack's group (see `_Held`)."""
    for item in items:
        group = _group(item)
        for name, held in _HELD.items():
            if name in getattr(item, "fixturenames", ()) and group != held.group:
                raise pytest.UsageError(
                    f"{item.nodeid} needs {name}: put its module in the group "
                    f"'{held.group}' (tests/conftest.py GROUPS)"
                )


def _group(item: pytest.Item | None) -> str | None:
    return group_of(item.nodeid) if item is not None else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """Stop the held stacks of a group after its last test in this lane, once that test's
    teardown is done: the module fixtures it ends (a principal's ACLs revoked, connectors
    deleted) still need the stack."""
    try:
        return (yield)
    finally:
        group = _group(item)
        if group is not None and _group(nextitem) != group:
            for held in _HELD.values():
                if held.group == group:
                    held.release()


def pytest_sessionfinish() -> None:
    for held in _HELD.values():
        held.release()


def _config_file(info: StackInfo, folder: Path) -> Path:
    """The offsetd.yaml for a stack, as `offsetd dev env --write-config` writes it."""
    from ruamel.yaml import YAML

    path = folder / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(info.offsetd_config(), out)
    return path


@pytest.fixture(scope="session")
def stack() -> Iterator[StackInfo]:
    """The lane's plaintext stack. For quick local iterations, OFFSETD_TEST_REUSE_STACK=<run
    dir of `offsetd dev up --detach`> runs the tests against that stack and leaves it running
    (CI never sets it)."""
    reuse = os.environ.get("OFFSETD_TEST_REUSE_STACK")
    if reuse:
        yield Stack(Path(reuse)).info()
        return
    local = Stack(lane_dir() / "test-stack", log=print)
    local.down()
    info = local.up(workers=1)
    try:
        yield info
    finally:
        local.down()


@pytest.fixture(scope="session")
def secure_stack() -> StackInfo:
    """The secure variant (`offsetd dev up --secure`): SASL_SSL brokers with ACLs, HTTPS +
    basic-auth Connect; held for the "secure" group (OFFSETD_TEST_REUSE_SECURE_STACK reuses a
    running one)."""
    reuse = os.environ.get("OFFSETD_TEST_REUSE_SECURE_STACK")
    if reuse:
        return Stack(Path(reuse)).info()
    info = _HELD["secure_stack"].get()
    assert isinstance(info, StackInfo)
    return info


@pytest.fixture(scope="session")
def mtls_stack() -> StackInfo:
    """The client-certificate variant (`offsetd dev up --secure --login mtls`); held for the
    "mtls" group (OFFSETD_TEST_REUSE_MTLS_STACK reuses a running one)."""
    reuse = os.environ.get("OFFSETD_TEST_REUSE_MTLS_STACK")
    if reuse:
        return Stack(Path(reuse)).info()
    info = _HELD["mtls_stack"].get()
    assert isinstance(info, StackInfo)
    return info


@pytest.fixture(scope="session")
def oauth_stack() -> StackInfo:
    """The secure stack where offsetd logs in with OAUTHBEARER (`dev up --secure --login
    oauth`): Hydra's tokens on a listener of offsetd's own; held for the "oauth" group."""
    info = _HELD["oauth_stack"].get()
    assert isinstance(info, StackInfo)
    return info


@pytest.fixture(scope="session")
def secure_yaml(secure_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """offsetd.yaml for the secure stack: offsetd's own principal, passwords as files."""
    return _config_file(secure_stack, tmp_path_factory.mktemp("secure-config"))


@pytest.fixture(scope="session")
def connect(stack: StackInfo) -> ConnectClient:
    return ConnectClient(stack.connect["url"])


@pytest.fixture(scope="session")
def east(stack: StackInfo) -> str:
    return stack.clusters["east"]["bootstrap.servers"]


@pytest.fixture(scope="session")
def west(stack: StackInfo) -> str:
    return stack.clusters["west"]["bootstrap.servers"]


@pytest.fixture(scope="session")
def offsetd_yaml(stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offsetd.yaml for the session's stack, as `offsetd dev env --write-config` writes it."""
    return _config_file(stack, tmp_path_factory.mktemp("config"))


@pytest.fixture(scope="session")
def kube_v1() -> KubeCluster:
    """A real API server (etcd + kube-apiserver) with Strimzi 1.2.0's CRDs (v1), held."""
    cluster = _HELD["kube_v1"].get()
    assert isinstance(cluster, KubeCluster)
    return cluster


@pytest.fixture(scope="session")
def kube_v1beta2() -> KubeCluster:
    """The same with Strimzi 0.45.0's CRDs (v1beta2), held."""
    cluster = _HELD["kube_v1beta2"].get()
    assert isinstance(cluster, KubeCluster)
    return cluster


@pytest.fixture
def strimzi_ns(
    kube_v1: KubeCluster, stack: StackInfo, tmp_path: Path, connect: ConnectClient
) -> Iterator[Callable[..., StrimziNamespace]]:
    """Factory: a fresh namespace (v1 unless given another cluster) with its own stand-in
    operator; on teardown the stand-in stops and the test's connectors are deleted."""
    made: list[StrimziNamespace] = []

    def make(kube: KubeCluster | None = None, interval_s: float = 3.0) -> StrimziNamespace:
        ns = new_namespace(kube or kube_v1, stack, tmp_path)
        ns.start_standin(interval_s)
        made.append(ns)
        return ns

    yield make
    for ns in made:
        ns.stop_standin()
        for name in ns.created:
            connect.delete(name)
        ns.admin.close()
