"""One real local stack (Kafka east + west, Connect, MM2) for the whole integration session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from offsetd.devstack.stack import Stack, StackInfo
from tests.integration.kafkautil import ConnectClient

REPO = Path(__file__).resolve().parents[2]
TEST_STACK_DIR = REPO / ".offsetd" / "test-stack"


@pytest.fixture(scope="session")
def stack() -> Iterator[StackInfo]:
    """Start the stack once; stale processes from a crashed earlier run are stopped first.

    The run folder is fixed so that a test run killed before teardown leaves PID records behind
    that the next run can use; `down` only signals processes whose start time still matches.
    For quick local iterations, OFFSETD_TEST_REUSE_STACK=<run dir of `offsetd dev up --detach`>
    runs the tests against that stack and leaves it running (CI never sets it).
    """
    reuse = os.environ.get("OFFSETD_TEST_REUSE_STACK")
    if reuse:
        yield Stack(Path(reuse)).info()
        return
    local = Stack(TEST_STACK_DIR, log=print)
    local.down()
    info = local.up(workers=1)
    try:
        yield info
    finally:
        local.down()


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
    from ruamel.yaml import YAML

    path = tmp_path_factory.mktemp("config") / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(stack.offsetd_config(), out)
    return path
