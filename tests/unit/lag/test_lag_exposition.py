"""The pre-rendered page: valid text format, the right values, per-topic aggregation."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from offsetd.lag.exposition import METRICS, render
from offsetd.lag.snapshot import (
    CheckpointLag,
    ConnectorHealth,
    HeartbeatAge,
    PartitionLag,
    Snapshot,
)
from offsetd.lag.status import Status

NOW = 1_000_000
SOURCE = "east->west.MirrorSourceConnector"


def part(
    topic: str, partition: int, lag: int, seconds: float | None, status: Status
) -> PartitionLag:
    return PartitionLag(
        "local", SOURCE, "east", "west", topic, partition, 100, 0,
        None if lag == 100 else 99 - lag, NOW - 5_000, lag, seconds, status,
    )  # fmt: skip


def snapshot() -> Snapshot:
    return Snapshot(
        taken_ms=NOW,
        partitions=(
            part("orders", 0, 3, 12.5, Status.STOP),
            part("orders", 1, 0, 0.0, Status.OK),
            part('we"ird\\topic', 0, 100, None, Status.OK),
        ),
        connectors=(
            ConnectorHealth(
                "local",
                SOURCE,
                "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                "STOPPED",
                (),
                "east",
                "west",
            ),
            ConnectorHealth("local", "sink", "FileStreamSink", "RUNNING", ((0, "FAILED"),)),
        ),
        heartbeats=(
            HeartbeatAge("west", "east.heartbeats", "east", "west", 2.0),
            HeartbeatAge("east", "heartbeats", None, None, 0.5),
        ),
        checkpoints=(
            CheckpointLag("east", "west", "g", "orders", 0, 90, 88, 95, 30.0, 5),
            CheckpointLag("east", "west", "idle", "orders", 1, 50, 50, 50, None, 0),
        ),
        refresh_seconds=0.25,
        slo_seconds=120.0,
    )


def samples(page: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    families = list(text_string_to_metric_families(page.decode()))
    for family in families:
        assert family.documentation, family.name  # help text on every family
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def labels(**kv: str) -> frozenset[tuple[str, str]]:
    return frozenset(kv.items())


def test_per_partition_page() -> None:
    got = samples(render(snapshot(), errors_total={"connect": 2}))
    p0 = {"source": "east", "target": "west", "topic": "orders", "partition": "0"}
    assert got[("offsetd_mm2_lag_records", labels(**p0))] == 3
    assert got[("offsetd_mm2_lag_seconds", labels(**p0))] == 12.5
    assert got[("offsetd_mm2_offset_age_seconds", labels(**p0))] == 5.0
    assert got[("offsetd_mm2_last_replicated_offset", labels(**p0))] == 96
    assert got[("offsetd_mm2_partition_status", labels(**p0, status="STOP"))] == 1
    weird = {"source": "east", "target": "west", "topic": 'we"ird\\topic', "partition": "0"}
    assert got[("offsetd_mm2_lag_records", labels(**weird))] == 100
    # not started: no N, and lag seconds unknown are left out, not exported as 0
    assert ("offsetd_mm2_last_replicated_offset", labels(**weird)) not in got
    assert ("offsetd_mm2_lag_seconds", labels(**weird)) not in got
    conn = {"connect_cluster": "local", "connector": SOURCE, "source": "east", "target": "west"}
    assert got[("offsetd_mm2_connector_status", labels(**conn, status="STOP"))] == 1
    assert got[("offsetd_mm2_connector_status", labels(**conn, status="OK"))] == 0
    assert got[("offsetd_mm2_partitions", labels(**conn, status="OK"))] == 2
    assert got[("offsetd_mm2_partitions_not_started", labels(**conn))] == 1
    stopped = labels(connect_cluster="local", connector=SOURCE, state="STOPPED")
    assert got[("offsetd_connector_state", stopped)] == 1
    task = labels(connect_cluster="local", connector="sink", task="0", state="FAILED")
    assert got[("offsetd_connector_task_state", task)] == 1
    flow = labels(source="east", target="west", topic="east.heartbeats")
    assert got[("offsetd_mm2_heartbeat_age_seconds", flow)] == 2.0
    local = labels(cluster="east", topic="heartbeats")
    assert got[("offsetd_mm2_local_heartbeat_age_seconds", local)] == 0.5
    group = {"source": "east", "target": "west", "group": "g", "topic": "orders", "partition": "0"}
    assert got[("offsetd_mm2_checkpoint_age_seconds", labels(**group))] == 30.0
    assert got[("offsetd_mm2_failover_reconsume_lower_bound_records", labels(**group))] == 5
    idle = {**group, "group": "idle", "partition": "1"}
    assert ("offsetd_mm2_checkpoint_age_seconds", labels(**idle)) not in got
    assert got[("offsetd_mm2_lag_slo_seconds", labels())] == 120.0
    assert got[("offsetd_mm2_lag_collection_errors_total", labels(stage="connect"))] == 2


def test_aggregated_per_topic() -> None:
    got = samples(render(snapshot(), aggregate_per_topic=True))
    orders = {"source": "east", "target": "west", "topic": "orders"}
    assert got[("offsetd_mm2_lag_records", labels(**orders))] == 3
    assert got[("offsetd_mm2_lag_seconds", labels(**orders))] == 12.5
    assert got[("offsetd_mm2_partition_status", labels(**orders, status="STOP"))] == 1
    assert not any("partition" in dict(k[1]) for k in got if k[0] == "offsetd_mm2_lag_records")
    assert not any(k[0] == "offsetd_mm2_last_replicated_offset" for k in got)


def test_every_family_is_documented_and_named_by_convention() -> None:
    page = render(snapshot()).decode()
    for name, meta in METRICS.items():
        assert name.startswith("offsetd_")
        assert f"# HELP {name} " in page
        assert (meta.kind == "counter") == name.endswith("_total")
