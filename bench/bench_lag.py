"""MM2 lag refresh and exposition: 1k / 10k partitions on the local stack, 100k with a fake admin.

Stack cases: synthetic topics on *west* (so the stack's east->west MirrorSourceConnector, which
replicates every east topic, leaves them alone), and a STOPPED MirrorSourceConnector
`bench-lag-<n>` with source alias west whose offsets are PATCHed so that half the partitions are
caught up and half lag by a few records. The collector then runs real cycles: Connect REST, the
offsets topic, batched ListOffsets against west, seconds lag for the lagging half (first cycle
fetches, later cycles hit the cache).

Measured per case: refresh time (median of the cycles after the first), ListOffsets requests
per broker per cycle from librdkafka's statistics (`brokers[].req.ListOffsets`), Python CPU per
cycle (thread time of the collecting thread: librdkafka's own threads excluded), the scrape of
the pre-rendered page (HTTP GET against `offsetd lag serve`'s server) against `generate_latest`
on a registry holding the same series, and RSS.

    .venv/bin/python bench/bench_lag.py --run-dir /tmp/lag-stack [--sizes 1000,10000]
        [--fake 100000] [--workdir DIR]

Why one module of ~540 lines: a benchmark runs as one script, and its cases (stack, fake,
batch) must be measured in one process against the baseline of the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from offsetd.config import Settings
from offsetd.devstack.stack import Stack
from offsetd.lag.collector import Collector
from offsetd.lag.connect_state import ConnectView, MirrorFlow
from offsetd.lag.exposition import render
from offsetd.lag.kafka_io import EndOffsets
from offsetd.lag.mirror_offsets import MirrorOffsets, Position
from offsetd.lag.server import metrics_server
from offsetd.lag.snapshot import ConnectorHealth, Snapshot
from offsetd.offsets.model import ConnectorKind

PER_TOPIC = 100
CYCLES = 5


# -- librdkafka statistics: ListOffsets requests per broker ------------------------------------


class CountingAdmin(AdminClient):
    """A real AdminClient with statistics on; `list_offsets_requests()` per broker so far.

    A subclass, not a wrapper, so the collector takes the same direct C ListOffsets call it
    takes with a plain AdminClient (see `offsetd.lag.kafka_io._list_offsets_raw`).
    """

    def __init__(self, conf: dict[str, str]) -> None:
        self.latest: dict[str, Any] = {}
        super().__init__(
            {**conf, "statistics.interval.ms": 100, "stats_cb": self._stats}  # type: ignore[dict-item]
        )

    def _stats(self, raw: str) -> None:
        self.latest = json.loads(raw)

    def list_offsets_requests(self) -> dict[str, int]:
        self.poll(0.3)  # serve the stats callback
        time.sleep(0.25)
        self.poll(0.3)
        return {
            b["nodename"]: int(b.get("req", {}).get("ListOffsets", 0))
            for b in self.latest.get("brokers", {}).values()
            if b.get("nodeid", -1) >= 0
        }


# -- stack set-up ----------------------------------------------------------------------------


def setup(info: Any, size: int) -> str:
    """Topics on west and a STOPPED bench MirrorSourceConnector with offsets; returns its name."""
    west = info.clusters["west"]["bootstrap.servers"]
    east = info.clusters["east"]["bootstrap.servers"]
    name = f"bench-lag-{size}"
    topics = [f"bench-lag-{size}-t{i}" for i in range(size // PER_TOPIC)]
    admin = AdminClient({"bootstrap.servers": west})
    existing = set(admin.list_topics(timeout=30).topics)
    missing = [NewTopic(t, PER_TOPIC, 1) for t in topics if t not in existing]
    for start in range(0, len(missing), 10):
        for future in admin.create_topics(
            missing[start : start + 10], operation_timeout=120
        ).values():
            future.result(timeout=180)
    # a few records in every partition: 5 each, produced once
    # a fresh client: on a first run with 10k new partitions, ListOffsets through the client
    # that created them kept failing for over 10 minutes while a new client answered at once
    ends = _ends(AdminClient({"bootstrap.servers": west}), topics)
    if any(v == 0 for v in ends.values()):
        producer = Producer({"bootstrap.servers": west, "linger.ms": 50})
        for (topic, partition), end in ends.items():
            for i in range(end, 5):
                producer.produce(topic, value=f"v{i}".encode(), partition=partition)
            producer.poll(0)
        producer.flush(120)
    http = httpx.Client(base_url=info.connect["url"], timeout=300)
    path = f"/connectors/{quote(name, safe='')}"
    if http.get(path).status_code == 404:
        config = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": "west",
            "target.cluster.alias": "east",
            "source.cluster.bootstrap.servers": west,
            "target.cluster.bootstrap.servers": east,
            "topics": "bench-none",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
        }
        body = {"name": name, "config": config, "initial_state": "STOPPED"}
        http.post("/connectors", json=body).raise_for_status()
    if len(http.get(f"{path}/offsets").json()["offsets"]) < size:
        for _ in range(60):
            status = http.get(f"{path}/status")
            if status.status_code == 200 and status.json()["connector"]["state"] == "STOPPED":
                break
            time.sleep(1)
        entries = [
            {
                "partition": {"cluster": "west", "topic": t, "partition": p},
                # even partitions caught up (N = 4), odd ones lag by 3 records (N = 1)
                "offset": {"offset": 4 if p % 2 == 0 else 1},
            }
            for t in topics
            for p in range(PER_TOPIC)
        ]
        http.patch(f"{path}/offsets", json={"offsets": entries}).raise_for_status()
    return name


def _ends(admin: AdminClient, topics: list[str]) -> dict[tuple[str, int], int]:
    latest = _OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(t, p): latest for t in topics for p in range(PER_TOPIC)}
    for attempt in range(300):  # new partitions: leaders are elected a while after creation
        try:
            futures = admin.list_offsets(request, request_timeout=60)
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException:
            if attempt == 299:
                raise
            time.sleep(2)
    raise AssertionError("unreachable")


# -- measuring -------------------------------------------------------------------------------


def registry_with(snapshot: Snapshot) -> CollectorRegistry:
    """The same per-partition series in a prometheus_client registry (the naive baseline)."""
    registry = CollectorRegistry()
    names = ["source", "target", "topic", "partition"]
    gauges = {
        key: Gauge(f"offsetd_mm2_{key}", key, names, registry=registry)
        for key in ("lag_records", "lag_seconds", "offset_age_seconds", "last_replicated_offset")
    }
    status = Gauge("offsetd_mm2_partition_status", "s", [*names, "status"], registry=registry)
    for p in snapshot.partitions:
        labels = (p.source, p.target, p.topic, str(p.partition))
        gauges["lag_records"].labels(*labels).set(p.lag_records)
        if p.lag_seconds is not None:
            gauges["lag_seconds"].labels(*labels).set(p.lag_seconds)
        age = p.offset_age_seconds(snapshot.taken_ms)
        if age is not None:
            gauges["offset_age_seconds"].labels(*labels).set(age)
        if p.last_replicated is not None:
            gauges["last_replicated_offset"].labels(*labels).set(p.last_replicated)
        status.labels(*labels, str(p.status)).set(1)
    return registry


def scrape_times(page: bytes, registry: CollectorRegistry) -> dict[str, float]:
    server = metrics_server("127.0.0.1", 0, lambda: page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    http = httpx.Client(timeout=60)
    gets, naive = [], []
    for _ in range(5):
        t = time.perf_counter()
        body = http.get(url).content
        gets.append(time.perf_counter() - t)
        t = time.perf_counter()
        generate_latest(registry)
        naive.append(time.perf_counter() - t)
    server.shutdown()
    server.server_close()
    assert len(body) == len(page)
    return {
        "prerendered_get_s": statistics.median(gets),
        "generate_latest_s": statistics.median(naive),
        "page_mb": len(page) / 1e6,
    }


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


def run_cycles(
    collector: Collector,
    admins: list[CountingAdmin] | None,
    *,
    before_cycle: Callable[[], None] | None = None,
    render_too: bool = True,
) -> dict[str, Any]:
    """The first cycle (reads the offsets topic whole, fetches timestamps), then CYCLES timed.

    CPU is the collecting thread's own (`thread_time`: librdkafka's threads excluded), for the
    collection and for rendering the page, as the exporter's thread does after each cycle.
    """
    collector.collect()
    before = _requests(admins)
    times, cpu, process_cpu, render_cpu = [], [], [], []
    snapshot = None
    for _ in range(CYCLES):
        if before_cycle is not None:
            before_cycle()
        t, c, pc = time.perf_counter(), time.thread_time(), time.process_time()
        snapshot = collector.collect()
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        process_cpu.append(time.process_time() - pc)  # + librdkafka's threads (C and Python)
        if render_too:
            c = time.thread_time()
            render(snapshot)
            render_cpu.append(time.thread_time() - c)
    after = _requests(admins)
    per_broker = {b: (after[b] - before.get(b, 0)) / CYCLES for b in after}
    assert snapshot is not None
    return {
        "snapshot": snapshot,
        "refresh_s": statistics.median(times),
        "cpu_s": statistics.median(cpu),
        "process_cpu_s": statistics.median(process_cpu),
        "render_cpu_s": statistics.median(render_cpu) if render_cpu else None,
        "list_offsets_per_broker_per_cycle": per_broker,
    }


def _requests(admins: list[CountingAdmin] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for admin in admins or []:
        for broker, count in admin.list_offsets_requests().items():
            out[broker] = out.get(broker, 0) + count
    return out


def stack_case(info: Any, size: int, workdir: Path) -> dict[str, Any]:
    """One size on the stack; the bench connector is deleted afterwards so that the next size
    measures its own partitions (the collector reads every MirrorSourceConnector)."""
    name = setup(info, size)
    try:
        return _stack_case(info, size, name, workdir)
    finally:
        httpx.delete(f"{info.connect['url']}/connectors/{quote(name, safe='')}", timeout=60)


def _stack_case(info: Any, size: int, name: str, workdir: Path) -> dict[str, Any]:
    settings = Settings.model_validate(
        {**info.offsetd_config(), "lag": {"interval": "1s", "seconds_lag_max_fetches": size}}
    )
    admins: list[CountingAdmin] = []

    def factory(conf: dict[str, str]) -> CountingAdmin:
        admins.append(CountingAdmin(conf))
        return admins[-1]

    state = workdir / f"w{size}.json"
    state.unlink(missing_ok=True)  # windows start empty, as on a first start
    collector = Collector(settings, admin_factory=factory, state_file=state)
    result = run_cycles(collector, admins)
    snapshot = result.pop("snapshot")
    mine = Snapshot(
        snapshot.taken_ms,
        tuple(p for p in snapshot.partitions if p.connector == name),
        snapshot.connectors,
    )
    assert len(mine.partitions) == size, (len(mine.partitions), size)
    assert sum(1 for p in mine.partitions if p.lag_records == 3) == size // 2
    assert all(p.lag_seconds is not None for p in mine.partitions)
    page = render(snapshot)
    result.update(scrape_times(page, registry_with(snapshot)))
    result["rss_mb"] = rss_mb()
    result["partitions_collected"] = len(snapshot.partitions)
    collector.close()
    return result


# -- 100k: a fake admin (and synthetic Connect/offsets input) ------------------------------------


class _Info:
    """What librdkafka's batched ListOffsets answer holds per partition (ListOffsetsResultInfo)."""

    __slots__ = ("offset", "timestamp")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.timestamp = -1


class _Done:
    """An answered partition: `result()` like a resolved future, without a lock per partition.

    offsetd asks a real AdminClient through confluent-kafka's C call, which answers the whole
    request at once (see `offsetd.lag.kafka_io._list_offsets_raw`); an object with `result()`
    per partition stands for that answer's per-partition objects.
    """

    __slots__ = ("_info",)

    def __init__(self, info: _Info) -> None:
        self._info = info

    def result(self) -> _Info:
        return self._info


class FakeAdmin:
    """ListOffsets answered from memory; counts calls (each would be one request per broker)."""

    def __init__(self, ends: Mapping[tuple[str, int], int]) -> None:
        self.ends = ends
        self.calls = 0
        self.cpu_s: list[float] = []  # the fake's own CPU per call (not offsetd's)

    def list_offsets(self, request: Mapping[TopicPartition, Any], **_kw: Any) -> dict[Any, Any]:
        self.calls += 1
        started = time.thread_time()
        ends = self.ends
        out = {tp: _Done(_Info(ends.get((tp.topic, tp.partition), 0))) for tp in request}
        self.cpu_s.append(time.thread_time() - started)
        return out

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return type("Meta", (), {"topics": {}})()


class StepClock:
    """Wall time that advances by one lag interval per cycle (the windows see 10 s cycles)."""

    def __init__(self, step_s: float) -> None:
        self.now = time.time()
        self.step_s = step_s

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step_s


class SyntheticCollector(Collector):
    """Connect REST and the offsets topic replaced by in-memory data (everything else real)."""

    def __init__(
        self,
        settings: Settings,
        keys: list[tuple[str, str, str, int]],
        admin: FakeAdmin,
        state: Path,
        clock: StepClock,
    ) -> None:
        super().__init__(settings, admin_factory=lambda _conf: admin, state_file=state, clock=clock)
        mirror = self.mirror = MirrorOffsets()
        now = int(clock() * 1000)
        self.keys = keys
        for key in self.keys:
            mirror.put(key, Position(99, now))
        self._mirror["synthetic"] = mirror
        flow = MirrorFlow(
            "synthetic", "bench", ConnectorKind.MIRROR_SOURCE, "src", "tgt", "x:1", "y:1"
        )
        health = ConnectorHealth(
            "synthetic",
            "bench",
            "MirrorSourceConnector",
            "RUNNING",
            ((0, "RUNNING"),),
            "src",
            "tgt",
        )
        self._views["synthetic"] = ConnectView([health], [flow], {})

    def _read_connect(self, errors: dict[str, str]) -> None:
        return

    def _read_offsets(self, errors: dict[str, str]) -> None:
        return


def fake_case(size: int, workdir: Path, moving: float) -> dict[str, Any]:
    """`size` partitions, of which a fraction `moving` replicates 5 records every cycle."""
    # the fake's own data first, so that RSS growth from here on is offsetd's
    ends = {(sys.intern(f"t{i // 1000}"), i % 1000): 100 for i in range(size)}
    keys = list(ends)
    mirror_keys = [("bench", "src", topic, partition) for topic, partition in keys]
    admin = FakeAdmin(ends)
    settings = Settings.model_validate({"lag": {"interval": "10s"}})
    clock = StepClock(10.0)
    state = workdir / f"w{size}.json"
    state.unlink(missing_ok=True)  # an earlier run's windows (higher N) would read as REWIND
    gc.collect()
    base = rss_mb()
    collector = SyntheticCollector(settings, mirror_keys, admin, state, clock)
    every = round(1 / moving) if moving else 0

    def move() -> None:
        """Moving partitions: 5 new records, replicated and flushed (caught up, but changed)."""
        clock.tick()
        if not every:
            return
        now_ms = int(clock() * 1000)
        for i in range(0, size, every):
            ends[keys[i]] += 5
            key = collector.keys[i]
            collector.mirror.move(key, collector.mirror.positions[key].n + 5, now_ms)

    calls = admin.calls
    result = run_cycles(collector, None, before_cycle=move, render_too=True)
    result["list_offsets_calls_per_cycle"] = (admin.calls - calls) / (CYCLES + 1)
    result["fake_admin_cpu_s"] = statistics.median(admin.cpu_s[-CYCLES:])
    snapshot = result.pop("snapshot")
    assert len(snapshot.partitions) == size
    assert all(p.lag_records == 0 for p in snapshot.partitions)
    page = render(snapshot)
    gc.collect()
    result["rss_mb"] = rss_mb()
    result["rss_mb_added"] = rss_mb() - base
    registry = registry_with(snapshot)
    result.update(scrape_times(page, registry))
    del registry
    collector.close()
    return result


def batch_case(info: Any, size: int, batches: list[int | None]) -> dict[str, Any]:
    """Log ends of `size` bench partitions on west: one ListOffsets call against calls of
    `batch` partitions (lag.list_offsets_batch), in the same run, rounds interleaved.

    Per call: wall time, process CPU (librdkafka's threads included: the O(n^2) merge of a
    call's answers runs there) and ListOffsets requests per broker. Every way must give the
    same ends.
    """
    name = setup(info, size)  # the topics (its connector is not needed here)
    httpx.delete(f"{info.connect['url']}/connectors/{quote(name, safe='')}", timeout=60)
    west = info.clusters["west"]["bootstrap.servers"]
    partitions = [
        (f"bench-lag-{size}-t{i}", p) for i in range(size // PER_TOPIC) for p in range(PER_TOPIC)
    ]
    admin = CountingAdmin({"bootstrap.servers": west})
    calls = {batch: EndOffsets(batch) for batch in batches}
    samples: dict[int | None, dict[str, list[float]]] = {
        b: {"wall": [], "cpu": [], "requests": []} for b in batches
    }
    reference: dict[tuple[str, int], int] | None = None
    for _ in range(CYCLES):
        for batch, call in calls.items():
            before = admin.list_offsets_requests()
            t, c = time.perf_counter(), time.process_time()
            ends, failed = call(admin, partitions)
            samples[batch]["wall"].append(time.perf_counter() - t)
            samples[batch]["cpu"].append(time.process_time() - c)
            after = admin.list_offsets_requests()
            samples[batch]["requests"].append(max(after[b] - before.get(b, 0) for b in after))
            assert not failed, next(iter(failed.values()))
            assert reference is None or ends == reference, "batched ends differ"
            reference = ends
    base = statistics.median(samples[batches[0]]["cpu"])
    return {
        str(batch): {
            "wall_s": statistics.median(s["wall"]),
            "process_cpu_s": statistics.median(s["cpu"]),
            "cpu_x_one_call": statistics.median(s["cpu"]) / base,
            "list_offsets_per_broker": statistics.median(s["requests"]),
        }
        for batch, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--fake", type=int, default=100_000)
    parser.add_argument(
        "--moving", default="0,0.1,1", help="fractions of the fake estate moving every cycle"
    )
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-lag")
    parser.add_argument(
        "--batches",
        default="",
        help="lag.list_offsets_batch values to compare with one call, e.g. 5000,2500 (stack sizes)",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    for moving in [float(m) for m in args.moving.split(",") if m] if args.fake else []:
        result = fake_case(args.fake, args.workdir, moving)
        print(f"fake {args.fake}, moving {moving}:", json.dumps(result, indent=1), flush=True)
    info = Stack(args.run_dir).info()
    if args.batches:
        batches: list[int | None] = [None, *(int(b) for b in args.batches.split(","))]
        for size in [int(s) for s in args.sizes.split(",") if s]:
            result = batch_case(info, size, batches)
            print(
                f"list_offsets_batch, {size} partitions:", json.dumps(result, indent=1), flush=True
            )
        return
    for size in [int(s) for s in args.sizes.split(",") if s]:
        print(
            f"stack {size}:", json.dumps(stack_case(info, size, args.workdir), indent=1), flush=True
        )


if __name__ == "__main__":
    main()
