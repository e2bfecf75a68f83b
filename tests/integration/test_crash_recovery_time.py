"""How long a connector stays STOPPED when `offsetd run` is killed in the middle of a skip saga.

Issue 13: after a kill -9 mid-saga, the restarted daemon waited ~53 s — the consumer group keeps a
member that died without leaving for its whole session timeout (faust: 60 s), and the saga was
resumed only once the group had assigned partitions again — while the connector it had stopped
stayed STOPPED. The promise: a connector is not left STOPPED by offsetd much longer than offsetd
takes to start.

For each moment of the saga at which the connector is STOPPED (right after the stop, before and
after the offsets patch, before the resume), a real `offsetd run` in enforce mode skips a real
poison record and dies at that moment with `os._exit` (`OFFSETD_FAULT`, `offsetd.remediation.
faults`: no cleanup, no LeaveGroup, no flush — to Kafka and Connect exactly a SIGKILL). It is
restarted at once, as a supervisor would, with the default group settings: the dead member is
still in the group, which is the case to provoke. A thread polls the connector's status every
0.1 s throughout. Measured per case:
- `own start`: how long this daemon took to start when nothing was in its way (spawn -> /metrics,
  the pre-crash start in a fresh group: each case has its own app id, so no case inherits a dead
  member from the one before);
- `stopped`: the whole time the connector was STOPPED (poll samples);
- `after restart`: from the restart's spawn to the connector not STOPPED any more;
- `beyond start` = after restart - own start, which must stay under 10 s.
The summary (each case, p50 and max) is printed; `OFFSETD_CRASH_REPEATS=n` runs each case n times
for steadier percentiles. Every case must also end as a skip should: outcome `executed` (recovered),
one quarantine copy, the sink's group past the poison record, every good record delivered.

The two mechanisms are also tested one by one, on the real Kafka: only a member whose process
ended is removed from the group, and of two owners that took one saga over, only one goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from offsetd.remediation.dead_members import evict_dead_members
from offsetd.remediation.faults import CRASH_EXIT_CODE
from offsetd.remediation.sagas import SagaRecord, SagaStore, Superseded
from tests.integration.daemonproc import REPO, Daemon, free_port
from tests.integration.kafkautil import ConnectClient, create_topic, unique, wait_for
from tests.integration.test_guardrails import (
    Setup,
    committed,
    daemon_setup,
    good,
    ours,
    poisoned_sink,
)

pytestmark = pytest.mark.integration

# The saga's moments at which the connector is STOPPED (stop:after-progress is patch:before,
# patch:after-progress is resume:before: the same state, the same recovery).
CRASH_POINTS = ("stop:after-action", "patch:before", "patch:after-action", "resume:before")
BEYOND_START_S = 10.0
POLL_S = 0.1
GOOD_AFTER = range(4, 7)


class StatusWatch(threading.Thread):
    """The connector's state every POLL_S, with the time of each change (monotonic clock)."""

    def __init__(self, url: str, name: str) -> None:
        super().__init__(daemon=True, name=f"watch-{name}")
        self.url, self.name = url, name
        self.changes: list[tuple[float, str]] = []
        self._quit = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as http:
            while not self._quit.is_set():
                state = "?"
                try:
                    response = http.get(f"/connectors/{self.name}/status")
                    if response.status_code == 200:
                        state = str(response.json()["connector"]["state"])
                except httpx.HTTPError:
                    pass  # a slow answer is no state change
                now = time.monotonic()
                if state != "?" and (not self.changes or self.changes[-1][1] != state):
                    self.changes.append((now, state))
                self._quit.wait(POLL_S)

    def stop(self) -> None:
        self._quit.set()
        self.join(10)

    def stopped_span(self) -> tuple[float, float] | None:
        """(first STOPPED sample, first later sample in another state), once both were seen."""
        start = next((t for t, s in self.changes if s == "STOPPED"), None)
        if start is None:
            return None
        end = next((t for t, s in self.changes if t > start and s != "STOPPED"), None)
        return None if end is None else (start, end)


@dataclass(frozen=True)
class Case:
    point: str
    own_start_s: float
    stopped_s: float
    after_restart_s: float
    restart_ready_s: float  # the restarted daemon's spawn -> /metrics (faust fully started)

    @property
    def beyond_start_s(self) -> float:
        return self.after_restart_s - self.own_start_s


def spawn(config: Path, log: Path, fault: str | None) -> subprocess.Popen[bytes]:
    """`offsetd run` in its own session; with `fault`, it dies at that saga moment."""
    env = {k: v for k, v in os.environ.items() if k not in ("OFFSETD_FAULT", "OFFSETD_TEST_HOOKS")}
    if fault is not None:
        env.update(OFFSETD_TEST_HOOKS="1", OFFSETD_FAULT=f"crash:{fault}")
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "offsetd", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
            start_new_session=True,
        )


def case_config(setup: Setup, suffix: str) -> tuple[Path, int]:
    """The test's config with an app id (consumer group) and web port of this case's own."""
    data = json.loads(json.dumps(setup.data))
    port = free_port()
    data["daemon"]["app_id"] = unique("offsetd-crash")
    data["daemon"]["web_port"] = port
    path = setup.tmp / f"offsetd-{suffix}.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path, port


def as_daemon(proc: subprocess.Popen[bytes], config: Path, log: Path, port: int) -> Daemon:
    daemon = Daemon(config, log, port)
    daemon.proc = proc
    return daemon


def crash_and_restart(
    stack: StackInfo, connect: ConnectClient, setup: Setup, point: str, suffix: str
) -> Case:
    config, port = case_config(setup, suffix)
    log = setup.tmp / f"daemon-{suffix}.log"
    spawned = time.monotonic()
    first = as_daemon(spawn(config, log, point), config, log, port)
    setup.daemon = first
    restarted: Daemon | None = None
    watch: StatusWatch | None = None
    try:
        wait_for("the daemon's /metrics", first._metrics_up, timeout_s=120)
        own_start_s = time.monotonic() - spawned
        sink, poison = poisoned_sink(connect, setup, good(GOOD_AFTER), suffix=suffix)
        watch = StatusWatch(stack.connect["url"], sink.name)
        watch.start()
        assert first.proc is not None
        code = first.proc.wait(timeout=120)  # the injected crash, mid-saga
        assert code == CRASH_EXIT_CODE, f"exit {code}: {first.log()[-3000:]}"
        restart_at = time.monotonic()  # at once, as a supervisor restarts a crashed container
        restarted = as_daemon(spawn(config, log, None), config, log, port)
        setup.daemon = restarted
        span = wait_for(
            f"{sink.name} STOPPED and then not any more", watch.stopped_span, timeout_s=180
        )
        wait_for("the restarted daemon's /metrics", restarted._metrics_up, timeout_s=120)
        ready_s = time.monotonic() - restart_at
        record = setup.wait_outcome(sink.name, "executed", timeout_s=120)
        assert record.get("recovered") is True, record
        # The skip itself, unharmed by the crash: one copy, past N, every good record once.
        copies = [q for q in ours(setup, setup.quarantined()) if q.connector == sink.name]
        assert len(copies) == 1, [q.ref for q in copies]
        assert copies[0].original is not None
        assert copies[0].original.offset == poison
        wait_for(
            f"{sink.name} past the poison record",
            lambda: (committed(connect, sink.name) or 0) > poison,
            timeout_s=60,
        )
        wanted = [f"{{n={i}}}" for i in (*range(3), *GOOD_AFTER)]  # the sink's text form
        wait_for(f"{sink.name}: every good record delivered", lambda: sink.lines() == wanted, 60)
        return Case(point, own_start_s, span[1] - span[0], span[1] - restart_at, ready_s)
    finally:
        if watch is not None:
            watch.stop()
        for daemon in (first, restarted):
            if daemon is not None:
                daemon.stop()


def _summary(cases: list[Case]) -> str:
    lines = [
        f"{'crash point':<20} {'own start':>9} {'stopped':>8} {'after restart':>13} "
        f"{'beyond start':>12} {'restart ready':>13}"
    ]
    for c in cases:
        lines.append(
            f"{c.point:<20} {c.own_start_s:9.1f} {c.stopped_s:8.1f} {c.after_restart_s:13.1f} "
            f"{c.beyond_start_s:12.1f} {c.restart_ready_s:13.1f}"
        )
    for point in (*CRASH_POINTS, "all"):
        mine = [c for c in cases if point in ("all", c.point)]
        parts = []
        for what, values in (
            ("stopped", [c.stopped_s for c in mine]),
            ("beyond start", [c.beyond_start_s for c in mine]),
            ("restart ready", [c.restart_ready_s for c in mine]),
        ):
            parts.append(f"{what} p50 {statistics.median(values):5.1f} max {max(values):5.1f}")
        lines.append(f"{point:<20} " + " | ".join(parts))
    return "\n".join(lines)


def test_a_connector_stopped_by_a_killed_daemon_runs_within_10s_beyond_its_restart(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    repeats = int(os.environ.get("OFFSETD_CRASH_REPEATS", "1"))
    cases: list[Case] = []
    with daemon_setup(stack, tmp_path, mode="enforce") as setup:
        for n in range(repeats):
            for point in CRASH_POINTS:
                suffix = f"{point.replace(':', '-')}-{n}"
                try:
                    cases.append(crash_and_restart(stack, connect, setup, point, suffix))
                finally:
                    connect.delete(f"{setup.prefix}-{suffix}")
    summary = _summary(cases)
    print(f"\nSTOPPED after a crash mid-saga (seconds):\n{summary}")
    (tmp_path / "summary.txt").write_text(summary)
    slow = [c for c in cases if c.beyond_start_s >= BEYOND_START_S]
    assert not slow, f"STOPPED for more than {BEYOND_START_S:g} s beyond start:\n{summary}"
    # The dead member is dropped from the group at once too: the restarted daemon decides
    # (and serves /metrics) about as soon as a fresh one, not after the dead member's session.
    late = [c for c in cases if c.restart_ready_s - c.own_start_s >= BEYOND_START_S]
    assert not late, f"the restarted daemon waited for the group:\n{summary}"


def test_of_two_owners_of_one_saga_only_one_goes_on(west: str) -> None:
    """A restart resumes a saga at once only when its owner provably ended; when two workers do
    take one over anyway (a rebalance, two restarts), the sagas topic decides who goes on: a
    higher epoch, else the last takeover written — even after the loser writes the step it was
    in the middle of. Two real stores on the real sagas topic, as two workers have."""
    topic = unique("offsetd.sagas")
    conf = {"bootstrap.servers": west}
    a, b = SagaStore(conf, topic), SagaStore(conf, topic)
    a.start()
    b.start()
    try:
        first = SagaRecord(
            key="local/sink/t/0/3",
            kind="skip",
            connect_cluster="local",
            connector="sink",
            decision_id="d1",
            rule="r",
            epoch=2,
            owner="a",
        )

        async def goes_on(store: SagaStore, record: SagaRecord) -> bool:
            try:
                await store.check_owner(record)
            except Superseded:
                return False
            return True

        async def scenario() -> None:
            mine = await a.put(first)  # a resumes the saga (epoch 2) ...
            theirs = await b.put(replace(first, owner="b"))  # ... and so does b, just after
            assert [await goes_on(a, mine), await goes_on(b, theirs)] == [False, True]
            # a was in the middle of a step when b took over: its progress record comes last,
            # at the same epoch, so a goes on and b stops — still exactly one
            mine = await a.put(mine.step_done("stop", 1))
            assert [await goes_on(a, mine), await goes_on(b, theirs)] == [True, False]
            # a third takeover raises the epoch: a later write of a lower epoch does not hide it
            newer = await b.put(replace(mine, epoch=3, owner="c"))
            await a.put(mine.step_done("patch", 2))
            assert [await goes_on(a, mine), await goes_on(b, newer)] == [False, True]

        asyncio.run(scenario())
    finally:
        a.close()
        b.close()


MEMBER = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer
from offsetd.remediation.dead_members import client_id
from offsetd.remediation.wiring import worker_identity

async def main() -> None:
    consumer = AIOKafkaConsumer(
        sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3],
        client_id=client_id(worker_identity()), session_timeout_ms=60000,
    )
    await consumer.start()
    while not consumer.assignment():
        await asyncio.sleep(0.1)
    print(consumer._coordinator.member_id, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_only_a_member_whose_process_ended_is_removed_from_the_group(west: str) -> None:
    """The group step of a restart (`evict_dead_members`) removes a member only once its process
    provably ended: a live member named like a worker is left alone, the same member killed
    with SIGKILL (60 s of session left) is removed at once."""
    topic, group = unique("evict"), unique("evict-group")
    create_topic(west, topic)
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMBER, west, topic, group],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        member = proc.stdout.readline().strip()
        assert member, "the member never joined"
        auth = {"security_protocol": "PLAINTEXT"}
        assert asyncio.run(evict_dead_members(group, west, auth)) == []  # alive: left alone
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert asyncio.run(evict_dead_members(group, west, auth)) == [member]
        assert asyncio.run(evict_dead_members(group, west, auth)) == []  # gone from the group
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
