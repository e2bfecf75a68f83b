"""The pre-rendered page: valid text format, the right values, per-topic aggregation."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from offsetd.lag.exposition import METRICS, render
from offsetd.lag.readiness import GroupReadiness
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
CHECKPOINT = "east->west.MirrorCheckpointConnector"
CONNECTOR = {"connect_cluster": "local", "connector": SOURCE}


def part(
    topic: str,
    partition: int,
    lag: int,
    seconds: float | None,
    status: Status,
    connector: str = SOURCE,
) -> PartitionLag:
    return PartitionLag(
        "local", connector, "east", "west", topic, partition, 100, 0,
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
            CheckpointLag(
                "local", CHECKPOINT, "east", "west", "g", "orders", 0, 90, 88, 95, 30.0, 5
            ),
            CheckpointLag(
                "local", CHECKPOINT, "east", "west", "idle", "orders", 1, 50, 50, 50, None, 0
            ),
        ),
        refresh_seconds=0.25,
        stage_seconds={"connect": 0.125, "offsets": 0.0625, "checkpoints": 0.0625},
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
    p0 = {**CONNECTOR, "source": "east", "target": "west", "topic": "orders", "partition": "0"}
    assert got[("offsetd_mm2_lag_records", labels(**p0))] == 3
    assert got[("offsetd_mm2_lag_seconds", labels(**p0))] == 12.5
    assert got[("offsetd_mm2_offset_age_seconds", labels(**p0))] == 5.0
    assert got[("offsetd_mm2_last_replicated_offset", labels(**p0))] == 96
    assert got[("offsetd_mm2_partition_status", labels(**p0, status="STOP"))] == 1
    for other in ("OK", "WARN", "STALL", "REWIND"):  # a state set: every status, 0 or 1
        assert got[("offsetd_mm2_partition_status", labels(**p0, status=other))] == 0
    weird = {
        **CONNECTOR,
        "source": "east",
        "target": "west",
        "topic": 'we"ird\\topic',
        "partition": "0",
    }
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
    group = {
        "connect_cluster": "local",
        "connector": CHECKPOINT,
        "source": "east",
        "target": "west",
        "group": "g",
        "topic": "orders",
        "partition": "0",
    }
    assert got[("offsetd_mm2_checkpoint_age_seconds", labels(**group))] == 30.0
    assert got[("offsetd_mm2_failover_reconsume_lower_bound_records", labels(**group))] == 5
    idle = {**group, "group": "idle", "partition": "1"}
    assert ("offsetd_mm2_checkpoint_age_seconds", labels(**idle)) not in got
    assert got[("offsetd_mm2_lag_slo_seconds", labels())] == 120.0
    assert got[("offsetd_mm2_lag_collection_errors_total", labels(stage="connect"))] == 2
    assert got[("offsetd_mm2_lag_refresh_duration_seconds", labels())] == 0.25
    stage = "offsetd_mm2_lag_refresh_stage_duration_seconds"
    assert {dict(k[1])["stage"]: v for k, v in got.items() if k[0] == stage} == {
        "connect": 0.125,
        "offsets": 0.0625,
        "checkpoints": 0.0625,
    }


def test_aggregated_per_topic() -> None:
    got = samples(render(snapshot(), aggregate_per_topic=True))
    orders = {**CONNECTOR, "source": "east", "target": "west", "topic": "orders"}
    assert got[("offsetd_mm2_lag_records", labels(**orders))] == 3
    assert got[("offsetd_mm2_lag_seconds", labels(**orders))] == 12.5
    assert got[("offsetd_mm2_partition_status", labels(**orders, status="STOP"))] == 1
    assert got[("offsetd_mm2_partition_status", labels(**orders, status="OK"))] == 0
    assert not any("partition" in dict(k[1]) for k in got if k[0] == "offsetd_mm2_lag_records")
    assert not any(k[0] == "offsetd_mm2_last_replicated_offset" for k in got)


def test_every_family_is_documented_and_named_by_convention() -> None:
    page = render(snapshot()).decode()
    for name, meta in METRICS.items():
        assert name.startswith("offsetd_")
        assert f"# HELP {name} " in page
        assert (meta.kind == "counter") == name.endswith("_total")


def test_two_connectors_on_one_pair_never_collide() -> None:
    """Blue/green: a second MirrorSourceConnector on east -> west replicates the same topic.

    Without the connector's identity both would export the same label set with different
    values (lag 1000 and 0), and Prometheus would keep one of them at random.
    """
    green = "east->west.green"
    page = render(
        Snapshot(
            taken_ms=NOW,
            partitions=(
                part("orders", 0, 3, 12.5, Status.STOP),
                part("orders", 0, 0, 0.0, Status.OK, connector=green),
            ),
        )
    )
    got = samples(page)
    series = [line.split(" ")[0] for line in page.decode().splitlines() if line[0] != "#"]
    assert len(series) == len(set(series)), "two samples share a label set"
    p0 = {"source": "east", "target": "west", "topic": "orders", "partition": "0"}
    blue_labels = labels(**p0, connect_cluster="local", connector=SOURCE)
    green_labels = labels(**p0, connect_cluster="local", connector=green)
    assert got[("offsetd_mm2_lag_records", blue_labels)] == 3
    assert got[("offsetd_mm2_lag_records", green_labels)] == 0
    for aggregated in (True, False):
        again = render(
            Snapshot(taken_ms=NOW, partitions=snapshot_two_flows(green)),
            aggregate_per_topic=aggregated,
        )
        keys = [line.split(" ")[0] for line in again.decode().splitlines() if line[0] != "#"]
        assert len(keys) == len(set(keys)), aggregated


def snapshot_two_flows(green: str) -> tuple[PartitionLag, ...]:
    return (
        part("t", 0, 1, 1.0, Status.OK),
        part("t", 1, 1, 1.0, Status.OK),
        part("t", 0, 2, 1.0, Status.WARN, connector=green),
    )


def test_every_status_is_a_state_set() -> None:
    """Partition and connector statuses use one convention: all five, the current one 1."""
    got = samples(render(snapshot()))
    for family in ("offsetd_mm2_partition_status", "offsetd_mm2_connector_status"):
        per_series: dict[frozenset[tuple[str, str]], list[float]] = {}
        for (name, lbls), value in got.items():
            if name == family:
                key = frozenset((k, v) for k, v in lbls if k != "status")
                per_series.setdefault(key, []).append(value)
        assert per_series
        for values in per_series.values():
            assert sorted(values) == [0, 0, 0, 0, 1]


def test_sink_lag_and_progress_are_state_sets_and_series_per_task_and_partition() -> None:
    from offsetd.lag.snapshot import SinkPartition, TaskProgress

    row = SinkPartition("local", "orders-sink", "orders", 3, 100, 250, 150, NOW - 42_000, 1)
    object.__setattr__(row, "labels", row.label_text())
    page = render(
        Snapshot(
            taken_ms=NOW,
            sink_partitions=(row,),
            progress=(
                TaskProgress("local", "orders-sink", None, "ok", NOW - 60_000),
                TaskProgress("local", "orders-sink", 1, "stalled", NOW - 30_000, 150, 42.0),
            ),
            stall_after_seconds=180.0,
        )
    ).decode()
    families = {f.name: f for f in text_string_to_metric_families(page)}
    (records,) = families["offsetd_sink_lag_records"].samples
    assert records.labels == {
        "connect_cluster": "local",
        "connector": "orders-sink",
        "task": "1",
        "topic": "orders",
        "partition": "3",
    }
    assert records.value == 150
    assert families["offsetd_sink_lag_seconds"].samples[0].value == 42.0
    states = {
        (s.labels["task"], s.labels["state"]): s.value
        for s in families["offsetd_connector_progress"].samples
    }
    assert states[("1", "stalled")] == 1
    assert states[("", "ok")] == 1
    assert sum(v for (task, _), v in states.items() if task == "1") == 1  # one current state
    assert len(states) == 10  # every state, for both, so none ever vanishes
    held = {
        s.labels["task"]: s.value
        for s in families["offsetd_connector_progress_state_seconds"].samples
    }
    assert held == {"": 60.0, "1": 30.0}
    assert families["offsetd_progress_stall_after_seconds"].samples[0].value == 180.0


def readiness(group: str, **changes: object) -> GroupReadiness:
    row = GroupReadiness(
        "local", CHECKPOINT, "east", "west", group, True, True, 3, 3, 0, (), 0, 12.5, 40, True, ""
    )
    return replace(row, **changes)  # type: ignore[arg-type]


def test_failover_readiness_is_per_group_never_per_partition() -> None:
    page = render(
        Snapshot(
            taken_ms=NOW,
            failover=(
                readiness("ready"),
                readiness(
                    "behind",
                    covered=1,
                    uncovered_count=2,
                    uncovered=("orders-1", "orders-2"),
                    stale=1,
                    ready=False,
                    reason="2 of 3 partitions have no checkpoint",
                ),
                readiness("idle", expected=False, checkpoint_age_max_seconds=None),
                readiness(
                    "unread",
                    commits_known=False,
                    partitions=0,
                    covered=0,
                    checkpoint_age_max_seconds=None,
                    reread_lower_bound=None,
                    ready=False,
                ),
            ),
        )
    )
    got = samples(page)
    flow = {"connect_cluster": "local", "connector": CHECKPOINT, "source": "east", "target": "west"}

    def value(name: str, group: str) -> float | None:
        return got.get((f"offsetd_mm2_failover_{name}", labels(**flow, group=group)))

    assert [value("ready", g) for g in ("ready", "behind", "idle", "unread")] == [1, 0, 1, 0]
    assert [value("expected", g) for g in ("ready", "behind", "idle", "unread")] == [1, 1, 0, 1]
    assert (value("uncovered_partitions", "behind"), value("stale_partitions", "behind")) == (2, 1)
    assert value("checkpoint_age_max_seconds", "ready") == 12.5
    assert value("reread_lower_bound_records", "ready") == 40
    # undefined: no series (an age only where the group is past a checkpoint; counts only where
    # the commits were read), never a made-up 0
    assert value("checkpoint_age_max_seconds", "idle") is None
    for name in ("uncovered_partitions", "stale_partitions", "reread_lower_bound_records"):
        assert value(name, "unread") is None
    assert not any(
        "partition" in dict(key) or "topic" in dict(key)
        for name, key in got
        if name.startswith("offsetd_mm2_failover_") and "reconsume" not in name
    )
