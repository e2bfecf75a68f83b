"""`offsetd rewind plan` on the real stack and Spark local: plans equal what the data implies.

One topic of 100k JSON records over 8 partitions (plus one empty partition) with a known corrupt
window in seven of them: `status = "bad"` records, a few of them not even JSON, and partition 6's
window broken by one good record. Every expected offset is computed here from the offsets the
broker assigned at produce time, never from offsetd. A FileStreamSink (string values, so every
record is one line) reads the topic; applying a plan with `offsetd offsets import` must make it
re-deliver exactly the records from each partition's target on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from confluent_kafka import KafkaError, Message, Producer

from offsetd.config import SparkSettings
from offsetd.offsets.rewind_plan import PartitionRange, load_plan, summary_path
from offsetd.remediation.quarantine import read_quarantined
from offsetd.spark import scan
from offsetd.spark.jars import ensure_spark_kafka_jars
from offsetd.spark.session import start_session
from tests.integration.cliutil import offsetd
from tests.integration.conftest import REPO
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    offset_of,
    produce,
    unique,
    wait_for,
)

PARTITIONS = 8  # with records; one more partition stays empty
PER_PARTITION = 12_500  # 100k records
SCHEMA = "p INT, i INT, order_id BIGINT, status STRING"
PREDICATE = "value.status = 'bad' OR value_corrupt"


@dataclass
class Produced:
    topic: str
    # partition -> offset -> (value, is_bad, timestamp ms as the broker stored it)
    records: dict[int, dict[int, tuple[bytes, bool, int]]]

    def bad(self, p: int, since: int = 0, until: int = 2**63) -> list[int]:
        """Offsets of bad records, optionally only those with since <= timestamp < until."""
        return sorted(
            o for o, (_, bad, ts) in self.records.get(p, {}).items() if bad and since <= ts < until
        )

    def end(self, p: int) -> int:
        return max(self.records[p]) + 1 if self.records.get(p) else 0


def _value(p: int, i: int) -> tuple[bytes, bool]:
    """Partition p's i-th record: bad inside p's window (except one hole in partition 6)."""
    start = 1_000 + 500 * p
    bad = p < 7 and start <= i < start + 200 + 10 * p and not (p == 6 and i == start + 5)
    if bad and i % 50 == 0:
        return f'{{"p":{p},"i":{i},"status":'.encode(), True  # not JSON at all
    status = "bad" if bad else "ok"
    body = {"p": p, "i": i, "order_id": p * 100_000 + i, "status": status}
    return json.dumps(body).encode(), bad


@pytest.fixture(scope="module")
def produced(west: str) -> Produced:
    topic = unique("rewind-orders")
    create_topic(west, topic, partitions=PARTITIONS + 1)
    producer = Producer({"bootstrap.servers": west, "linger.ms": 20, "enable.idempotence": True})
    records: dict[int, dict[int, tuple[bytes, bool, int]]] = {}
    errors: list[KafkaError] = []
    bad_of: dict[bytes, bool] = {}
    base = int(time.time() * 1000) - 3_600_000  # record i of each partition at base + 10 ms * i

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
            return
        value = msg.value()
        assert isinstance(value, bytes)
        stamp = msg.timestamp()[1]
        records.setdefault(msg.partition() or 0, {})[offset_of(msg)] = (value, bad_of[value], stamp)

    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            value, bad = _value(p, i)
            bad_of[value] = bad
            producer.produce(
                topic, value=value, partition=p, timestamp=base + 10 * i, on_delivery=delivered
            )
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    assert sum(len(r) for r in records.values()) == PARTITIONS * PER_PARTITION
    return Produced(topic, records)


@pytest.fixture(scope="module")
def sink(
    produced: Produced, connect: ConnectClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A sink that has read everything (committed = log end on every partition)."""
    name = unique("rewind-sink")
    out = tmp_path_factory.mktemp("sink") / "out.txt"
    config = json_file_sink(
        produced.topic,
        out,
        **{"value.converter": "org.apache.kafka.connect.storage.StringConverter"},
    )
    connect.create(name, config)
    connect.wait_running(name)
    wait_for("the sink to read every record", lambda: _lines(out) >= 100_000 or None, 120)
    ends = {p: produced.end(p) for p in range(PARTITIONS + 1)}  # the empty one at 0
    wait_for(
        "the sink to commit every record", lambda: _committed(connect, name) == ends or None, 60
    )
    yield name, out
    connect.delete(name)


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _committed(connect: ConnectClient, name: str) -> dict[int, int]:
    return {
        int(e["partition"]["kafka_partition"]): int(e["offset"]["kafka_offset"])
        for e in connect.offsets(name)["offsets"]
    }


def _plan(config: Path, sink: str, out: Path, *extra: str) -> tuple[int, str, str]:
    result = offsetd(config, "rewind", "plan", "--connector", sink, "--out", str(out), *extra)
    return result.exit_code, result.stdout, result.stderr


def _targets(plan_path: Path) -> dict[int, int]:
    loaded = load_plan(plan_path)
    return {
        int(e.partition["kafka_partition"]): int(e.offset["kafka_offset"])  # type: ignore[index,arg-type]
        for e in loaded.entries
    }


def _with_schema(*args: str) -> tuple[str, ...]:
    return ("--predicate", PREDICATE, "--value-schema", SCHEMA, *args)


def test_first_match_plan_is_applied_and_redelivers_exactly(
    offsetd_yaml: Path, produced: Produced, sink: tuple[str, Path], tmp_path: Path
) -> None:
    name, out = sink
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(
        offsetd_yaml, name, plan_path, *_with_schema("--mode", "first-match")
    )
    assert code == 0, stdout + stderr
    expected = {p: produced.bad(p)[0] for p in range(PARTITIONS) if produced.bad(p)}
    assert _targets(plan_path) == expected
    summary = json.loads(summary_path(plan_path).read_text())
    assert summary["totals"]["scanned"] == PARTITIONS * PER_PARTITION
    assert summary["totals"]["matched"] == sum(len(produced.bad(p)) for p in range(PARTITIONS))
    by_partition = {row["partition"]: row for row in summary["partitions"]}
    assert by_partition[7]["status"] == "unchanged"  # no corrupt window there
    assert by_partition[PARTITIONS]["scanned"] == 0  # the empty partition
    assert by_partition[PARTITIONS]["status"] == "unchanged"
    assert (
        f"scanning {PARTITIONS * PER_PARTITION:,} records in {PARTITIONS} of {PARTITIONS + 1}"
        in stderr
    )

    dry = offsetd(offsetd_yaml, "offsets", "import", "--dry-run", str(plan_path))
    assert dry.exit_code == 0, dry.output + dry.stderr
    before = _lines(out)
    applied = offsetd(offsetd_yaml, "offsets", "import", str(plan_path))
    assert applied.exit_code == 0, applied.output + applied.stderr
    redelivered = Counter(
        value
        for p, first in expected.items()
        for o, (value, _, _) in produced.records[p].items()
        if o >= first
    )
    total = sum(redelivered.values())
    wait_for("the re-delivery", lambda: _lines(out) >= before + total or None, 120)
    time.sleep(2)  # anything beyond the expected records would show up now
    new_lines = out.read_bytes().splitlines()[before:]
    assert Counter(new_lines) == redelivered


def test_spark_submit_runs_the_same_job(
    offsetd_yaml: Path, produced: Produced, sink: tuple[str, Path], tmp_path: Path
) -> None:
    """The job file runs under the real `spark-submit`, whose --master wins over the config's."""
    name, _ = sink
    by_cli = tmp_path / "cli.json"
    code, stdout, stderr = _plan(offsetd_yaml, name, by_cli, *_with_schema("--mode", "first-match"))
    assert code == 0, stdout + stderr
    by_submit = tmp_path / "submitted.json"
    jars = ",".join(str(p) for p in ensure_spark_kafka_jars(pyspark.__version__))
    venv_bin = Path(sys.executable).parent
    command = [str(venv_bin / "spark-submit"), "--master", "local[1]", "--jars", jars]
    command += [str(REPO / "daemon" / "offsetd" / "cli" / "spark_submit.py")]
    command += ["--config", str(offsetd_yaml), "--connector", name, "--out", str(by_submit)]
    command += _with_schema("--mode", "first-match")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    said = done.stdout + done.stderr  # spark-submit hands the driver's stderr to stdout
    started = [line for line in said.splitlines() if "starting Spark" in line]
    assert started, said[-3000:]
    assert "(local[1])" in started[0], started  # spark-submit's master, not offsetd.yaml's
    assert _targets(by_submit) == _targets(by_cli)
    assert _targets(by_cli) == {p: produced.bad(p)[0] for p in range(PARTITIONS) if produced.bad(p)}


def test_after_last_match_plan(
    offsetd_yaml: Path, produced: Produced, sink: tuple[str, Path], tmp_path: Path
) -> None:
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(
        offsetd_yaml, sink[0], plan_path, *_with_schema("--mode", "after-last-match")
    )
    assert code == 0, stdout + stderr
    expected = {p: produced.bad(p)[-1] + 1 for p in range(PARTITIONS) if produced.bad(p)}
    assert _targets(plan_path) == expected


def _stop_at(connect: ConnectClient, name: str, topic: str, positions: dict[int, int]) -> None:
    connect.http.put(connect.path(name, "/stop")).raise_for_status()

    def stopped() -> bool | None:
        status = connect.status(name)
        return (
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        ) or None

    wait_for(f"{name} STOPPED", stopped, 60)
    body = {
        "offsets": [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": p},
                "offset": {"kafka_offset": o},
            }
            for p, o in positions.items()
        ]
    }
    wait_for(
        "the PATCH",
        lambda: connect.http.patch(connect.path(name, "/offsets"), json=body).is_success or None,
        60,
    )


def test_skip_run_refused_then_applied(
    offsetd_yaml: Path,
    produced: Produced,
    connect: ConnectClient,
    sink: tuple[str, Path],
    west: str,
    tmp_path: Path,
) -> None:
    name = sink[0]
    starts = {p: produced.bad(p)[0] for p in range(7)}
    _stop_at(connect, name, produced.topic, starts)
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(offsetd_yaml, name, plan_path, *_with_schema("--mode", "skip-run"))
    assert code == 26, stdout + stderr
    hole = produced.bad(6)[4] + 1  # the good record inside partition 6's window
    assert f"{produced.topic}-6" in stderr
    assert f"offset {hole} does not match" in stderr
    assert f"{produced.topic}-0" not in stderr  # the other runs are fine
    assert not plan_path.exists()

    # With partition 6 past its window, every remaining match is a run from the committed offset.
    _stop_at(connect, name, produced.topic, {6: produced.bad(6)[-1] + 1})
    code, stdout, stderr = _plan(offsetd_yaml, name, plan_path, *_with_schema("--mode", "skip-run"))
    assert code == 0, stdout + stderr
    expected = {p: produced.bad(p)[-1] + 1 for p in range(6)}
    assert _targets(plan_path) == expected
    runs = {
        r["partition"]: r["skipped_run"]
        for r in json.loads(summary_path(plan_path).read_text())["partitions"]
    }
    assert runs[0] == {"first": produced.bad(0)[0], "last": produced.bad(0)[-1]}
    assert runs[6] is None
    assert runs[7] is None

    # Applying it copies every record of each skipped run to the quarantine topic (the skip
    # saga's, with its record format) before anything is patched. A topic of its own here, so
    # "exactly the runs' records" can be checked.
    topic = unique("offsetd.quarantine")
    config = _with_quarantine_topic(offsetd_yaml, tmp_path, topic)
    skipped = {p: produced.bad(p) for p in range(6)}
    total = sum(len(offsets) for offsets in skipped.values())
    dry = offsetd(config, "offsets", "import", "--dry-run", str(plan_path))
    assert dry.exit_code == 0, dry.output + dry.stderr
    assert f"would first copy {total:,} records of 6 runs to quarantine topic {topic}" in dry.output
    for p, offsets in skipped.items():
        run = f"{produced.topic}-{p} {offsets[0]}..{offsets[-1]} ({len(offsets):,} records)"
        assert run in dry.output
    assert "dry run: nothing was changed" in dry.output
    assert _quarantined(west, topic) == Counter()  # the dry run wrote nothing
    assert {p: o for p, o in _committed(connect, name).items() if p < 6} == {
        p: starts[p] for p in range(6)
    }

    applied = offsetd(config, "offsets", "import", str(plan_path))
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert f"quarantined {total:,} records to {topic}-" in applied.output
    copies = Counter(
        (produced.topic, p, o, None, produced.records[p][o][0])  # no keys were produced
        for p, offsets in skipped.items()
        for o in offsets
    )
    assert _quarantined(west, topic) == copies
    stored = read_quarantined({"bootstrap.servers": west}, topic)
    assert {(r.connector, r.saga_key) for r in stored} == {
        (name, f"skip-run/{name}/{load_plan(plan_path).summary['document_sha256'][:16]}")
    }
    assert {r.ref.partition for r in stored} == {stored[0].ref.partition}  # one key, one partition
    committed = _committed(connect, name)
    assert {p: committed[p] for p in range(6)} == expected
    assert committed[6] == produced.bad(6)[-1] + 1

    # Applying the same plan again copies nothing twice (and the offsets are already there).
    again = offsetd(config, "offsets", "import", str(plan_path))
    assert again.exit_code == 0, again.output + again.stderr
    assert f"({total:,} already there)" in again.output
    assert _quarantined(west, topic) == copies


def _with_quarantine_topic(config: Path, folder: Path, topic: str) -> Path:
    from ruamel.yaml import YAML

    yaml = YAML()
    data = yaml.load(config.read_text())
    data["remediation"] = {"quarantine_topic": topic}
    out = folder / "offsetd-quarantine.yaml"
    with out.open("w") as handle:
        yaml.dump(data, handle)
    return out


Copy = tuple[str, int, int, bytes | None, bytes | None]


def _quarantined(west: str, topic: str) -> Counter[Copy]:
    """(original topic, partition, offset, key, value) of every copy in the quarantine topic."""
    out: Counter[Copy] = Counter()
    for record in read_quarantined({"bootstrap.servers": west}, topic):
        assert record.original is not None
        original, stored = record.original, record.stored
        out[(original.topic, original.partition, original.offset, stored.key, stored.value)] += 1
    return out


def test_no_match_anywhere_writes_no_plan(
    offsetd_yaml: Path, sink: tuple[str, Path], tmp_path: Path
) -> None:
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(
        offsetd_yaml,
        sink[0],
        plan_path,
        "--predicate",
        "value.order_id < 0",
        "--value-schema",
        SCHEMA,
    )
    assert code == 27, stdout + stderr
    assert "no record matched" in stderr
    assert "100,000 records" in stderr
    assert not plan_path.exists()


def test_time_window_limits_the_scan(
    offsetd_yaml: Path, produced: Produced, sink: tuple[str, Path], tmp_path: Path
) -> None:
    stamps = sorted(ts for _, _, ts in produced.records[0].values())
    since, until = stamps[2_100], stamps[3_600]  # inside some windows, before and after others
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(
        offsetd_yaml,
        sink[0],
        plan_path,
        *_with_schema("--from-timestamp", str(since), "--to-timestamp", str(until)),
    )
    assert code == 0, stdout + stderr
    expected = {
        p: produced.bad(p, since, until)[0]
        for p in range(PARTITIONS)
        if produced.bad(p, since, until)
    }
    assert len(expected) < 7  # the window really excludes some corrupt windows
    assert _targets(plan_path) == expected


def test_time_range_without_data(
    offsetd_yaml: Path, sink: tuple[str, Path], tmp_path: Path
) -> None:
    plan_path = tmp_path / "plan.json"
    future = str(int(time.time() * 1000) + 86_400_000)
    code, stdout, stderr = _plan(
        offsetd_yaml, sink[0], plan_path, *_with_schema("--from-timestamp", future)
    )
    assert code == 27, stdout + stderr
    assert "no records in the requested range" in stderr
    assert not plan_path.exists()


@pytest.mark.parametrize(
    ("predicate", "reason"),
    [
        ("value.status = 'bad' AND (", "does not parse"),
        ("reflect('java.lang.System', 'exit', 0) IS NULL", "reflect() calls JVM methods"),
        ("my_udf(value) = 1", "not a Spark built-in function"),
        ("no_such_column > 1", "UNRESOLVED_COLUMN"),
    ],
)
def test_bad_predicates_give_one_message(
    offsetd_yaml: Path, sink: tuple[str, Path], tmp_path: Path, predicate: str, reason: str
) -> None:
    plan_path = tmp_path / "plan.json"
    code, stdout, stderr = _plan(
        offsetd_yaml, sink[0], plan_path, "--predicate", predicate, "--value-schema", SCHEMA
    )
    assert code == 25, stdout + stderr
    error_lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1
    assert predicate in error_lines[0]
    assert reason in error_lines[0]
    assert "\tat org.apache" not in stderr
    assert "Traceback" not in stderr
    assert not plan_path.exists()


def test_mirror_source_plan_uses_last_replicated_offsets(
    offsetd_yaml: Path, east: str, west: str, connect: ConnectClient, tmp_path: Path
) -> None:
    """A MirrorSourceConnector's plan scans its source topics on east and writes N-1 / null.

    Partition 0 has no offset and its first match at 300: stored 299. Partition 1 has replicated
    up to 199 and its first match at 0: null (from the log start). Partition 2 has no offset and
    its first match at 0: it starts at the log start already, so it is unchanged and left out
    (a null there would remove nothing)."""
    topic = unique("rewind-mm2")
    create_topic(east, topic, partitions=3)
    bad_at = {0: range(300, 310), 1: range(0, 5), 2: range(0, 5)}
    offsets = {
        p: produce(
            east,
            topic,
            [(None, b'{"bad": true}' if i in bad_at[p] else b'{"bad": false}') for i in range(500)],
            partition=p,
        )
        for p in (0, 1, 2)
    }
    first_bad = {p: offsets[p][bad_at[p][0]] for p in (0, 1, 2)}
    name = unique("rewind-mm2-source")
    response = connect.http.post(
        "/connectors",
        json={
            "name": name,
            "initial_state": "STOPPED",  # never replicates: only the plan is under test
            "config": {
                "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                "source.cluster.alias": "east",
                "target.cluster.alias": "west",
                "source.cluster.bootstrap.servers": east,
                "target.cluster.bootstrap.servers": west,
                "topics": topic,
                "tasks.max": "1",
            },
        },
    )
    assert response.status_code == 201, response.text

    def mm2_partition(p: int) -> dict[str, Any]:
        return {"cluster": "east", "partition": p, "topic": topic}

    replicated = {"offsets": [{"partition": mm2_partition(1), "offset": {"offset": 199}}]}
    wait_for(
        "the PATCH of partition 1",
        lambda: (
            connect.http.patch(connect.path(name, "/offsets"), json=replicated).is_success or None
        ),
        60,
    )
    try:
        plan_path = tmp_path / "plan.json"
        code, stdout, stderr = _plan(
            offsetd_yaml,
            name,
            plan_path,
            "--predicate",
            "value.bad",
            "--value-schema",
            "bad BOOLEAN",
        )
        assert code == 0, stdout + stderr
        document = json.loads(plan_path.read_text())
        by_partition = {e["partition"]["partition"]: e for e in document[name]}
        assert by_partition[0] == {
            "partition": mm2_partition(0),
            "offset": {"offset": first_bad[0] - 1},  # last replicated = the record before
        }
        assert first_bad[1] == first_bad[2] == 0
        assert by_partition[1] == {"partition": mm2_partition(1), "offset": None}
        assert 2 not in by_partition
        rows = {
            r["partition"]: r for r in json.loads(summary_path(plan_path).read_text())["partitions"]
        }
        assert [rows[p]["committed"] for p in (0, 1, 2)] == [None, 200, None]  # next offsets
        assert [rows[p]["status"] for p in (0, 1, 2)] == ["changed", "changed", "unchanged"]
        assert "2 partitions change, 1 unchanged" in stdout

        dry = offsetd(offsetd_yaml, "offsets", "import", "--dry-run", str(plan_path))
        assert dry.exit_code == 0, dry.output + dry.stderr
        assert "3. PATCH 2 partitions\n" in dry.output, dry.output
        applied = offsetd(offsetd_yaml, "offsets", "import", str(plan_path))
        assert applied.exit_code == 0, applied.output + applied.stderr
        stored = {
            e["partition"]["partition"]: e["offset"] for e in connect.offsets(name)["offsets"]
        }
        assert stored == {0: {"offset": first_bad[0] - 1}}  # 1 removed, 2 never there
    finally:
        connect.delete(name)


def test_credentials_stay_out_of_spark_conf_and_plans(west: str, produced: Produced) -> None:
    """Kafka credentials go into the Kafka source's options only: never Spark's conf or plans."""
    secret = "hunter2-not-in-any-plan"
    spark = start_session(SparkSettings())
    options = {
        **scan.source_options([PartitionRange(produced.topic, 0, 0, 10)], 1_000, False),
        **scan.kafka_options({"bootstrap.servers": west}),
        # PLAINTEXT ignores it; it only has to travel with the options as a real one would.
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="scan" password="{secret}";'
        ),
    }
    frame = scan.with_predicate_columns(scan.kafka_frame(spark, options), SCHEMA)
    assert frame.count() == 10
    execution: Any = frame._jdf.queryExecution()
    assert secret not in str(execution.toString())
    assert secret not in str(spark.sparkContext.getConf().getAll())
