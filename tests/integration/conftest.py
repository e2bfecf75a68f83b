"""One real local stack (Kafka east + west, Connect, MM2) for the whole integration session."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.ports import free_ports
from offsetd.devstack.stack import Stack, StackInfo
from tests.integration.kafkautil import ConnectClient
from tests.integration.strimzi_env import StrimziNamespace, new_namespace

REPO = Path(__file__).resolve().parents[2]
TEST_STACK_DIR = REPO / ".offsetd" / "test-stack"
TEST_SECURE_STACK_DIR = REPO / ".offsetd" / "test-secure-stack"


def _session_stack(run_dir: Path, reuse_variable: str, *, secure: bool) -> Iterator[StackInfo]:
    """Start a stack once; stale processes from a crashed earlier run are stopped first.

    The run folder is fixed so that a test run killed before teardown leaves PID records behind
    that the next run can use; `down` only signals processes whose start time still matches.
    For quick local iterations, `reuse_variable`=<run dir of `offsetd dev up --detach`> runs the
    tests against that stack and leaves it running (CI never sets it).
    """
    reuse = os.environ.get(reuse_variable)
    if reuse:
        yield Stack(Path(reuse)).info()
        return
    local = Stack(run_dir, log=print)
    local.down()
    info = local.up(workers=1, secure=secure)
    try:
        yield info
    finally:
        local.down()


def _config_file(info: StackInfo, folder: Path) -> Path:
    """The offsetd.yaml for a stack, as `offsetd dev env --write-config` writes it."""
    from ruamel.yaml import YAML

    path = folder / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(info.offsetd_config(), out)
    return path


@pytest.fixture(scope="session")
def stack() -> Iterator[StackInfo]:
    """The plaintext stack (OFFSETD_TEST_REUSE_STACK reuses one)."""
    yield from _session_stack(TEST_STACK_DIR, "OFFSETD_TEST_REUSE_STACK", secure=False)


@pytest.fixture(scope="session")
def secure_stack() -> Iterator[StackInfo]:
    """The secure variant (`offsetd dev up --secure`): SASL_SSL brokers with ACLs, HTTPS +
    basic-auth Connect. Started on first use, next to the plaintext stack
    (OFFSETD_TEST_REUSE_SECURE_STACK reuses one)."""
    yield from _session_stack(TEST_SECURE_STACK_DIR, "OFFSETD_TEST_REUSE_SECURE_STACK", secure=True)


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


def _kube(release: str) -> Iterator[KubeCluster]:
    """A real API server (etcd + kube-apiserver) with Strimzi's CRDs of `release`."""
    cluster = KubeCluster(REPO / ".offsetd" / f"test-kube-{release}", log=print)
    cluster.down()
    cluster.up(free_ports(3), strimzi_release=release)
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def kube_v1() -> Iterator[KubeCluster]:
    yield from _kube("1.2.0")


@pytest.fixture(scope="session")
def kube_v1beta2() -> Iterator[KubeCluster]:
    yield from _kube("0.45.0")


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
