"""Who owns a saga, and when its owner is provably gone (`offsetd.remediation.sagas`).

A restarted daemon resumes a saga at once only when its owner provably ended: otherwise two live
workers could run one saga. The proof is the owner's beacon, an abstract Unix socket it holds
until the kernel ends it. These tests use real processes and real SIGKILLs: a beacon held by a
live process is never "dead", the same beacon is once its process is killed, and anything the
proof cannot cover (another host, another network namespace, an identity from before beacons)
is never taken for dead.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from offsetd.remediation.sagas import SagaRecord, SagaStore, hold_beacon, owner_is_dead
from offsetd.remediation.wiring import worker_identity

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="beacons: Linux")

HOLDER = """
import sys, time
from offsetd.remediation.wiring import worker_identity
print(worker_identity(), flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Another process that took a worker identity (and so holds its beacon), and that identity."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        identity = proc.stdout.readline().strip()
        assert identity, "the holder printed no identity"
        yield proc, identity
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@linux_only
def test_an_owner_is_dead_only_once_its_process_was_killed(
    holder: tuple[subprocess.Popen[str], str],
) -> None:
    proc, identity = holder
    assert not owner_is_dead(identity), "a live owner was taken for dead"
    os.killpg(proc.pid, signal.SIGKILL)  # as a kill -9 or an OOM kill: no cleanup at all
    proc.wait(10)
    deadline = time.monotonic() + 5
    while not owner_is_dead(identity):  # the kernel frees the socket as the process ends
        assert time.monotonic() < deadline, f"{identity} still looks alive after SIGKILL"
        time.sleep(0.05)


@linux_only
def test_this_process_is_never_dead_to_itself_and_each_identity_is_new() -> None:
    first, second = worker_identity(), worker_identity()
    assert not owner_is_dead(first)
    assert not owner_is_dead(second)
    # same user, host and PID (as a restarted container with PID 1): the nonce tells them apart
    assert first.split("#")[0] == second.split("#")[0]
    assert first != second


@linux_only
def test_what_the_proof_does_not_cover_is_never_dead() -> None:
    tag = hold_beacon()
    found = re.fullmatch(r"#([0-9a-f]{16}) on ([0-9a-f-]{36})/net:\[([0-9]+)\]", tag)
    assert found is not None, tag
    nonce, boot, net = found.groups()
    free = "0123456789abcdef"  # a beacon nobody holds: only its place decides
    other_boot = "00000000-0000-0000-0000-000000000000"
    assert not owner_is_dead("offsetd@host/1")  # written before beacons existed
    assert not owner_is_dead(f"offsetd@host/1#{free}")  # no place: off Linux
    assert not owner_is_dead(f"offsetd@host/1#{free} on {other_boot}/net:[{net}]")  # elsewhere
    assert not owner_is_dead(f"offsetd@host/1#{free} on {boot}/net:[1]")  # another namespace
    assert owner_is_dead(f"offsetd@host/1#{free} on {boot}/net:[{net}]")
    assert not owner_is_dead(f"offsetd@host/1#{nonce} on {boot}/net:[{net}]")  # held: alive


def _record(epoch: int, owner: str, completed: tuple[str, ...] = ()) -> SagaRecord:
    return SagaRecord(
        key="local/sink/t/0/3",
        kind="skip",
        connect_cluster="local",
        connector="sink",
        decision_id="d1",
        rule="r",
        epoch=epoch,
        owner=owner,
        completed=completed,
    )


def test_a_late_write_of_a_taken_over_owner_does_not_hide_the_new_epoch() -> None:
    """The old owner may finish the step it was in after the takeover and write its progress:
    the store keeps the higher epoch, so `check_owner` still stops the old owner."""
    store = SagaStore({"bootstrap.servers": "127.0.0.1:1"}, "sagas")  # never connects here
    store._keep(_record(1, "a"))
    store._keep(_record(2, "b"))
    store._keep(_record(1, "a", ("stop",)))  # a's late write
    current = store.get("local/sink/t/0/3")
    assert current is not None
    assert (current.epoch, current.owner) == (2, "b")
    store._keep(_record(2, "c"))  # an equal epoch: the newest write stands
    current = store.get("local/sink/t/0/3")
    assert current is not None
    assert current.owner == "c"
