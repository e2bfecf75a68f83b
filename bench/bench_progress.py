"""Sink progress: the brokers' load and the CPU of one cycle per 1,000 sink connectors.

Stack case (real brokers, the local stack's west): N sink connectors as Kafka sees them — a
topic of 2 partitions each and a consumer group `connect-<name>` with committed offsets, half of
them behind the log end — read by `offsetd.lag.sinks.SinkReader` cycle after cycle, and judged
by `ProgressTracker`. Connect itself is not asked to run 1,000 tasks on a 2-core machine: the
reader's work depends on the groups and partitions, which are real here; the connectors' REST
view is built in the bench.

Measured per cycle (median of CYCLES after the first, which fills the timestamp cache):
- requests to the brokers by type, from librdkafka's statistics (`brokers[].req`);
- wall time, and the CPU of the collecting thread and of the whole process (librdkafka's own
  threads included);
- the tracker's CPU for the cycle (pure Python);
- the baseline, measured in the same run: what any group-lag exporter must do anyway (the
  groups' committed offsets, through the same aiokafka reader, and one ListOffsets for their
  partitions), and the ratio to it.

The tracker alone is also timed on 10,000 synthetic connectors (2 tasks, 4 partitions each).

    .venv/bin/python bench/bench_progress.py --run-dir /tmp/bench-stack [--sizes 100,1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.devstack.stack import Stack
from offsetd.lag.groups import GroupReader
from offsetd.lag.kafka_io import OffsetSpec, TimestampFetcher, list_offsets
from offsetd.lag.progress import ProgressTracker
from offsetd.lag.sinks import SinkReader
from offsetd.lag.snapshot import ConnectorHealth, SinkPartition

CYCLES = 5
PARTITIONS = 2
REQUESTS = ("OffsetFetch", "FindCoordinator", "ListOffsets", "Metadata", "Fetch")
# Groups are read through aiokafka (offsetd.lag.groups), which librdkafka's statistics do not
# see: its requests are counted here from the calls, by what aiokafka 0.14 sends for each
# group (a FindCoordinator and an OffsetFetch).
CALLED = ("OffsetFetch", "FindCoordinator")


class CountingAdmin(AdminClient):
    """A real AdminClient with statistics on; `requests()`: per request type, all brokers."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.latest: dict[str, Any] = {}
        self.groups: CountingGroups | None = None
        super().__init__(
            {**conf, "statistics.interval.ms": 100, "stats_cb": self._stats}  # type: ignore[dict-item]
        )

    def _stats(self, raw: str) -> None:
        self.latest = json.loads(raw)

    def requests(self) -> dict[str, int]:
        self.poll(0.3)
        time.sleep(0.25)
        self.poll(0.3)
        out = dict.fromkeys(REQUESTS, 0)
        for broker in self.latest.get("brokers", {}).values():
            for kind in REQUESTS:
                if kind not in CALLED:
                    out[kind] += int(broker.get("req", {}).get(kind, 0))
        counted = self.groups.counts if self.groups is not None else {}
        for kind in CALLED:
            out[kind] = counted.get(kind, 0)
        return out


class CountingGroups(GroupReader):
    """The reader the collector uses, counting the requests aiokafka sends for each call."""

    def __init__(self, conf: dict[str, str]) -> None:
        super().__init__(conf)
        self.counts: dict[str, int] = dict.fromkeys(CALLED, 0)

    def offsets(self, groups: Iterable[str], timeout_s: float = 10.0) -> Any:
        wanted = set(groups)
        self.counts["OffsetFetch"] += len(wanted)
        self.counts["FindCoordinator"] += len(wanted)
        return super().offsets(wanted, timeout_s)


def setup(bootstrap: str, size: int, tag: str) -> list[tuple[ConnectorHealth, dict[str, str]]]:
    """Topics, records and committed offsets on west for `size` sinks; their REST view."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-progress-{tag}-{i}" for i in range(size)]
    futures = admin.create_topics(
        [NewTopic(name, PARTITIONS, 1) for name in names], operation_timeout=60
    )
    for future in futures.values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for name in names:
        for partition in range(PARTITIONS):
            for i in range(10):
                producer.produce(name, value=f"r{i}".encode(), partition=partition)
    producer.flush(60)
    for index, name in enumerate(names):
        behind = 3 if index % 2 else 0  # half of the sinks have records waiting
        commits = [TopicPartition(name, p, 10 - behind) for p in range(PARTITIONS)]
        admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(f"connect-{name}", commits)]
        )[f"connect-{name}"].result()
    return [
        (
            ConnectorHealth(
                "local",
                name,
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "RUNNING",
                tuple((t, "RUNNING") for t in range(tasks_of(index))),
                connector_type="sink",
                configured_tasks=tuple(range(tasks_of(index))),
                task_workers=tuple((t, "w1") for t in range(tasks_of(index))),
            ),
            {"topics": name},
        )
        for index, name in enumerate(names)
    ]


def tasks_of(index: int) -> int:
    """Every other sink has 2 tasks (with records waiting, its group is described)."""
    return 2 if index % 4 in (2, 3) else 1


def stack_case(bootstrap: str, size: int) -> dict[str, Any]:
    sinks = setup(bootstrap, size, f"{size}-{int(time.time())}")
    conf = {"bootstrap.servers": bootstrap}
    admin = CountingAdmin(conf)
    groups_reader = admin.groups = CountingGroups(conf)
    fetcher = TimestampFetcher(conf)
    reader = SinkReader(conf, admin, lambda: fetcher, groups_reader)
    tracker = ProgressTracker(stall_after_ms=180_000, stuck_after_ms=360_000, slo_seconds=300)
    errors: dict[str, str] = {}
    health = [h for h, _ in sinks]
    first = reader.read("local", sinks, "earliest", errors)  # fills the timestamp cache
    assert not errors, errors
    waiting = sum(1 for rows in first.partitions.values() for r in rows if r.waiting)
    assert waiting == PARTITIONS * (size // 2), waiting
    before = admin.requests()
    wall, cpu, process, judge = [], [], [], []
    for cycle in range(CYCLES):
        t, c, pc = time.perf_counter(), time.thread_time(), time.process_time()
        read = reader.read("local", sinks, "earliest", errors)
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        process.append(time.process_time() - pc)
        c = time.thread_time()
        tracker.observe(1_700_000_000_000 + cycle * 10_000, health, read.partitions, {}, {})
        judge.append(time.thread_time() - c)
    after = admin.requests()
    groups = [f"connect-{h.name}" for h in health]
    partitions = [(h.name, p) for h in health for p in range(PARTITIONS)]
    base_wall, base_cpu = [], []
    baseline = GroupReader(conf)
    for _ in range(CYCLES):  # what any group-lag exporter must do anyway
        t, c = time.perf_counter(), time.process_time()
        baseline.offsets(groups)
        list_offsets(admin, dict.fromkeys(partitions, OffsetSpec.latest()))
        base_wall.append(time.perf_counter() - t)
        base_cpu.append(time.process_time() - c)
    fetcher.close()
    baseline.close()
    groups_reader.close()
    per_cycle = {k: (after[k] - before[k]) / CYCLES for k in REQUESTS}
    return {
        "connectors": size,
        "partitions": len(partitions),
        "requests_per_cycle": per_cycle,
        "requests_per_cycle_per_1000_connectors": {
            k: round(v * 1000 / size, 1) for k, v in per_cycle.items()
        },
        "wall_s": round(statistics.median(wall), 4),
        "thread_cpu_s": round(statistics.median(cpu), 4),
        "process_cpu_s": round(statistics.median(process), 4),
        "tracker_cpu_s": round(statistics.median(judge), 5),
        "baseline_wall_s": round(statistics.median(base_wall), 4),
        "baseline_process_cpu_s": round(statistics.median(base_cpu), 4),
        "ratio_wall_to_baseline": round(statistics.median(wall) / statistics.median(base_wall), 2),
        "ratio_cpu_to_baseline": round(
            statistics.median(process) / max(statistics.median(base_cpu), 1e-6), 2
        ),
    }


def tracker_case(size: int) -> dict[str, Any]:
    """The tracker alone: `size` connectors, 2 tasks and 4 partitions each, a stall building."""
    health = [
        ConnectorHealth(
            "local",
            f"sink-{i}",
            "X",
            "RUNNING",
            ((0, "RUNNING"), (1, "RUNNING")),
            connector_type="sink",
            configured_tasks=(0, 1),
            task_workers=((0, "w1"), (1, "w2")),
        )
        for i in range(size)
    ]
    parts = {
        ("local", f"sink-{i}"): [
            SinkPartition("local", f"sink-{i}", f"t{i}", p, 100, 200, 100, 1_600_000_000_000)
            for p in range(4)
        ]
        for i in range(size)
    }
    holders = {key: {(f"t{i}", p): p % 2 for p in range(4)} for i, key in enumerate(parts)}
    tracker = ProgressTracker(stall_after_ms=30_000, stuck_after_ms=60_000, slo_seconds=300)
    times, reports = [], 0
    for cycle in range(8):
        c = time.process_time()
        made = tracker.observe(1_700_000_000_000 + cycle * 10_000, health, parts, holders, {})
        times.append(time.process_time() - c)
        reports += len(made)
    return {
        "connectors": size,
        "tasks": 2 * size,
        "partitions": 4 * size,
        "cpu_per_cycle_s": round(statistics.median(times), 4),
        "reports_over_8_cycles": reports,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--tracker", type=int, default=10_000)
    args = parser.parse_args()
    info = Stack(args.run_dir).info()
    bootstrap = str(info.clusters["west"]["bootstrap.servers"])
    for size in (int(s) for s in args.sizes.split(",")):
        print(json.dumps({"case": "stack", **stack_case(bootstrap, size)}), flush=True)
    print(json.dumps({"case": "tracker", **tracker_case(args.tracker)}), flush=True)


if __name__ == "__main__":
    main()
