"""MM2 failover of 1,000 groups x 100 partitions: the plan (pure) and the reads (a real stack).

What `offsetd mm2 failover 'bench-g-*' --from benchsrc --to west` costs for 1,000 groups that
each committed 100 partitions: 100,000 checkpoints.

Pure part (no Kafka): synthetic inputs of that size -- the checkpoints, a `SyncIndex` with
`--syncs` offset syncs per partition, the target's watermarks, each group's commits on the
source (or None: `--no-source`) and on the target (MM2's `sync.group.offsets` committed the
checkpoints of every other group) -- and `plan_group` over every group on the whole flow, and
`session.plan_all` (which gives each group its own checkpoints: the same plans, checked), wall
and CPU time; and `plan_all` of 100 groups under the identity policy with a reverse flow.
The baseline, in the same run, is decoding the 100,000 checkpoint records with
`lag.checkpoints.decode_checkpoint` into the newest-per-key dict, exactly as
`failover.kafka.read_checkpoints` does: it is the least a translation of these groups must do
per partition (each checkpoint decoded once), on the same inputs and at the same granularity,
so the ratio says how many "decodes" of work the plan costs per partition. Also timed: the
decode of 100,000 offset-sync records (`failover.syncs.decode_offset_sync`) and the
`SyncIndex` built from them.

Stack part (`--run-dir` of a running `offsetd dev up`): on west, a made-up flow `benchsrc` ->
west that the stack's own MM2 (east -> west) never reads nor writes:
- `benchsrc.checkpoints.internal` (1 partition, compacted, like MM2's): 100,000 checkpoints in
  MM2's binary format, produced once and reused while it holds exactly that many records;
- `mm2-offset-syncs.benchsrc.internal` (1 partition, compacted): `--sync-records` offset syncs
  (100,000: 1,000 per partition), as the flow writes them with `offset-syncs.topic.location =
  target`, so both cases below read them on west;
- `benchsrc.bench-t`, 100 partitions of `--records` records each: the watermarks;
- groups `bench-g-<n>`: every even group committed on west at its checkpoints.
Then `session.gather` + `session.plan_all` run for all 1,000 groups (pattern `bench-g-*`):
- `no-source`: `source_conf=None`, as `--no-source` (the source is gone);
- `source`: east answers as `benchsrc`: topic `bench-t` (100 partitions, empty: committed
  offsets need not exist in the log) and the 1,000 groups committed on it with
  `alter_consumer_group_offsets`. The stack's MM2 replicates `bench-t` (empty) to
  `east.bench-t` and its checkpoint connector lists these groups' offsets every 5 s while they
  exist (it has no offset syncs for them, so it writes no checkpoint): the groups on east are
  made just before the rounds and deleted after them (`--keep-source-groups` keeps them).
Rounds alternate the cases and the baseline. Each gather is timed part by part (the session
module's readers wrapped, `TargetGroups` subclassed): checkpoints read, offset syncs read, the
source's groups and commits, the target's ListGroups, describe + commits (DescribeGroups and
one ListConsumerGroupOffsets per group), watermarks, the rest of `gather` (matching, inputs),
and `plan_all`. Once per round, the target's group calls are also timed alone: the describe,
then the commits one group after the other (as `TargetGroups.describe` did), or all asked
with the describe (as it does now).
Requests: `TargetGroups.requests` (offsetd's count of its admin calls), the librdkafka
requests by type of every client made during the gather (statistics every 100 ms; a consumer's
last <100 ms before it closes are not seen, so Fetch is a lower bound), and the source's aiokafka
requests counted from the calls (one FindCoordinator and one OffsetFetch per group in aiokafka
0.14). Baseline per case, same run: a bare confluent-kafka consume loop over the two topics the
gather reads on west (touching keys and values, no decoding), plus, with the source, the 1,000
groups' commits through the same `GroupReader`: what any tool translating these groups must
read. Not a pytest test.

    .venv/bin/offsetd dev up --detach --run-dir /tmp/devstack-bench
    .venv/bin/python bench/bench_failover.py                   # the pure part only
    .venv/bin/python bench/bench_failover.py --run-dir /tmp/devstack-bench [--rounds 3]

Why one module of ~820 lines: a benchmark runs as one script, and its pure and stack parts are
reported against baselines measured in the same run (the machine is noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.adminclient import connected_admin
from offsetd.devstack.stack import Stack
from offsetd.failover import session
from offsetd.failover.kafka import TargetGroups
from offsetd.failover.plan import (
    FlowInputs,
    GroupInputs,
    GroupPlan,
    PlanOptions,
    plan_group,
)
from offsetd.failover.policy import ReplicationPolicy
from offsetd.failover.session import FailoverRequest, Gathered, gather, plan_all
from offsetd.failover.syncs import OffsetSync, SyncIndex, decode_offset_sync
from offsetd.lag.checkpoints import Checkpoint, decode_checkpoint
from offsetd.lag.groups import GroupReader
from offsetd.offsets.offline import FETCH_TUNING

SOURCE = "benchsrc"  # a made-up alias: the stack's MM2 flow is east -> west
TARGET = "west"
TOPIC = "bench-t"
PREFIX = "bench-g-"
POLICY = ReplicationPolicy()
TARGET_TOPIC = POLICY.remote_topic(SOURCE, TOPIC)
CHECKPOINTS = POLICY.checkpoints_topic(SOURCE)
SYNCS = POLICY.offset_syncs_topic(SOURCE)  # offset-syncs.topic.location = target
SHIFT = 5_000  # the source's log is older: upstream = downstream + SHIFT + partition
BASE_TS = 1_767_000_000_000  # the pure part's checkpoint timestamps (now: one minute later)
BASE = "baseline: decode the checkpoints"
T = TypeVar("T")


# -- the synthetic flow ------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    groups: int
    partitions: int
    syncs: int  # per partition, the pure plan's SyncIndex
    sync_records: int  # in the offset-syncs topic (and the decode timing)
    records: int  # per target partition

    def group(self, g: int) -> str:
        return f"{PREFIX}{g:05d}"

    def checkpoint(self, g: int, p: int) -> tuple[int, int]:
        """(upstream, downstream) of group g's checkpoint of partition p."""
        down = (g * 37 + p * 11) % (self.records - 50)
        return down + SHIFT + p, down

    def source_commit(self, g: int, p: int) -> int:
        """The group's commit on the source: at or past its checkpoint."""
        return self.checkpoint(g, p)[0] + (g * 7 + p) % 40

    def target_commit(self, g: int, p: int) -> int | None:
        """Every even group was committed at its checkpoints (sync.group.offsets)."""
        return self.checkpoint(g, p)[1] if g % 2 == 0 else None

    def sync_pairs(self, p: int, count: int) -> list[tuple[int, int]]:
        """`count` (upstream, downstream) syncs of partition p, spread over its log."""
        step = max(1, self.records // count)
        return [(k * step + SHIFT + p, k * step) for k in range(count)]


def checkpoint_record(group: str, topic: str, p: int, up: int, down: int) -> tuple[bytes, bytes]:
    """MM2's `Checkpoint` record: key group, topic, partition; value version 0, upstream,
    downstream, metadata (empty). STRING = INT16 length + UTF-8, big-endian integers."""
    g, t = group.encode(), topic.encode()
    key = struct.pack(f">h{len(g)}sh{len(t)}si", len(g), g, len(t), t, p)
    return key, struct.pack(">hqqh", 0, up, down, 0)


def sync_record(topic: str, p: int, up: int, down: int) -> tuple[bytes, bytes]:
    """MM2's `OffsetSync` record: key topic, partition; value upstream, downstream."""
    t = topic.encode()
    return struct.pack(f">h{len(t)}si", len(t), t, p), struct.pack(">qq", up, down)


def checkpoint_records(shape: Shape) -> list[tuple[bytes, bytes]]:
    return [
        checkpoint_record(shape.group(g), TARGET_TOPIC, p, *shape.checkpoint(g, p))
        for g in range(shape.groups)
        for p in range(shape.partitions)
    ]


def sync_records(shape: Shape) -> list[tuple[bytes, bytes]]:
    per = max(1, shape.sync_records // shape.partitions)
    pairs = [(p, pair) for p in range(shape.partitions) for pair in shape.sync_pairs(p, per)]
    pairs.sort(key=lambda item: (item[1][1], item[0]))  # in the order the flow wrote them
    return [sync_record(TOPIC, p, up, down) for p, (up, down) in pairs]


def inputs(
    shape: Shape, syncs: SyncIndex, with_source: bool
) -> tuple[FlowInputs, list[GroupInputs]]:
    checkpoints: dict[tuple[str, str, int], Checkpoint] = {}
    groups: list[GroupInputs] = []
    for g in range(shape.groups):
        name = shape.group(g)
        source: dict[tuple[str, int], int] = {}
        target: dict[tuple[str, int], int] = {}
        for p in range(shape.partitions):
            up, down = shape.checkpoint(g, p)
            checkpoints[(name, TARGET_TOPIC, p)] = Checkpoint(
                name, TARGET_TOPIC, p, up, down, BASE_TS + (g % 60) * 1000
            )
            source[(TOPIC, p)] = shape.source_commit(g, p)
            current = shape.target_commit(g, p)
            if current is not None:
                target[(TARGET_TOPIC, p)] = current
        state = "EMPTY" if target else "DEAD"
        groups.append(GroupInputs(name, source if with_source else None, target, state))
    watermarks = {(TARGET_TOPIC, p): (0, shape.records) for p in range(shape.partitions)}
    flow = FlowInputs(
        SOURCE, TARGET, POLICY, checkpoints, syncs, None, watermarks, BASE_TS + 60_000
    )
    return flow, groups


def summary(plans: list[GroupPlan]) -> dict[str, Any]:
    actions = Counter(f"{m.via}/{m.action}" for plan in plans for m in plan.moves)
    return {
        "groups": len(plans),
        "refused": sum(1 for plan in plans if plan.refusal is not None),
        "moves": dict(sorted(actions.items())),
    }


# -- timing ------------------------------------------------------------------------------------


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """fn's result, wall seconds, process CPU seconds (librdkafka's threads included)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def med(values: list[float]) -> float:
    return statistics.median(values)


def decode_checkpoints(records: list[tuple[bytes, bytes]]) -> dict[Any, Checkpoint]:
    """`read_checkpoints`' decode loop, on records in memory."""
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in records:
        c = decode_checkpoint(key, value, BASE_TS)
        latest[(c.group, c.topic, c.partition)] = c
    return latest


def decode_syncs(records: list[tuple[bytes, bytes]]) -> list[OffsetSync]:
    return [decode_offset_sync(key, value) for key, value in records]


def pure_part(shape: Shape, rounds: int) -> dict[str, Any]:
    cp_records, (s_records, _w, _c) = checkpoint_records(shape), timed(lambda: sync_records(shape))
    index = SyncIndex(
        OffsetSync(TOPIC, p, up, down)
        for p in range(shape.partitions)
        for up, down in shape.sync_pairs(p, shape.syncs)
    )
    (flow, with_source), build_wall, build_cpu = timed(lambda: inputs(shape, index, True))
    nosource = [replace(g, source_commits=None) for g in with_source]
    options = PlanOptions()
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    plans: dict[str, list[GroupPlan]] = {}
    cases: dict[str, Callable[[], Any]] = {
        BASE: lambda: decode_checkpoints(cp_records),
        "decode offset syncs": lambda: decode_syncs(s_records),
        "plan_group, source answered": lambda: [plan_group(flow, g, options) for g in with_source],
        "plan_group, no source": lambda: [plan_group(flow, g, options) for g in nosource],
        "plan_all, no source": lambda: plan_all(_gathered(flow, nosource), options),
        "plan_all, source answered": lambda: plan_all(_gathered(flow, with_source), options),
    }
    decoded: list[OffsetSync] = []
    for _ in range(rounds):
        for name, fn in cases.items():
            out, wall, cpu = timed(fn)
            runs[name].append((wall, cpu))
            if name.startswith("plan"):
                plans[name] = out
            if name == "decode offset syncs":
                decoded = out
        _, wall, cpu = timed(lambda: SyncIndex(decoded))  # noqa: B023 (called at once)
        runs[f"SyncIndex of {len(decoded):,} syncs"].append((wall, cpu))
    assert len(decode_checkpoints(cp_records)) == shape.groups * shape.partitions
    for case in ("source answered", "no source"):
        # plan_all (checkpoints looked up per group) gives plan_group's plans, field for field
        assert plans[f"plan_group, {case}"] == plans[f"plan_all, {case}"], case
    base_wall = med([w for w, _ in runs[BASE]])
    base_cpu = med([c for _, c in runs[BASE]])
    # The identity policy with a reverse flow: `plan.came_from_target` looks for each source
    # topic among the reverse flow's sync partitions (a set made per call), twice per partition.
    few = with_source[: max(1, shape.groups // 10)]
    for reverse in (0, 1000):
        inverse = SyncIndex(OffsetSync(f"home-{i // 100}", i % 100, 10, 10) for i in range(reverse))
        identity = replace(flow, policy=ReplicationPolicy("identity"), inverse_syncs=inverse)
        _, wall, cpu = timed(lambda: plan_all(_gathered(identity, few), options))  # noqa: B023
        name = f"plan_all {len(few)} groups, identity, {reverse} rev. p."
        runs[name].append((wall, cpu))
    return {
        "inputs_build_s": (round(build_wall, 3), round(build_cpu, 3)),
        "timings": {
            name: {
                "wall_s": round(med([w for w, _ in values]), 4),
                "cpu_s": round(med([c for _, c in values]), 4),
                "x_baseline_wall": round(med([w for w, _ in values]) / base_wall, 2),
                "x_baseline_cpu": round(med([c for _, c in values]) / base_cpu, 2),
            }
            for name, values in runs.items()
        },
        "plans": {name: summary(p) for name, p in plans.items()},
    }


def _gathered(flow: FlowInputs, groups: list[GroupInputs]) -> Gathered:
    # plan_all reads only the flow and the groups: no TargetGroups (no client) is needed
    return Gathered(flow, groups, cast(TargetGroups, None), groups[0].source_commits is not None)


# -- the stack: topics and groups --------------------------------------------------------------


def _counts(conf: Mapping[str, str], topic: str) -> int | None:
    """Records in `topic` (end - start over its partitions), None when it does not exist."""
    consumer = Consumer({**conf, "group.id": "bench-failover-probe"})
    try:
        meta = consumer.list_topics(topic, timeout=15).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return None
        total = 0
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            total += high - low
        return total
    finally:
        consumer.close()


def ensure_topic(
    conf: Mapping[str, str],
    topic: str,
    partitions: int,
    records: Callable[[], Iterator[tuple[int, bytes | None, bytes]]],
    expected: int,
    config: Mapping[str, str] | None = None,
) -> None:
    """`topic` with `partitions` partitions holding exactly `expected` records (made again)."""
    admin = AdminClient(dict(conf))
    found = _counts(conf, topic)
    if found == expected:
        meta = admin.list_topics(topic, timeout=15).topics[topic]
        if len(meta.partitions) == partitions:
            return
    if found is not None:
        admin.delete_topics([topic], operation_timeout=30)[topic].result()
        time.sleep(2)
    created = False
    for _ in range(30):  # the deletion takes a moment to finish
        try:
            new = NewTopic(topic, partitions, 1, config=dict(config or {}))
            admin.create_topics([new], operation_timeout=30)[topic].result()
            created = True
            break
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc) and "marked for deletion" not in str(exc):
                raise
            time.sleep(1)
    assert created, f"could not create {topic}"
    producer = Producer({**conf, "linger.ms": 50, "batch.size": 1 << 20, "compression.type": "lz4"})
    t = time.perf_counter()
    count = 0
    for partition, key, value in records():
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    assert producer.flush(120) == 0, f"{topic}: records not delivered"
    print(f"  produced {count:,} records to {topic} in {time.perf_counter() - t:.1f} s")
    assert _counts(conf, topic) == expected, topic


def setup_west(conf: Mapping[str, str], shape: Shape) -> None:
    compact = {"cleanup.policy": "compact"}
    cps = checkpoint_records(shape)
    ensure_topic(conf, CHECKPOINTS, 1, lambda: ((0, k, v) for k, v in cps), len(cps), compact)
    syncs = sync_records(shape)
    ensure_topic(conf, SYNCS, 1, lambda: ((0, k, v) for k, v in syncs), len(syncs), compact)

    def target_records() -> Iterator[tuple[int, bytes | None, bytes]]:
        for p in range(shape.partitions):
            for i in range(shape.records):
                yield p, None, b"r%d" % i

    ensure_topic(
        conf, TARGET_TOPIC, shape.partitions, target_records, shape.partitions * shape.records
    )
    commit_groups(
        conf,
        {
            shape.group(g): {
                (TARGET_TOPIC, p): shape.checkpoint(g, p)[1] for p in range(shape.partitions)
            }
            for g in range(0, shape.groups, 2)
        },
    )


def commit_groups(
    conf: Mapping[str, str], commits: Mapping[str, Mapping[tuple[str, int], int]]
) -> None:
    """Commit every group's offsets (64 groups' requests at a time)."""
    admin = AdminClient(dict(conf))
    names = sorted(commits)
    t = time.perf_counter()
    for at in range(0, len(names), 64):
        futures = [
            admin.alter_consumer_group_offsets(
                [
                    ConsumerGroupTopicPartitions(
                        name, [TopicPartition(t_, p, o) for (t_, p), o in commits[name].items()]
                    )
                ],
                request_timeout=60,
            )[name]
            for name in names[at : at + 64]
        ]
        for future in futures:
            result = future.result()
            bad = [tp for tp in result.topic_partitions if tp.error is not None]
            assert not bad, bad[:3]
    print(f"  committed {len(names):,} groups in {time.perf_counter() - t:.1f} s")


def setup_east(conf: Mapping[str, str], shape: Shape) -> None:
    admin = AdminClient(dict(conf))
    meta = admin.list_topics(TOPIC, timeout=15).topics.get(TOPIC)
    if meta is None or meta.error is not None:
        admin.create_topics([NewTopic(TOPIC, shape.partitions, 1)], operation_timeout=30)[
            TOPIC
        ].result()
        time.sleep(1)
    elif len(meta.partitions) != shape.partitions:
        raise SystemExit(f"{TOPIC} on east has {len(meta.partitions)} partitions")
    commit_groups(
        conf,
        {
            shape.group(g): {(TOPIC, p): shape.source_commit(g, p) for p in range(shape.partitions)}
            for g in range(shape.groups)
        },
    )


def delete_groups(conf: Mapping[str, str], groups: list[str]) -> None:
    admin = AdminClient(dict(conf))
    for at in range(0, len(groups), 100):
        futures = admin.delete_consumer_groups(groups[at : at + 100], request_timeout=60)
        for future in futures.values():
            future.result()


# -- the stack: one gather, part by part -------------------------------------------------------


class Clock:
    """Wall seconds per part of one gather; parts may nest (commits inside describe)."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = defaultdict(float)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - t

    def wrap(self, name: str, fn: Callable[..., T]) -> Callable[..., T]:
        def timed_fn(*args: Any, **kw: Any) -> T:
            with self.part(name):
                return fn(*args, **kw)

        return timed_fn


class Stats:
    """librdkafka's statistics of every client made with it: the newest per client."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}

    def __call__(self, raw: str) -> None:
        stats = json.loads(raw)
        self.latest[str(stats.get("name"))] = stats

    def requests(self) -> dict[str, int]:
        """Requests sent, by type, and `unnamed`: those librdkafka's statistics do not name
        (an admin client is a producer handle to them: its OffsetFetch is not listed)."""
        out: Counter[str] = Counter()
        sent = 0
        for stats in self.latest.values():
            for broker in stats.get("brokers", {}).values():
                sent += int(broker.get("tx", 0))
                for kind, count in broker.get("req", {}).items():
                    if count:
                        out[kind] += int(count)
        out["unnamed"] = sent - sum(out.values())
        out["all librdkafka"] = sent
        return dict(out)


def instrumented(clock: Clock) -> type[TargetGroups]:
    class TimedTargetGroups(TargetGroups):
        def __init__(self, conf: Mapping[str, str], alias: str, timeout_s: float = 30.0) -> None:
            with clock.part("target: admin client"):
                super().__init__(conf, alias, timeout_s)

        def groups(self) -> list[str]:
            with clock.part("target: ListGroups"):
                return super().groups()

        def describe(self, groups: list[str]) -> Any:
            with clock.part("target: describe + commits"):
                return super().describe(groups)

        def watermarks(self, partitions: Any) -> dict[tuple[str, int], tuple[int, int]]:
            with clock.part("target: watermarks"):
                return super().watermarks(partitions)

    return TimedTargetGroups


class CountingReader(GroupReader):
    """The source's reader, counting aiokafka's requests (FindCoordinator + OffsetFetch)."""

    made: list[CountingReader] = []  # noqa: RUF012

    def __init__(self, conf: Mapping[str, str], *, concurrency: int = 64) -> None:
        super().__init__(conf, concurrency=concurrency)
        self.groups_read = 0
        CountingReader.made.append(self)

    def offsets(self, groups: Any, timeout_s: float = 10.0) -> Any:
        wanted = set(groups)
        self.groups_read += len(wanted)
        return super().offsets(wanted, timeout_s)


@contextmanager
def patched(clock: Clock) -> Iterator[None]:
    names = ("read_checkpoints", "read_syncs", "list_groups", "source_commits", "connected_admin")
    saved = {name: getattr(session, name) for name in (*names, "TargetGroups", "GroupReader")}
    labels = {
        "read_checkpoints": "checkpoints read",
        "read_syncs": "offset syncs read",
        "list_groups": "source: ListGroups",
        "source_commits": "source: commits (aiokafka)",
        "connected_admin": "source: admin client",
    }
    try:
        for name in names:
            setattr(session, name, clock.wrap(labels[name], saved[name]))
        setattr(session, "TargetGroups", instrumented(clock))  # noqa: B010
        setattr(session, "GroupReader", CountingReader)  # noqa: B010
        yield
    finally:
        for name, value in saved.items():
            setattr(session, name, value)


def one_gather(
    west: Mapping[str, str], east: Mapping[str, str] | None, shape: Shape
) -> dict[str, Any]:
    clock, stats = Clock(), Stats()
    counted = {"statistics.interval.ms": "100", "stats_cb": stats}
    request = FailoverRequest(
        SOURCE,
        TARGET,
        (f"{PREFIX}*",),
        cast(Mapping[str, str], {**west, **counted}),
        None if east is None else cast(Mapping[str, str], {**east, **counted}),
        POLICY,
        "target",
        source_timeout_s=30.0,
        timeout_s=120.0,
    )
    CountingReader.made.clear()
    with patched(clock):
        t, c = time.perf_counter(), time.process_time()
        gathered = gather(request)
        gather_wall, gather_cpu = time.perf_counter() - t, time.process_time() - c
        with clock.part("plan_all"):
            plans = plan_all(gathered, PlanOptions())
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    admin = gathered.target.admin
    for _ in range(3):  # the target admin's last statistics
        admin.poll(0.15)
    parts = dict(clock.parts)
    parts["gather: the rest (matching, inputs)"] = gather_wall - sum(
        v for k, v in parts.items() if k != "plan_all"
    )
    requests = stats.requests()
    aiokafka = sum(r.groups_read for r in CountingReader.made)
    if aiokafka:
        requests["aiokafka FindCoordinator"] = aiokafka
        requests["aiokafka OffsetFetch"] = aiokafka
    assert gathered.source_answered == (east is not None), gathered.notes
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "gather_wall_s": gather_wall,
        "gather_cpu_s": gather_cpu,
        "parts": parts,
        "target_groups_requests": gathered.target.requests,
        "requests": requests,
        "checkpoints": len(gathered.flow.checkpoints),
        "plans": plans,
        "reads": {k: (v.records, v.malformed) for k, v in gathered.reads.items()},
    }


def bare_read(conf: Mapping[str, str], topic: str) -> int:
    """A bare consume loop to the end offsets, touching each record's key and value."""
    consumer = Consumer(
        {
            **FETCH_TUNING,
            **conf,
            "group.id": "bench-failover-bare",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=15).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in meta.partitions
        }
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        count = size = 0
        while pending:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                key, value = msg.key(), msg.value()
                size += len(key or b"") + len(value or b"")
                count += 1
                if (msg.offset() or 0) >= ends[msg.partition()] - 1:
                    pending.discard(msg.partition())
        return count
    finally:
        consumer.close()


def target_probe(west: Mapping[str, str], shape: Shape) -> dict[str, float]:
    """The target's group calls alone, on a fresh admin client: DescribeConsumerGroups of all
    the groups; then their commits (one ListConsumerGroupOffsets per group) asked one after the
    other, as `TargetGroups.describe` did; and the commits asked all at once, with the
    descriptions in flight, as it does now."""
    admin = connected_admin(west, 10.0, TARGET)
    groups = [shape.group(g) for g in range(shape.groups)]

    def describe() -> dict[str, Any]:
        return dict(admin.describe_consumer_groups(groups, request_timeout=60))

    def ask(group: str) -> Any:
        request = [ConsumerGroupTopicPartitions(group)]
        return admin.list_consumer_group_offsets(request, request_timeout=60)[group]

    out: dict[str, float] = {}
    t = time.perf_counter()
    for future in describe().values():
        future.result()
    out["describe alone"] = time.perf_counter() - t
    one_by_one = [ask(group).result() for group in groups]
    out["describe, then commits one by one (before)"] = time.perf_counter() - t
    t = time.perf_counter()
    described, asked = describe(), [ask(group) for group in groups]
    for future in described.values():
        future.result()
    together = [future.result() for future in asked]
    out["describe + commits asked together (now)"] = time.perf_counter() - t
    assert [len(r.topic_partitions) for r in one_by_one] == [
        len(r.topic_partitions) for r in together
    ]
    return out


def baseline(west: Mapping[str, str], east: Mapping[str, str] | None, shape: Shape) -> float:
    t = time.perf_counter()
    assert bare_read(west, CHECKPOINTS) == shape.groups * shape.partitions
    bare_read(west, SYNCS)
    if east is not None:
        reader = GroupReader(east)
        try:
            found, failed = reader.offsets([shape.group(g) for g in range(shape.groups)], 50)
        finally:
            reader.close()
        assert not failed, list(failed.items())[:3]
        assert len(found) == shape.groups, len(found)
    return time.perf_counter() - t


def expected_plans(shape: Shape, with_source: bool) -> dict[str, Any]:
    """The pure plan of the stack's data (the topic's syncs), to check the stack's plans."""
    per = max(1, shape.sync_records // shape.partitions)
    index = SyncIndex(
        OffsetSync(TOPIC, p, up, down)
        for p in range(shape.partitions)
        for up, down in shape.sync_pairs(p, per)
    )
    flow, groups = inputs(shape, index, with_source)
    return summary(plan_all(_gathered(flow, groups), PlanOptions()))


def stack_part(run_dir: Path, shape: Shape, rounds: int, source: bool, keep: bool) -> None:
    info = Stack(run_dir).info()
    west, east = info.admin_config("west"), info.admin_config("east")
    print(f"setting up west ({west['bootstrap.servers']}) ...")
    setup_west(west, shape)
    cases: dict[str, Mapping[str, str] | None] = {"no-source": None}
    if source:
        print(f"setting up east ({east['bootstrap.servers']}) ...")
        setup_east(east, shape)
        cases["source"] = east
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    bases: dict[str, list[float]] = defaultdict(list)
    probes: dict[str, list[float]] = defaultdict(list)
    try:
        for r in range(rounds):
            for name, seconds in target_probe(west, shape).items():
                probes[name].append(seconds)
            for name, conf in cases.items():
                bases[name].append(baseline(west, conf, shape))
                one = one_gather(west, conf, shape)
                results[name].append(one)
                print(
                    f"  round {r + 1} {name:<9}: gather + plan {one['wall_s']:.2f} s "
                    f"(CPU {one['cpu_s']:.2f} s), baseline {bases[name][-1]:.2f} s",
                    flush=True,
                )
    finally:
        if source and not keep:
            delete_groups(east, [shape.group(g) for g in range(shape.groups)])
    for name, runs in results.items():
        report_case(name, runs, bases[name], shape)
    print(f"\n== the target's group calls alone, {shape.groups:,} groups (median of {rounds}) ==")
    for name, values in probes.items():
        rounds_text = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {name:<44} {med(values):6.2f} s  ({rounds_text})")


def report_case(name: str, runs: list[dict[str, Any]], bases: list[float], shape: Shape) -> None:
    wall, base = med([r["wall_s"] for r in runs]), med(bases)
    print(f"\n== stack, {name}: {shape.groups:,} groups x {shape.partitions} partitions ==")
    print(
        f"gather + plan_all: wall {wall:.2f} s (rounds: "
        + ", ".join(f"{r['wall_s']:.2f}" for r in runs)
        + f"), process CPU {med([r['cpu_s'] for r in runs]):.2f} s"
    )
    print(
        f"  gather alone {med([r['gather_wall_s'] for r in runs]):.2f} s "
        f"(CPU {med([r['gather_cpu_s'] for r in runs]):.2f} s)"
    )
    print(f"baseline (bare reads) {base:.2f} s; ratio {wall / base:.2f}x")
    print("where the time goes (median per part, wall):")
    parts = {part: med([r["parts"].get(part, 0.0) for r in runs]) for part in runs[0]["parts"]}
    for part, value in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {part:<40} {value:7.3f} s  {100 * value / wall:5.1f} %")
    last = runs[-1]
    print(f"TargetGroups.requests: {last['target_groups_requests']:,}")
    shown = {k: v for k, v in sorted(last["requests"].items()) if v}
    print(f"requests by type (librdkafka statistics + aiokafka calls): {shown}")
    print(f"reads: {last['reads']}")
    got = summary(last["plans"])
    want = expected_plans(shape, name == "source")
    print(f"plans: {got}")
    assert got == want, f"the stack's plans differ from the pure plans of its data: {want}"


# -- main --------------------------------------------------------------------------------------


def report_pure(shape: Shape, pure: dict[str, Any]) -> None:
    print(
        f"== pure: {shape.groups:,} groups x {shape.partitions} partitions "
        f"({shape.groups * shape.partitions:,} checkpoints, {shape.syncs} syncs per partition) =="
    )
    wall, cpu = pure["inputs_build_s"]
    print(f"building the inputs: {wall:.2f} s (CPU {cpu:.2f} s)")
    print(f"{'':<46} {'wall':>9} {'CPU':>9} {'x base wall':>12} {'x base CPU':>11}")
    for name, t in pure["timings"].items():
        print(
            f"{name:<46} {t['wall_s']:>8.3f}s {t['cpu_s']:>8.3f}s "
            f"{t['x_baseline_wall']:>12.2f} {t['x_baseline_cpu']:>11.2f}"
        )
    for name, s in pure["plans"].items():
        print(f"  {name}: {s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="a running `offsetd dev up` stack")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--syncs", type=int, default=4, help="per partition, pure part")
    parser.add_argument("--sync-records", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=1000, help="per target partition")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pure-rounds", type=int, default=3)
    parser.add_argument("--no-source-only", action="store_true")
    parser.add_argument("--keep-source-groups", action="store_true")
    parser.add_argument("--skip-pure", action="store_true")
    args = parser.parse_args()
    shape = Shape(args.groups, args.partitions, args.syncs, args.sync_records, args.records)
    if not args.skip_pure:
        report_pure(shape, pure_part(shape, args.pure_rounds))
    if args.run_dir is not None:
        stack_part(
            args.run_dir, shape, args.rounds, not args.no_source_only, args.keep_source_groups
        )


if __name__ == "__main__":
    main()
