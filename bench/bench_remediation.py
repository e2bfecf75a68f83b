"""Skipping a poison record: offsetd (`offsetd run --enforce`) against a bare httpx script.

    .venv/bin/offsetd dev up --detach --run-dir /tmp/bench-stack
    .venv/bin/python bench/bench_remediation.py --run-dir /tmp/bench-stack [--pairs 5]

Each run gets a fresh poison setup: a topic with three good records (delivered and committed),
then a record that is not JSON and three good ones; a FileStreamSink with a DLQ fails on it. The
bench plays the operator who restarts the failed task twice, so the third failure is at the same
record, and takes t0 = the timestamp of that third FAILED status record in `connect-status`.

- offsetd: the daemon, started once as `offsetd run --enforce` with one rule (the shipped
  `poison-record-skip`: three DLQ records at one record -> skip it), sees the failures on its
  own and runs the whole saga (decide, guards, recheck, quarantine, snapshot, stop, patch,
  resume, verify).
- bare: a script that, the moment it sees that third FAILED record, does `PUT /stop`, polls
  `/status` every 50 ms until STOPPED with no tasks, `PATCH /offsets` to N+1, `PUT /resume`.
  Its time from `PUT /stop` to the end below is Connect's own stop/patch/resume time.

Both end when a 50 ms probe sees the connector and its task RUNNING and the group's committed
offset past N ("RUNNING past the poison record"; the commit needs Connect's 1 s offset flush in
both). offsetd's verify window (`--verify`, the policy's stable-for wait) runs *after* that
point and is not in its total; it is reported on its own. Runs alternate offsetd, bare; pairs
are numbered; the overhead of a pair is offsetd's total minus the bare sequence time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.devstack.ports import free_ports
from offsetd.devstack.stack import Stack

REPO = Path(__file__).resolve().parents[1]
PROBE_S = 0.05


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait(what: str, probe: Callable[[], Any], timeout_s: float = 120.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(every)
    raise SystemExit(f"bench: timed out after {timeout_s:g} s waiting for {what}")


# -- the stack ----------------------------------------------------------------------------------


@dataclass
class Env:
    west: str
    connect: str
    http: httpx.Client
    status_topic: str

    def path(self, name: str, suffix: str = "") -> str:
        return f"/connectors/{quote(name, safe='')}{suffix}"

    def status(self, name: str) -> dict[str, Any] | None:
        response = self.http.get(self.path(name, "/status"))
        return response.json() if response.status_code == 200 else None

    def committed(self, name: str) -> int | None:
        response = self.http.get(self.path(name, "/offsets"))
        if response.status_code != 200:
            return None
        entries = response.json().get("offsets", [])
        return int(entries[0]["offset"]["kafka_offset"]) if entries else None


def create_topics(west: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": west})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(timeout=30)


def produce(west: str, topic: str, records: list[tuple[bytes, bytes]]) -> list[int]:
    producer = Producer({"bootstrap.servers": west, "acks": "all", "enable.idempotence": True})
    offsets: list[int] = []
    for key, value in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda _e, m: offsets.append(m.offset() or 0),
        )
    assert producer.flush(30) == 0
    return offsets


class StatusTail:
    """`connect-status` from its current end: the FAILED records of one task, with timestamps."""

    def __init__(self, env: Env) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": env.west,
                "group.id": unique("bench-status"),  # assign() only, never committed
                "enable.auto.commit": "false",
            }
        )
        meta = self.consumer.list_topics(env.status_topic, timeout=30).topics[env.status_topic]
        parts = []
        for p in meta.partitions:
            _low, high = self.consumer.get_watermark_offsets(
                TopicPartition(env.status_topic, p), timeout=30
            )
            parts.append(TopicPartition(env.status_topic, p, high))
        self.consumer.assign(parts)
        self.failed_ms: dict[str, list[int]] = {}

    def poll(self) -> None:
        for msg in self.consumer.consume(500, timeout=0.05):
            key, value = msg.key(), msg.value()
            if msg.error() is not None or not key or not value:
                continue
            if json.loads(value).get("state") == "FAILED":
                _kind, stamp = msg.timestamp()
                self.failed_ms.setdefault(key.decode(), []).append(stamp)

    def wait_failures(self, name: str, count: int) -> int:
        """Until the task has `count` FAILED records since the tail began; the last one's ms."""
        key = f"status-task-{name}-0"

        def seen() -> int | None:
            self.poll()
            stamps = self.failed_ms.get(key, [])
            return stamps[count - 1] if len(stamps) >= count else None

        stamp: int = wait(f"failure {count} of {name}", seen, every=0.0)
        return stamp

    def close(self) -> None:
        self.consumer.close()


@dataclass
class Poison:
    name: str
    topic: str
    offset: int
    t0_ms: int  # the third FAILED status record's timestamp


def poison_setup(env: Env, tail: StatusTail, dlq: str, sink_dir: Path) -> Poison:
    """A sink FAILED three times on a non-JSON record that starts its batch (DLQ names it)."""
    topic, name = unique("bench-rem"), unique("bench-rem-sink")
    create_topics(env.west, [topic])
    good = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(7)]
    produce(env.west, topic, good[:3])
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "file": str(sink_dir / f"{name}.txt"),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "consumer.override.auto.offset.reset": "earliest",
        "errors.tolerance": "none",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }
    env.http.put(env.path(name, "/config"), json=config).raise_for_status()
    wait(f"{name} to commit 3 records", lambda: env.committed(name) == 3, every=0.2)
    poison = produce(env.west, topic, [(b"bad", b"{not json"), *good[4:]])[0]
    stamp = 0
    for failure in (1, 2, 3):
        stamp = tail.wait_failures(name, failure)
        if failure < 3:
            restart = env.path(name, "/restart")
            params = {"includeTasks": "true", "onlyFailed": "true"}
            env.http.post(restart, params=params).raise_for_status()
    return Poison(name, topic, poison, stamp)


def running_past(env: Env, p: Poison) -> float:
    """Probe every 50 ms until RUNNING (connector and task) and the group's committed offset past
    N+1, i.e. records after the poison one delivered and committed: the wall time."""

    def probe() -> float | None:
        status = env.status(p.name)
        if status is None or status["connector"]["state"] != "RUNNING":
            return None
        tasks = [t["state"] for t in status["tasks"]]
        if tasks != ["RUNNING"]:
            return None
        # N+1 is what the PATCH writes: only a commit past it shows records delivered after N.
        committed = env.committed(p.name)
        return time.time() if committed is not None and committed > p.offset + 1 else None

    at: float = wait(f"{p.name} RUNNING past {p.offset}", probe, timeout_s=180, every=PROBE_S)
    return at


# -- the two contenders -------------------------------------------------------------------------


@dataclass
class Result:
    kind: str
    total_s: float  # t0 (third FAILED status record) -> RUNNING past N
    sequence_s: float = 0.0  # bare: PUT /stop -> RUNNING past N
    steps: dict[str, float] = field(default_factory=dict)  # offsetd: per saga step, seconds
    verify_s: float = 0.0  # offsetd: the verify window after RUNNING past N
    outcome: str = ""


def run_bare(env: Env, tail: StatusTail, dlq: str, sink_dir: Path) -> Result:
    p = poison_setup(env, tail, dlq, sink_dir)
    started = time.time()
    env.http.put(env.path(p.name, "/stop")).raise_for_status()

    def stopped() -> bool:
        status = env.status(p.name)
        return (
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        )

    wait(f"{p.name} STOPPED", stopped, every=PROBE_S)
    body = {
        "offsets": [
            {
                "partition": {"kafka_topic": p.topic, "kafka_partition": 0},
                "offset": {"kafka_offset": p.offset + 1},
            }
        ]
    }
    env.http.patch(env.path(p.name, "/offsets"), json=body).raise_for_status()
    env.http.put(env.path(p.name, "/resume")).raise_for_status()
    done = running_past(env, p)
    env.http.delete(env.path(p.name))
    return Result("bare", done - p.t0_ms / 1000, sequence_s=done - started, outcome="done")


def run_offsetd(env: Env, tail: StatusTail, dlq: str, sink_dir: Path, audit: Audit) -> Result:
    p = poison_setup(env, tail, dlq, sink_dir)
    done = running_past(env, p)
    record = audit.wait_outcome(p.name)
    env.http.delete(env.path(p.name))
    steps: dict[str, float] = {}
    previous = int(record["decided_at_ms_of_decision"])
    steps["detect+decide"] = (previous - p.t0_ms) / 1000
    for event in record.get("steps", []):
        at = int(event["at_ms"])
        steps[str(event["step"])] = (at - previous) / 1000
        previous = at
    verify_s = steps.get("verify", 0.0)
    return Result(
        "offsetd",
        done - p.t0_ms / 1000,
        steps=steps,
        verify_s=verify_s,
        outcome=str(record.get("outcome")),
    )


@dataclass
class Audit:
    conf: dict[str, str]
    topic: str

    def wait_outcome(self, connector: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            records = read_records(self.conf, self.topic)
            decided = {r["id"]: r for r in records if r.get("kind") != "remediation" and "id" in r}
            for r in records:
                if r.get("kind") == "remediation" and r.get("connector") == connector:
                    decision = decided.get(str(r.get("decision_id")), {})
                    return {**r, "decided_at_ms_of_decision": decision.get("decided_at_ms", 0)}
            return None

        record: dict[str, Any] = wait(f"offsetd's outcome for {connector}", found, every=0.5)
        if record.get("outcome") != "executed":
            raise SystemExit(f"bench: offsetd did not skip: {record.get('message')}")
        return record


# -- the daemon ---------------------------------------------------------------------------------


def write_daemon_files(
    stack_config: dict[str, Any], folder: Path, dlq: str, verify: str
) -> tuple[Path, Path, int, str]:
    rules = folder / "rules"
    rules.mkdir()
    with (REPO / "rules" / "examples" / "poison-record.yaml").open() as raw:
        shipped = YAML(typ="safe").load(raw)
    skip = next(r for r in shipped if r["name"] == "poison-record-skip")
    skip.pop("inhibits", None)  # its partner rule is not loaded here
    skip["limits"] = {"budget": {"max": 100, "per": "1h"}, "cooldown": "1s"}  # one per connector
    with (rules / "poison-record-skip.yaml").open("w") as out:
        YAML().dump([skip], out)
    port = free_ports(1)[0]
    audit_topic = unique("bench-rem.audit")
    data = dict(stack_config)
    data["connect_clusters"]["local"]["dlq_topics"] = [dlq]
    data["daemon"] = {
        "app_id": unique("bench-rem"),
        "partitions": 1,
        "audit_topic": audit_topic,
        "web_port": port,
        "data_dir": str(folder / "state"),
    }
    data["remediation"] = {
        "sagas_topic": unique("bench-rem.sagas"),
        "control_topic": unique("bench-rem.control"),
        "quarantine_topic": unique("bench-rem.quarantine"),
        "verify_stable_for": verify,
    }
    config = folder / "offsetd.yaml"
    with config.open("w") as out:
        YAML().dump(data, out)
    return config, rules, port, audit_topic


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Stop exactly the process this bench started (by its PID)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_daemon(config: Path, rules: Path, port: int, folder: Path) -> Daemon:
    log = folder / "offsetd-run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "offsetd", "run", "--config", str(config)),
                *("--rules", str(rules), "--enforce"),
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    daemon = Daemon(proc, log)

    def up() -> bool:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"bench: offsetd run exited ({proc.returncode}):\n{tail}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait("offsetd run's /metrics", up, timeout_s=180, every=0.5)
    except BaseException:
        daemon.stop()
        raise
    return daemon


# -- report -------------------------------------------------------------------------------------


def p90(values: list[float]) -> float:
    """Nearest rank: the smallest value with at least 90 % of the values at or below it."""
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def report(pairs: list[tuple[Result, Result]], verify: str) -> None:
    offsetd = [o.total_s for o, _ in pairs]
    bare_total = [b.total_s for _, b in pairs]
    bare_seq = [b.sequence_s for _, b in pairs]
    overhead = [o.total_s - b.sequence_s for o, b in pairs]
    share = [(o.total_s - b.sequence_s) / o.total_s for o, b in pairs]
    print()
    print("pair | offsetd total | bare total | bare stop->RUNNING past N | overhead | share")
    for i, (o, b) in enumerate(pairs, 1):
        print(
            f"{i:4d} | {o.total_s:13.2f} | {b.total_s:10.2f} | {b.sequence_s:25.2f} | "
            f"{o.total_s - b.sequence_s:8.2f} | {100 * share[i - 1]:4.0f} %"
        )
    rows = [
        ("offsetd: third FAILED status record -> RUNNING past N", offsetd),
        ("bare: third FAILED status record -> RUNNING past N", bare_total),
        ("bare: PUT /stop -> RUNNING past N (Connect's own time)", bare_seq),
        ("offsetd overhead (offsetd total - bare sequence, paired)", overhead),
    ]
    print()
    print(f"{'':58s} {'median':>8s} {'p90':>8s}")
    for label, values in rows:
        print(f"{label:58s} {statistics.median(values):7.2f}s {p90(values):7.2f}s")
    print(
        f"{'overhead / offsetd total':58s} {100 * statistics.median(share):7.0f}% "
        f"{100 * p90(share):7.0f}%"
    )
    print(
        f"ratio offsetd total / bare sequence (median): "
        f"{statistics.median(offsetd) / statistics.median(bare_seq):.2f}x"
    )
    steps: dict[str, list[float]] = {}
    for o, _ in pairs:
        for step, seconds in o.steps.items():
            steps.setdefault(step, []).append(seconds)
    print()
    print(f"offsetd's saga, median seconds per step (verify window {verify}, not in the total):")
    for step, values in steps.items():
        print(f"  {step:14s} {statistics.median(values):6.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="run dir of `offsetd dev up --detach`")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--verify", default="2s", help="remediation.verify_stable_for")
    parser.add_argument("--warmup", type=int, default=1, help="unreported pairs first")
    args = parser.parse_args()
    if args.pairs < 5:
        parser.error("at least 5 paired runs")
    info = Stack(Path(args.run_dir)).info()
    west = info.clusters["west"]["bootstrap.servers"]
    http = httpx.Client(base_url=info.connect["url"], timeout=30)
    env = Env(west, info.connect["url"], http, info.connect["status.storage.topic"])
    dlq_offsetd, dlq_bare = unique("bench-rem-dlq"), unique("bench-rem-dlq-bare")
    create_topics(west, [dlq_offsetd, dlq_bare])
    with tempfile.TemporaryDirectory(prefix="bench-rem-") as tmp:
        folder = Path(tmp)
        config, rules, port, audit_topic = write_daemon_files(
            info.offsetd_config(), folder, dlq_offsetd, args.verify
        )
        daemon = start_daemon(config, rules, port, folder)
        tail = StatusTail(env)
        audit = Audit({"bootstrap.servers": west}, audit_topic)
        pairs: list[tuple[Result, Result]] = []
        try:
            for i in range(args.warmup + args.pairs):
                o = run_offsetd(env, tail, dlq_offsetd, folder, audit)
                b = run_bare(env, tail, dlq_bare, folder)
                tag = "warm-up" if i < args.warmup else f"pair {i - args.warmup + 1}"
                print(
                    f"{tag}: offsetd {o.total_s:.2f} s, bare {b.total_s:.2f} s "
                    f"(sequence {b.sequence_s:.2f} s); saga steps "
                    + ", ".join(f"{k} {v:.2f}" for k, v in o.steps.items()),
                    flush=True,
                )
                if i >= args.warmup:
                    pairs.append((o, b))
        finally:
            tail.close()
            daemon.stop()
            http.close()
    report(pairs, args.verify)


if __name__ == "__main__":
    main()
