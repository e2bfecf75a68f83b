"""Pure parts of the local stack: ids, properties, the offsetd.yaml it writes, error texts."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from offsetd.config import Settings
from offsetd.devstack import jars, kafka, mm2
from offsetd.devstack.connect import WorkerGroup
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.ports import PORT_BLOCK_ENV, check_bindable, free_ports
from offsetd.devstack.stack import StackInfo


def test_cluster_ids_look_like_kafka_uuids() -> None:
    ids = {kafka.new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cluster_id in ids:
        assert len(cluster_id) == 22
        assert not cluster_id.startswith("-")
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_single_node_settings_never_ask_for_three_replicas(tmp_path: Path) -> None:
    node = kafka.KafkaNode("east", 9092, 9093, kafka.new_cluster_id(), tmp_path)
    props = node.properties()
    for key, value in props.items():
        if "replication.factor" in key or key.endswith("min.isr"):
            assert value == 1, key
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert "0.0.0.0" not in str(props["advertised.listeners"])  # noqa: S104
    worker = WorkerGroup(bootstrap=node.bootstrap).worker_properties(8083)
    assert worker["listeners"] == "http://127.0.0.1:8083"
    assert worker["offset.flush.interval.ms"] == 1000
    assert "plugin.path" not in worker  # plugins come from the classpath, each loaded once


def test_mm2_connectors_use_byte_array_converters_and_strimzi_names() -> None:
    mirror = mm2.Mm2Set("127.0.0.1:1", "127.0.0.1:2", "/tmp/audit")
    assert mm2.SOURCE_CONNECTOR == "east->west.MirrorSourceConnector"
    assert mm2.CHECKPOINT_CONNECTOR == "east->west.MirrorCheckpointConnector"
    for config in (mirror.source(), mirror.checkpoint(), mirror.heartbeat()):
        for key in ("key.converter", "value.converter", "header.converter"):
            assert config[key] == mm2.BYTES
    assert mirror.heartbeat()["producer.override.bootstrap.servers"] == "127.0.0.1:1"
    assert mirror.heartbeat()["target.cluster.alias"] == "east"


def test_written_config_validates() -> None:
    info = StackInfo(
        run_dir="/x",
        clusters={
            "east": {"bootstrap.servers": "127.0.0.1:1", "cluster.id": "a"},
            "west": {"bootstrap.servers": "127.0.0.1:2", "cluster.id": "b"},
        },
        connect={
            "url": "http://127.0.0.1:3",
            "urls": ["http://127.0.0.1:3"],
            "kafka_cluster": "west",
            "group.id": "connect-cluster",
            "offset.storage.topic": "connect-offsets",
            "config.storage.topic": "connect-configs",
            "status.storage.topic": "connect-status",
            "offset.flush.interval.ms": 1000,
        },
        mm2={},
    )
    settings = Settings.model_validate(info.offsetd_config())
    assert settings.connect_clusters["local"].kafka_cluster == "west"
    # the lag statuses know how often this stack's Connect writes N (not Connect's default 1m)
    assert settings.lag.flush_interval == 1000


def test_failed_jar_download_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    failing_mvn = bin_dir / "mvn"
    failing_mvn.write_text("#!/bin/sh\necho '[ERROR] Could not transfer artifact' >&2\nexit 1\n")
    failing_mvn.chmod(failing_mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setenv("OFFSETD_JAR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DevStackError, match="mvn could not fetch the Kafka jars") as err:
        jars.ensure_kafka_jars()
    assert "Could not transfer artifact" in str(err.value)
    assert not any((tmp_path / "cache").glob("kafka-*/.complete"))


def test_missing_maven_names_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("OFFSETD_JAR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DevStackError, match="mvn was not found on PATH: install Apache Maven"):
        jars.ensure_kafka_jars()


def test_every_taken_port_of_a_block_is_named_at_once() -> None:
    with socket.socket() as first, socket.socket() as second:
        for holder in (first, second):
            holder.bind(("127.0.0.1", 0))
            holder.listen()
        taken = [first.getsockname()[1], second.getsockname()[1]]
        free = free_ports(1)
        with pytest.raises(DevStackError) as caught:
            check_bindable([taken[0], *free, taken[1]])
    message = str(caught.value)
    assert f"{taken[0]} (" in message
    assert f"{taken[1]} (" in message
    assert str(free[0]) not in message
    assert message.endswith("stop what holds them or choose another --base-port")


def test_a_free_block_passes() -> None:
    check_bindable(free_ports(3))


# -- port blocks (test lanes) -------------------------------------------------------------------


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _held_in_a_quiet_block() -> socket.socket:
    """A listening socket whose five neighbours nobody holds (on a busy machine an ephemeral
    port's neighbours often are taken): the block's one taken port is the one the test holds."""
    while True:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        if all(_free(p) for p in range(busy - 2, busy + 4) if p != busy):
            return holder
        holder.close()


def test_a_port_block_hands_each_port_out_once_and_skips_taken_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _held_in_a_quiet_block() as holder:
        busy = holder.getsockname()[1]
        low = busy - 2
        monkeypatch.setenv(PORT_BLOCK_ENV, f"{low}-{low + 5}:{tmp_path / 'claims'}")
        first = free_ports(2)
        second = free_ports(2)  # another process of the lane would see the same claims
    assert busy not in first + second
    assert len(set(first + second)) == 4
    assert all(low <= p <= low + 5 for p in first + second)
    with pytest.raises(DevStackError, match=f"the port block {low}-{low + 5} has fewer than 3"):
        free_ports(3)


@pytest.mark.parametrize("value", ["20000", "20000-19999:/tmp/x", "a-b:/tmp/x", "1-2:"])
def test_a_malformed_port_block_is_named(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_BLOCK_ENV, value)
    with pytest.raises(DevStackError, match=f"{PORT_BLOCK_ENV} must be"):
        free_ports(1)
