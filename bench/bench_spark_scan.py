"""Benchmark: content-based rewind scan, Spark local[2] vs a single-process confluent-kafka scan.

    .venv/bin/python bench/bench_spark_scan.py --run-dir /tmp/spark-stack [--records 5000000]
    .venv/bin/python bench/bench_spark_scan.py --bootstrap 127.0.0.1:9092

A topic on west (no connector reads it; MM2 replicates east only), `bench-spark-scan-<N>`, is
produced once and reused while it holds exactly N records: 8 partitions of ~200-byte JSON values
(`order_id`, `customer`, `status`, `payload`) with a corrupt window in each partition (`status`
"bad", one in 50 of them truncated, not JSON). The predicate is the integration tests' one:
`value.status = 'bad' OR value_corrupt` over `from_json` with the value's schema.

Each size (1x, 2x, 4x = N/4, N/2, N records: the first part of every partition) is scanned by:
(a) offsetd's job (`offsetd.spark.scan`: Spark's Kafka source over the concrete ranges, split by
    `maxRecordsPerPartition`, from_json, the predicate, the per-partition aggregation), session
    warm (JVM start-up is timed once, apart);
(b) B-jvm: the same read + from_json + filter + count, the raw-engine baseline of performance.md;
(c) one Python process: confluent-kafka consume over the same ranges, json.loads, the same
    predicate and the same per-partition reduction.
(a) and (c) must give identical targets for every mode, or the benchmark fails. Records/s per core
uses 2 cores for Spark (local[2]) and 1 for (c). Not a pytest test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.config import SparkSettings
from offsetd.offsets.rewind_plan import Mode, PartitionRange, PartitionScan, decide
from offsetd.spark import scan
from offsetd.spark.session import start_session

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 8
SCHEMA = "order_id BIGINT, customer STRING, status STRING, payload STRING"
PREDICATE = "value.status = 'bad' OR value_corrupt"
PAYLOAD = "x" * 110  # ~200-byte values


def bootstrap_from_run_dir(run_dir: str) -> str:
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "offsetd"), "dev", "env", "--json", "--run-dir", run_dir],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return str(json.loads(out)["clusters"]["west"]["bootstrap.servers"])


def value(p: int, i: int, per_partition: int) -> bytes:
    """Record i of partition p: a corrupt window of 0.2 % of the partition, placed by p."""
    start = per_partition // 8 + p * 100
    bad = start <= i < start + per_partition // 500
    if bad and i % 50 == 0:
        return f'{{"order_id":{i},"customer":"c{p}","status":'.encode()
    status = "bad" if bad else "ok"
    return (
        f'{{"order_id":{p * 10_000_000 + i},"customer":"customer-{i % 997}",'
        f'"status":"{status}","payload":"{PAYLOAD}"}}'
    ).encode()


def high_watermarks(conf: dict[str, str], topic: str) -> dict[int, int] | None:
    consumer = Consumer({**conf, "group.id": "bench-spark-scan-probe"})
    try:
        meta = consumer.list_topics(timeout=10).topics.get(topic)  # no auto-creation
        if meta is None or meta.error is not None:
            return None
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in meta.partitions
        }
    finally:
        consumer.close()


def check_free_disk(where: Path, records: int) -> None:
    """Stop before producing when the disk cannot hold the data (~250 bytes per record in the
    broker's log, twice for headroom) plus Spark's scratch space (2 GB)."""
    needed = 2 * records * 250 + (2 << 30)
    free = shutil.disk_usage(where).free
    if free < needed:
        sys.exit(
            f"not enough free disk at {where}: {free / 1e9:.1f} GB, need {needed / 1e9:.1f} GB"
        )
    print(f"free disk at {where}: {free / 1e9:.1f} GB (need {needed / 1e9:.1f} GB)")


def ensure_topic(conf: dict[str, str], topic: str, records: int) -> None:
    per = records // PARTITIONS
    marks = high_watermarks(conf, topic)
    if marks is not None and sum(marks.values()) == per * PARTITIONS:
        print(f"reusing {topic} ({per * PARTITIONS:,} records)")
        return
    admin = AdminClient(dict(conf))  # kept alive until the futures are done
    if marks is not None:
        admin.delete_topics([topic])[topic].result()
        time.sleep(3)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    producer = Producer(
        {**conf, "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    started = time.monotonic()
    for i in range(per):
        for p in range(PARTITIONS):
            while True:
                try:
                    producer.produce(topic, value=value(p, i, per), partition=p)
                    break
                except BufferError:
                    producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.monotonic() - started
    print(f"produced {per * PARTITIONS:,} records to {topic} in {elapsed:.0f} s")


# -- (c): one Python process ------------------------------------------------------------------


def python_scan(
    conf: dict[str, str], ranges: list[PartitionRange]
) -> dict[tuple[str, int], PartitionScan]:
    consumer = Consumer(
        {
            **conf,
            "group.id": "bench-spark-scan-python",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            "enable.partition.eof": True,
        }
    )
    state: dict[int, list[Any]] = {}
    consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in ranges])
    ends = {r.partition: r.end for r in ranges}
    topic = ranges[0].topic
    open_partitions = {r.partition for r in ranges if r.size > 0}
    try:
        while open_partitions:
            for msg in consumer.consume(10_000, timeout=1.0):
                p, offset = msg.partition(), msg.offset()
                if msg.error() is not None or p not in open_partitions or offset is None:
                    continue
                if offset >= ends[p]:
                    open_partitions.discard(p)
                    consumer.pause([TopicPartition(topic, p)])
                    continue
                _reduce(state, p, offset, msg.value(), msg.timestamp()[1])
                if offset == ends[p] - 1:
                    open_partitions.discard(p)
                    consumer.pause([TopicPartition(topic, p)])
    finally:
        consumer.close()
    return {(topic, p): _scan_of(topic, p, s) for p, s in state.items()}


def _matches(raw: bytes | None) -> bool:
    if raw is None:
        return False
    try:
        parsed = json.loads(raw)
    except ValueError:
        return True  # value_corrupt
    return isinstance(parsed, dict) and parsed.get("status") == "bad"


def _reduce(state: dict[int, list[Any]], p: int, offset: int, raw: bytes | None, ts: int) -> None:
    # [scanned, matched, first, last, first_match, last_match, first_miss, min_ts, max_ts]
    s = state.get(p)
    if s is None:
        s = state[p] = [0, 0, offset, offset, None, None, None, ts, ts]
    s[0] += 1
    s[3] = offset
    s[7], s[8] = min(s[7], ts), max(s[8], ts)
    if _matches(raw):
        s[1] += 1
        s[4] = offset if s[4] is None else s[4]
        s[5] = offset
    elif s[6] is None:
        s[6] = offset


def _scan_of(topic: str, p: int, s: list[Any]) -> PartitionScan:
    return PartitionScan(topic, p, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8])


# -- (a) and (b): Spark -------------------------------------------------------------------------


def spark_scan(
    spark: Any, conf: dict[str, str], ranges: list[PartitionRange], max_records: int
) -> dict[tuple[str, int], PartitionScan]:
    options = {
        **scan.source_options(ranges, max_records, include_headers=False),
        **scan.kafka_options(conf),
    }
    frame = scan.with_predicate_columns(scan.kafka_frame(spark, options), SCHEMA)
    return scan.collect_scans(scan.per_partition(frame, PREDICATE))


def b_jvm(spark: Any, conf: dict[str, str], ranges: list[PartitionRange], max_records: int) -> int:
    options = {
        **scan.source_options(ranges, max_records, include_headers=False),
        **scan.kafka_options(conf),
    }
    frame = scan.with_predicate_columns(scan.kafka_frame(spark, options), SCHEMA)
    return int(frame.where(PREDICATE).count())


def targets(
    ranges: list[PartitionRange], scans: dict[tuple[str, int], PartitionScan]
) -> dict[str, list[int | None]]:
    return {
        str(mode): [d.next_offset for d in decide(mode, ranges, scans)]
        for mode in (Mode.FIRST_MATCH, Mode.AFTER_LAST_MATCH)
    }


def timed(work: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = work()
    return result, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-dir", help="run dir of `offsetd dev up`: west's bootstrap servers")
    where.add_argument("--bootstrap", help="bootstrap servers of the cluster to use")
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds at the largest size")
    parser.add_argument("--max-records-per-task", type=int, default=500_000)
    args = parser.parse_args()
    conf = {"bootstrap.servers": args.bootstrap or bootstrap_from_run_dir(args.run_dir)}
    topic = f"bench-spark-scan-{args.records}"
    check_free_disk(
        Path(args.run_dir) if args.run_dir else Path(tempfile.gettempdir()), args.records
    )
    ensure_topic(conf, topic, args.records)
    per = args.records // PARTITIONS

    spark, startup = timed(lambda: start_session(SparkSettings()))
    print(f"Spark session start-up (once, not in the rates): {startup:.1f} s")
    warm = [PartitionRange(topic, p, 0, 10_000) for p in range(PARTITIONS)]
    spark_scan(spark, conf, warm, args.max_records_per_task)  # JIT and class loading

    rows = []
    for factor, rounds in ((1, 1), (2, 1), (4, args.rounds)):
        size = per * factor // 4
        ranges = [PartitionRange(topic, p, 0, size) for p in range(PARTITIONS)]
        total = size * PARTITIONS
        for round_ in range(rounds):
            s_scans, s_time = timed(
                lambda r=ranges: spark_scan(spark, conf, r, args.max_records_per_task)
            )
            b_count, b_time = timed(
                lambda r=ranges: b_jvm(spark, conf, r, args.max_records_per_task)
            )
            p_scans, p_time = timed(lambda r=ranges: python_scan(conf, r))
            same = targets(ranges, s_scans) == targets(ranges, p_scans)
            matched = sum(s.matched for s in s_scans.values())
            if not same or matched != b_count:
                print(
                    "MISMATCH", targets(ranges, s_scans), targets(ranges, p_scans), file=sys.stderr
                )
                sys.exit(1)
            rows.append((factor, round_, total, s_time, b_time, p_time, matched))
            print(
                f"{factor}x round {round_ + 1}: {total:,} records, {matched:,} matched; "
                f"spark {s_time:.1f} s, B-jvm {b_time:.1f} s, python {p_time:.1f} s; "
                "targets identical"
            )
    print()
    print(
        "| size | records | offsetd Spark job | B-jvm | 1 Python process | job / B-jvm | "
        "speed-up vs Python | job records/s per core | Python records/s per core |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for factor in (1, 2, 4):
        mine = [r for r in rows if r[0] == factor]
        total = mine[0][2]
        s = statistics.median(r[3] for r in mine)
        b = statistics.median(r[4] for r in mine)
        p = statistics.median(r[5] for r in mine)
        print(
            f"| {factor}x | {total:,} | {s:.1f} s ({total / s:,.0f}/s) | {b:.1f} s | "
            f"{p:.1f} s ({total / p:,.0f}/s) | {b / s:.2f} | {p / s:.2f} | "
            f"{total / s / 2:,.0f} | {total / p:,.0f} |"
        )
    big = [r for r in rows if r[0] == 4]
    print(f"4x rounds, Spark job s: {[round(r[3], 1) for r in big]}")
    print(f"4x rounds, Python s: {[round(r[5], 1) for r in big]}")


if __name__ == "__main__":
    main()
