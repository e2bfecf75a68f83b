"""MM2 lag on the real stack: `offsetd lag serve` and `offsetd run`, scraped by a real Prometheus.

With the MirrorSourceConnector stopped and K records produced on east, the records lag of that
partition is exactly K, its seconds lag grows, its status is STOP and MM2ReplicationStopped fires;
after resume the lag is 0 and the status OK. `offsetd run --enforce` serves the same lag series on
its own /metrics (exactly one worker collects: the owner of events partition 0, checked with two
workers). After that daemon has healed one poison record in a sink, every panel query of every
dashboard must return data from that Prometheus.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from offsetd.devstack import mm2
from offsetd.devstack.stack import StackInfo
from offsetd.errors import OffsetdError
from offsetd.lag.kafka_io import OffsetSpec
from offsetd.topics import ensure_compacted_topic
from tests.integration.daemonproc import free_port
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.lagutil import (
    OFFSETD,
    Page,
    fetch_page,
    firing,
    lag_config_file,
    lag_serve,
    parse_page,
    prometheus_scraping,
    shortened_rules,
    stop_process,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "offsetd-rules.yml"
DASHBOARDS = REPO / "grafana" / "dashboards"
K = 25
LAG_SETTINGS = {"interval": "1s", "window": "20s", "flush_interval": "1s", "slo_seconds": 3600}


@pytest.fixture(scope="module")
def lag_config(offsetd_yaml: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lag_config_file(
        offsetd_yaml, tmp_path_factory.mktemp("lag") / "offsetd.yaml", LAG_SETTINGS
    )


@pytest.fixture(scope="module")
def lag_server(lag_config: Path) -> Iterator[str]:
    """`offsetd lag serve` as its own process; yields its /metrics URL."""
    state = lag_config.with_name("windows.json")
    with lag_serve(lag_config, state) as url:
        yield url
    assert state.exists(), "the status windows were not persisted on stop"


class Daemon:
    """One `offsetd run --enforce` process (its own session), stopped by its PID."""

    def __init__(self, data: dict[str, Any], home: Path, name: str) -> None:
        self.data, self.port = data, int(data["daemon"]["web_port"])
        self.config, self.log = home / f"{name}.yaml", home / f"{name}.log"
        self.config.write_text(json.dumps(data))  # JSON is YAML
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.proc = subprocess.Popen(
            [str(OFFSETD), "run", "--config", str(self.config), "--enforce"],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )

    def text(self) -> str:
        if self.proc.poll() is not None:
            lines = self.log.read_text().splitlines()
            errors = [line for line in lines if "ERROR" in line or "Error" in line][:20]
            raise AssertionError(f"offsetd run exited: {errors} ... {lines[-20:]}")
        try:
            response = httpx.get(self.url, timeout=5)
        except httpx.HTTPError:
            return ""
        return response.text if response.status_code == 200 else ""

    def stop(self) -> None:
        stop_process(self.proc)


def daemon_data(stack: StackInfo, home: Path, app_id: str, dlq: str, name: str) -> dict[str, Any]:
    """The stack's offsetd.yaml with a daemon of its own topics, lag every second, fast verify."""
    data = stack.offsetd_config()
    data["connect_clusters"]["local"]["dlq_topics"] = [dlq]
    data["daemon"] = {
        "app_id": app_id,
        "partitions": 4,
        "rules_dir": str(REPO / "rules" / "examples"),
        "audit_topic": f"{app_id}.audit",
        "web_port": free_port(),
        "data_dir": str(home / f"state-{name}"),
    }
    data["remediation"] = {
        "sagas_topic": f"{app_id}.sagas",
        "control_topic": f"{app_id}.control",
        "quarantine_topic": f"{app_id}.quarantine",
        "verify_stable_for": "5s",
        # other test modules may leave FAILED connectors on the shared stack
        "blast_radius": {"max_failing_connectors": 1000},
    }
    data["lag"] = dict(LAG_SETTINGS)
    return data


def _has_leader(conf: dict[str, str], topic: str) -> bool:
    consumer = Consumer({**conf, "group.id": "offsetd-test-leader-probe"})
    try:
        consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        return True
    except KafkaException:
        return False
    finally:
        consumer.close()


def precreate(west: str, data: dict[str, Any]) -> None:
    """The daemon's compacted topics, created as it would and led, before it starts.

    Works around a start-up race outside this module: on a topic it has just created,
    `SagaStore.start` asks for watermarks at once and exits on NOT_LEADER_FOR_PARTITION.
    """
    conf = {"bootstrap.servers": west}
    topics = [
        data["daemon"]["audit_topic"],
        data["remediation"]["sagas_topic"],
        data["remediation"]["control_topic"],
    ]
    for topic in topics:
        ensure_compacted_topic(conf, topic, what=topic, error=OffsetdError)
        wait_for(f"a leader for {topic}", partial(_has_leader, conf, topic), timeout_s=30)


@pytest.fixture(scope="module")
def daemon(
    stack: StackInfo, west: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """`offsetd run --enforce` with rules/examples and lag enabled (the default)."""
    home = tmp_path_factory.mktemp("daemon")
    dlq = unique("lag-dlq")
    create_topic(west, dlq)
    data = daemon_data(stack, home, unique("offsetd-lag"), dlq, "w1")
    precreate(west, data)
    proc = Daemon(data, home, "worker-1")
    try:
        wait_for("the daemon's /metrics", proc.text, timeout_s=120)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def prometheus(
    lag_server: str, daemon: Daemon, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real Prometheus scraping the lag server and the daemon every second, with the rules."""
    home = tmp_path_factory.mktemp("prometheus")
    shortened_rules(RULES, home / "rules.yml")
    with prometheus_scraping(home, [lag_server, daemon.url], home / "rules.yml") as url:
        yield url


def _partition(topic: str) -> frozenset[tuple[str, str]]:
    return frozenset(
        {
            "connect_cluster": "local",
            "connector": mm2.SOURCE_CONNECTOR,
            "source": mm2.SOURCE,
            "target": mm2.TARGET,
            "topic": topic,
            "partition": "0",
        }.items()
    )


def _value(url: str, name: str, labels: frozenset[tuple[str, str]]) -> float | None:
    page = fetch_page(url)
    return None if page is None else page.get((name, labels))


def _status(url: str, topic: str) -> str | None:
    page = fetch_page(url) or {}
    for (name, labels), value in page.items():
        found = dict(labels)
        if name == "offsetd_mm2_partition_status" and value == 1 and found.get("topic") == topic:
            return found["status"]
    return None


def _stopped(connect: ConnectClient) -> bool:
    status = connect.status(mm2.SOURCE_CONNECTOR)
    return status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]


def test_stopped_replication_shows_exact_lag_stop_status_and_fires_the_alert(
    connect: ConnectClient, east: str, lag_server: str, prometheus: str
) -> None:
    topic = unique("lag")
    create_topic(east, topic)
    produce(east, topic, [(None, b"warm-up")])
    labels = _partition(topic)
    # Replication of the new topic has started: N = 0 and caught up.
    wait_for(
        "MM2 to replicate the new topic",
        lambda: (
            _value(lag_server, "offsetd_mm2_last_replicated_offset", labels) == 0
            and _value(lag_server, "offsetd_mm2_lag_records", labels) == 0
        ),
        timeout_s=90,
    )
    connect.http.put(connect.path(mm2.SOURCE_CONNECTOR, "/stop")).raise_for_status()
    try:
        wait_for("the MirrorSourceConnector STOPPED", lambda: _stopped(connect), timeout_s=60)
        produce(east, topic, [(None, f"r{i}".encode()) for i in range(K)])

        wait_for(
            f"records lag {K}",
            lambda: _value(lag_server, "offsetd_mm2_lag_records", labels) == K,
            timeout_s=30,
        )
        assert wait_for("status STOP", lambda: _status(lag_server, topic) == "STOP", 30)
        first = wait_for(
            "seconds lag", lambda: _value(lag_server, "offsetd_mm2_lag_seconds", labels), 30
        )
        time.sleep(2.5)
        later = _value(lag_server, "offsetd_mm2_lag_seconds", labels)
        assert later is not None
        assert later >= first + 1.5, (first, later)
        assert _value(lag_server, "offsetd_mm2_lag_records", labels) == K  # N did not move
        wait_for(
            "MM2ReplicationStopped firing in Prometheus",
            lambda: firing(prometheus, "MM2ReplicationStopped", mm2.SOURCE_CONNECTOR),
            timeout_s=45,
        )
    finally:
        connect.http.put(connect.path(mm2.SOURCE_CONNECTOR, "/resume")).raise_for_status()
        connect.wait_running(mm2.SOURCE_CONNECTOR, timeout_s=90)

    wait_for(
        "records lag back to 0",
        lambda: _value(lag_server, "offsetd_mm2_lag_records", labels) == 0,
        timeout_s=60,
    )
    assert _value(lag_server, "offsetd_mm2_last_replicated_offset", labels) == K
    assert _value(lag_server, "offsetd_mm2_lag_seconds", labels) == 0
    assert wait_for("status OK", lambda: _status(lag_server, topic) == "OK", 30)


def test_an_idle_transactional_topic_is_caught_up(east: str, lag_server: str) -> None:
    """A committed transaction ends with a marker that takes an offset and is never replicated:
    LEO = N + 2 once MM2 has copied every record, and that is lag 0 (not 1, which would turn
    into a false STALL after one window)."""
    topic = unique("lag-tx")
    create_topic(east, topic)
    producer = Producer({"bootstrap.servers": east, "transactional.id": unique("offsetd-test")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"t{i}".encode(), partition=0)
    producer.commit_transaction(30)
    labels = _partition(topic)
    wait_for(
        "MM2 to replicate the transaction's records",
        lambda: _value(lag_server, "offsetd_mm2_last_replicated_offset", labels) == 2,
        timeout_s=90,
    )
    admin = AdminClient({"bootstrap.servers": east})
    ends = admin.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.latest()},
        isolation_level=IsolationLevel.READ_COMMITTED,
    )
    assert next(iter(ends.values())).result().offset == 4  # records 0-2, the marker at 3
    # Lag stays 0 and the status OK past the window (20 s): no false STALL.
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        assert _value(lag_server, "offsetd_mm2_lag_records", labels) == 0
        assert _value(lag_server, "offsetd_mm2_lag_seconds", labels) == 0
        assert _status(lag_server, topic) == "OK"
        time.sleep(2)


def test_offsetd_lag_prints_the_same_once_as_a_table_and_as_json(
    east: str, lag_server: str, lag_config: Path, tmp_path: Path
) -> None:
    topic = unique("lag-cli")
    create_topic(east, topic)
    produce(east, topic, [(None, f"c{i}".encode()) for i in range(3)])
    labels = _partition(topic)
    wait_for(
        "MM2 to replicate the three records",
        lambda: _value(lag_server, "offsetd_mm2_last_replicated_offset", labels) == 2,
        timeout_s=90,
    )
    state = tmp_path / "windows.json"  # read if there, never written by the one-shot command
    command = [str(OFFSETD), "lag", "--config", str(lag_config), "--state-file", str(state)]
    out = subprocess.run([*command, "-o", "json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    rows = [p for p in doc["partitions"] if p["topic"] == topic]
    assert len(rows) == 1, rows
    row = rows[0]
    expected = {
        "connector": mm2.SOURCE_CONNECTOR,
        "source": mm2.SOURCE,
        "target": mm2.TARGET,
        "partition": 0,
        "end_offset": 3,
        "last_replicated_offset": 2,
        "not_started": False,
        "lag_records": 0,
        "lag_seconds": 0.0,
        "status": "OK",
    }
    assert {k: row[k] for k in expected} == expected
    assert any(c["connector"] == mm2.SOURCE_CONNECTOR for c in doc["connectors"])
    assert any(h["replicated"] for h in doc["heartbeats"]), doc["heartbeats"]

    out = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["FLOW", "CONNECTOR", "TOPIC", "PARTITION"], lines[0]
    mine = [line.split() for line in lines if f" {topic} " in f" {line} "]
    assert len(mine) == 1, lines
    flow, connector = f"{mm2.SOURCE}->{mm2.TARGET}", mm2.SOURCE_CONNECTOR
    # flow, connector, topic, partition, end, replicated, lag, lag s, (N's age), status
    expected_row = [flow, connector, topic, "0", "3", "2", "0", "0.0"]
    assert (mine[0][:8], mine[0][-1]) == (expected_row, "OK")
    assert not state.exists()


# -- offsetd run ---------------------------------------------------------------------------------

_MM2_CONNECTOR = {
    "connect_cluster": "local",
    "connector": mm2.SOURCE_CONNECTOR,
    "source": mm2.SOURCE,
    "target": mm2.TARGET,
}


def _collects(page: Page) -> bool:
    """The page holds the lag exporter's series for the stack's MirrorSourceConnector."""
    return any(
        name == "offsetd_mm2_connector_status" and value == 1 and _MM2_CONNECTOR.items() <= labels
        for (name, labels), value in page.items()
    )


def test_offsetd_run_serves_mm2_lag_on_its_metrics(daemon: Daemon) -> None:
    """The daemon's own /metrics page carries the lag series, refreshed in the background."""

    def lag_page() -> Page | None:
        page = parse_page(daemon.text())
        # offsetd_events_total has a series once the daemon counted its first event, which a
        # loaded machine may see after the first lag cycle
        counted = any(name == "offsetd_events_total" for name, _labels in page)
        return page if _collects(page) and counted else None

    page = wait_for("MM2 lag and the daemon's own counters on its page", lag_page)
    # east's heartbeats topic is one of the partitions the stack's MM2 replicates
    east_heartbeats = _partition("heartbeats")
    assert page[("offsetd_mm2_last_replicated_offset", east_heartbeats)] >= 0
    assert page[("offsetd_mm2_lag_records", east_heartbeats)] >= 0
    assert ("offsetd_mm2_lag_seconds", east_heartbeats) in page
    replicated = frozenset(
        {"source": mm2.SOURCE, "target": mm2.TARGET, "topic": f"{mm2.SOURCE}.heartbeats"}.items()
    )
    assert ("offsetd_mm2_heartbeat_age_seconds", replicated) in page
    running = frozenset(
        {"connect_cluster": "local", "connector": mm2.SOURCE_CONNECTOR, "state": "RUNNING"}.items()
    )
    assert page[("offsetd_connector_state", running)] == 1
    # the daemon's own metrics are on the same page, without the client library's `_created`
    assert not [name for name, _labels in page if name.endswith("_created")]
    stamp: tuple[str, frozenset[tuple[str, str]]] = (
        "offsetd_mm2_lag_last_refresh_timestamp_seconds",
        frozenset(),
    )
    first = page[stamp]

    def later() -> float | None:
        value = parse_page(daemon.text()).get(stamp)
        return value if value is not None and value > first else None

    assert wait_for("a later lag cycle (collection runs in the background)", later) > first


# -- dashboards ---------------------------------------------------------------------------------


def _first_value(prom: str, query: str) -> str | None:
    """`label_values(metric{...}, label)` the way Grafana resolves it: sorted, first."""
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip())
    assert match, query
    selector, label = match.groups()
    response = httpx.get(
        f"{prom}/api/v1/label/{label}/values", params={"match[]": selector}, timeout=10
    ).json()
    values = sorted(response["data"])
    return values[0] if values else None


def _resolve(prom: str, dashboard: dict[str, Any]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = _substitute(var["query"]["query"], chosen)
        value = _first_value(prom, query)
        if value is not None:  # unresolved: its panels count as without data
            chosen[var["name"]] = value
    return chosen


def _substitute(expr: str, chosen: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "30s")
    for name in sorted(chosen, key=len, reverse=True):
        expr = expr.replace(f"${name}", chosen[name])  # Grafana's raw format for one value
    return expr


def _has_data(prom: str, expr: str) -> bool:
    now = time.time()
    response = httpx.get(
        f"{prom}/api/v1/query_range",
        params={"query": expr, "start": now - 120, "end": now, "step": "2"},
        timeout=20,
    ).json()
    assert response["status"] == "success", (expr, response)
    return bool(response["data"]["result"])


def _at(topic: str, offset: int) -> dict[str, Any]:
    """A sink's entry in `GET /offsets`."""
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": 0},
        "offset": {"kafka_offset": offset},
    }


def _task_states(connect: ConnectClient, name: str) -> list[str]:
    status = connect.status(name)
    return [t["state"] for t in status["tasks"]] if status else []


@pytest.fixture(scope="module")
def remediated(
    daemon: Daemon, connect: ConnectClient, west: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The daemon heals a real poison record in a JSON sink (the demo's case); yields the sink.

    The test plays the operator for the first two restarts (the rule's own backoff starts at
    30 s); the third failure at the same record makes the daemon quarantine and skip it.
    """
    dlq = daemon.data["connect_clusters"]["local"]["dlq_topics"][0]
    topic, name = unique("lag-poison"), unique("lag-poison-sink")
    create_topic(west, topic)
    produce(west, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(5)])
    sink = tmp_path_factory.mktemp("sink") / "sink.txt"
    connect.create(
        name,
        json_file_sink(
            topic,
            sink,
            **{
                "errors.tolerance": "none",
                "errors.deadletterqueue.topic.name": dlq,
                "errors.deadletterqueue.topic.replication.factor": "1",
                "errors.deadletterqueue.context.headers.enable": "true",
            },
        ),
    )
    try:
        connect.wait_running(name)
        wait_for(
            "5 records committed",
            lambda: connect.offsets(name)["offsets"][:1] == [_at(topic, 5)],
        )
        produce(west, topic, [(b"bad", b"{not json"), (b"k6", b'{"n": 6}')])
        skipped = ("offsetd_records_skipped_total", frozenset(
            {"connect_cluster": "local", "connector": name, "topic": topic}.items()
        ))  # fmt: skip
        dlq_events = ("offsetd_events_total", frozenset(
            {"kind": "dlq_record", "topic": dlq}.items()
        ))  # fmt: skip
        restarted = [0.0]

        def healed() -> bool:
            """Play the operator until the daemon has seen three failures, then let it act.

            The rule's own restarts (backoff from 30 s) may come in between, so failures are
            counted from the daemon's DLQ events, not from the restarts made here.
            """
            page = parse_page(daemon.text())
            if page.get(skipped) == 1:
                return True
            if (
                page.get(dlq_events, 0) < 3
                and time.monotonic() - restarted[0] > 5  # the daemon saw the last failure
                and _task_states(connect, name) == ["FAILED"]
            ):
                response = connect.http.post(
                    connect.path(name, "/restart"),
                    params={"includeTasks": "true", "onlyFailed": "true"},
                )
                assert response.status_code in (200, 202, 204), response.text
                restarted[0] = time.monotonic()
            return False

        wait_for("the daemon to quarantine and skip the poison record", healed, 240)
        executed = ("offsetd_remediation_outcomes_total", frozenset(
            {"rule": "poison-record-skip", "outcome": "executed"}.items()
        ))  # fmt: skip
        wait_for("the outcome", lambda: parse_page(daemon.text()).get(executed) == 1, 30)
        assert _task_states(connect, name) == ["RUNNING"]
        yield name
    finally:
        connect.delete(name)


def _scraped(prom: str, query: str) -> bool:
    result = httpx.get(f"{prom}/api/v1/query", params={"query": query}, timeout=5).json()
    return bool(result["data"]["result"])


def test_every_dashboard_panel_query_returns_data(
    prometheus: str, lag_server: str, remediated: str
) -> None:
    wait_for("35 s of samples", lambda: _enough_history(prometheus), timeout_s=60)
    skipped = f'offsetd_records_skipped_total{{connector="{remediated}"}} == 1'
    wait_for("Prometheus to scrape the skip", lambda: _scraped(prometheus, skipped), 30)
    time.sleep(3)  # increase() and rate() need two samples after the counters appeared
    empty: dict[str, list[str]] = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        chosen = _resolve(prometheus, dashboard)
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = _substitute(target["expr"], chosen)
                if "$" in expr or not _has_data(prometheus, expr):
                    empty.setdefault(path.name, []).append(f"{panel['title']}: {expr}")
    assert not empty, f"panel queries without data: {json.dumps(empty, indent=2)}"
    assert {p.name for p in DASHBOARDS.glob("*.json")} == {
        "mm2-replication.json",
        "connector-health.json",
        "offsetd-remediation.json",
    }


def _enough_history(prom: str) -> bool:
    result = httpx.get(
        f"{prom}/api/v1/query",
        params={"query": "count_over_time(offsetd_mm2_lag_slo_seconds[5m])"},
        timeout=5,
    ).json()["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) >= 35


# -- exactly one worker (last: it stops a worker) ------------------------------------------------


def test_exactly_one_worker_collects_and_the_lease_moves_when_it_stops(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A second `offsetd run` of the same app: one of the two collects; stop it, the other does."""
    data = json.loads(json.dumps(daemon.data))
    data["daemon"]["web_port"] = free_port()
    data["daemon"]["data_dir"] = str(tmp_path / "state-w2")
    second = Daemon(data, tmp_path, "worker-2")
    workers = [daemon, second]
    events = f'topic="{data["daemon"]["app_id"]}-events"'
    try:
        # worker 2 reports its own consumer lag only once it has partitions: the group rebalanced
        wait_for("worker 2 to join the group", lambda: events in second.text(), timeout_s=120)

        def one_collector() -> list[bool] | None:
            owners = [_collects(parse_page(w.text())) for w in workers]
            return owners if owners.count(True) == 1 else None

        owners = wait_for("exactly one worker collecting", one_collector, timeout_s=60)
        for _ in range(3):  # and it stays that way
            time.sleep(1)
            assert one_collector() == owners
        owner, other = (daemon, second) if owners[0] else (second, daemon)
        owner.stop()
        wait_for(
            "the other worker to take the lease", lambda: _collects(parse_page(other.text())), 90
        )
    finally:
        second.stop()
