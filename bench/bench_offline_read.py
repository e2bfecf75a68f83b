"""Benchmark: offline read of a 1M-record offsets topic vs a bare confluent-kafka consume loop.

    .venv/bin/python bench/bench_offline_read.py --run-dir /tmp/offline-stack
    .venv/bin/python bench/bench_offline_read.py --bootstrap 127.0.0.1:9092

The first run produces `offline-bench-offsets-1m` (25 partitions, compacted like a real offsets
topic, 1,000,000 records in Connect's exact format: a few hundred connectors of five kinds, tens
of thousands of logical partitions updated ~20 times each, ~1 % tombstones, every key at the
partition Java's partitioner picks). Later runs reuse it when it holds 1M records. Both readers
then read it whole, alternately, `--rounds` times each; the best round of each is reported.
Not a pytest test.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.offsets.model import JsonScalar
from offsetd.offsets.offline import FETCH_TUNING, read_offsets
from offsetd.offsets.offline.javahash import encode_offset_key, java_partition

TOPIC = "offline-bench-offsets-1m"
RECORDS = 1_000_000
PARTITIONS = 25
REPO = Path(__file__).resolve().parents[1]


def bootstrap_from_run_dir(run_dir: str) -> str:
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "offsetd"), "dev", "env", "--json", "--run-dir", run_dir],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    servers: str = json.loads(out)["clusters"]["west"]["bootstrap.servers"]
    return servers


# -- the copy topic -----------------------------------------------------------------------------

Partition = dict[str, JsonScalar]


def logical_partitions(rng: random.Random) -> list[tuple[str, Partition]]:
    """(connector, partition map in its task's key order) for ~300 connectors of five kinds."""
    out: list[tuple[str, Partition]] = []
    for i in range(60):  # MM2 sources: cluster, partition, topic (Java HashMap order)
        name = f"dc{i}->central.MirrorSourceConnector"
        for t in range(rng.randrange(20, 60)):
            for p in range(rng.choice([1, 3, 6, 12])):
                out.append((name, {"cluster": f"dc{i}", "partition": p, "topic": f"orders.v{t}"}))
    for i in range(60):  # MM2 checkpoints: partition, topic, group
        name = f"dc{i}->central.MirrorCheckpointConnector"
        for g in range(rng.randrange(5, 40)):
            for p in range(3):
                out.append((name, {"partition": p, "topic": f"dc{i}.orders", "group": f"g{g}"}))
    for i in range(60):  # file sources
        out += [(f"files-{i}", {"filename": f"/data/in/{i}/part-{j:05d}.log"}) for j in range(40)]
    for i in range(60):  # JDBC-like
        out += [
            (f"jdbc-{i}", {"protocol": "1", "table": f"shop.public.table_{j}"}) for j in range(25)
        ]
    out += [(f"dbz-{i}", {"server": f"pg-{i}"}) for i in range(60)]  # Debezium-like
    return out


def offset_value(connector: str, n: int) -> dict[str, JsonScalar]:
    if "MirrorSource" in connector:
        return {"offset": n * 37}
    if "Checkpoint" in connector:
        return {"offset": 0}
    if connector.startswith("files"):
        return {"position": n * 4096}
    if connector.startswith("jdbc"):
        return {"incrementing": n * 11, "timestamp": 1_700_000_000_000 + n}
    return {"lsn": 23_000_000 + n * 512, "txId": 900 + n, "ts_usec": 1_700_000_000_000_000 + n}


def record_count(admin_conf: dict[str, str]) -> int | None:
    consumer = Consumer({**admin_conf, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        metadata = consumer.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if metadata is None or metadata.error is not None:
            return None
        total = 0
        for p in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def ensure_copy_topic(conf: dict[str, str]) -> None:
    existing = record_count(conf)
    if existing == RECORDS:
        print(f"{TOPIC}: already holds {RECORDS:,} records; reusing it")
        return
    admin = AdminClient(dict(conf))
    if existing is not None:
        print(f"{TOPIC}: holds {existing:,} records, not {RECORDS:,}; recreating it")
        for future in admin.delete_topics([TOPIC], operation_timeout=30).values():
            future.result()
        time.sleep(2)
    topic = NewTopic(TOPIC, PARTITIONS, 1, config={"cleanup.policy": "compact"})
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result()
    rng = random.Random(1)  # noqa: S311 - test data
    keys = [(c, encode_offset_key(c, p)) for c, p in logical_partitions(rng)]
    placed = [(c, k, java_partition(k, PARTITIONS)) for c, k in keys]
    print(f"{TOPIC}: producing {RECORDS:,} records over {len(placed):,} logical partitions")
    producer = Producer(
        {**conf, "linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000}
    )
    updates: dict[bytes, int] = {}
    started = time.monotonic()
    for _ in range(RECORDS):
        connector, key, partition = placed[rng.randrange(len(placed))]
        n = updates[key] = updates.get(key, 0) + 1
        value = None if rng.random() < 0.01 else offset_value(connector, n)
        raw = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        while True:
            try:
                producer.produce(TOPIC, key=key, value=raw, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        sys.exit("could not deliver every benchmark record")
    print(f"{TOPIC}: produced in {time.monotonic() - started:.1f} s")


# -- the two readers ----------------------------------------------------------------------------


def bare_loop(conf: dict[str, str]) -> int:
    """What any reader must do at least: assign, consume batches to the end offsets, touch bytes."""
    consumer = Consumer(
        {
            **FETCH_TUNING,  # the same librdkafka fetch settings as read_offsets: a fair race
            **conf,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC]
        ends = {}
        for p in metadata.partitions:
            ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in pending])
        count = 0
        size = 0
        while pending:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                key, value = msg.key(), msg.value()
                size += len(key or b"") + len(value or b"")
                count += 1
        return count
    finally:
        consumer.close()


def offline_read(conf: dict[str, str]) -> int:
    view = read_offsets(conf, TOPIC)
    assert not view.malformed
    assert not view.conflicts()
    return view.records_read


def timed(reader: Callable[[dict[str, str]], int], conf: dict[str, str]) -> tuple[int, float]:
    started = time.perf_counter()
    count = reader(conf)
    return count, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-dir", help="run dir of `offsetd dev up`: west's bootstrap servers")
    where.add_argument("--bootstrap", help="bootstrap servers of the Kafka cluster to use")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bootstrap = args.bootstrap or bootstrap_from_run_dir(args.run_dir)
    conf = {"bootstrap.servers": bootstrap}
    ensure_copy_topic(conf)
    results: dict[str, list[float]] = {"bare consume loop": [], "offsetd read_offsets": []}
    readers = {"bare consume loop": bare_loop, "offsetd read_offsets": offline_read}
    for _ in range(args.rounds):
        for name, reader in readers.items():
            count, seconds = timed(reader, conf)
            assert count == RECORDS, f"{name} read {count} records"
            results[name].append(count / seconds)
    print(f"\n{RECORDS:,} records, {PARTITIONS} partitions, best of {args.rounds} rounds:")
    for name, rates in results.items():
        print(
            f"  {name:<22} {max(rates):>10,.0f} records/s   "
            f"(median {statistics.median(rates):,.0f})"
        )
    ratio = max(results["offsetd read_offsets"]) / max(results["bare consume loop"])
    print(f"  ratio offsetd / bare:  {ratio:.2f}")


if __name__ == "__main__":
    main()
