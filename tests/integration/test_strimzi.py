"""Strimzi's documented offsets procedures, done by offsetd through the resources.

Real parts: the kube-apiserver + etcd of the session (Strimzi's CRDs applied), the real Connect
cluster and Kafka of the stack. The operator is the tests-only stand-in
(`offsetd.devstack.strimzi_standin`), which plays the documented behaviour offsetd relies on;
offsetd itself runs with a service-account token bound to exactly the shipped Role.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lightkube.resources.events_v1 import Event
from prometheus_client import CollectorRegistry

from offsetd.cli import main
from offsetd.config import load_settings
from offsetd.connect.client import ConnectClient as OffsetdConnectClient
from offsetd.devstack import strimzi_resources
from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.stack import StackInfo
from offsetd.engine.decision import Decision, DecisionInputs, EventSummary, PlannedAction
from offsetd.errors import ConnectorRejected
from offsetd.events.models import RecordRef, SourceRecord
from offsetd.kube.api import KubeApi
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.offsets.backend import BackendRequest, StepwiseBackend
from offsetd.offsets.registry import stepwise_backend_for
from offsetd.offsets.snapshots.files import FileSnapshotStore
from offsetd.offsets.strimzi.backend import strimzi_site
from offsetd.offsets.strimzi.site import StrimziSite
from offsetd.remediation.kube_events.publisher import KubeEvents
from tests.integration.cliutil import offsetd, offsetd_json
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    json_file_sink,
    produce,
    string_file_source,
    unique,
    wait_for,
)
from tests.integration.strimzi_env import MM2_RESOURCE, StrimziNamespace, wait_state

pytestmark = pytest.mark.timeout(300)

Factory = Callable[..., StrimziNamespace]
LINES = 20


def _lines(count: int) -> str:
    """Lines of exactly 10 bytes, so FileStreamSource position 10 * k is the start of line k+1."""
    return "".join(f"rec-{i:05d}\n" for i in range(1, count + 1))


def _file_source(
    ns: StrimziNamespace, west: str, tmp_path: Path, connect: ConnectClient
) -> tuple[str, str]:
    name, topic = unique("fs-src").lower(), unique("fs-src-out")
    create_topic(west, topic)
    source = tmp_path / f"{name}.txt"
    source.write_text(_lines(LINES))
    ns.connector(name, string_file_source(source, topic))
    connect.wait_running(name)
    _wait_count(west, topic, LINES)
    wait_for(
        "the source's offsets committed",
        lambda: (
            connect.offsets(name)["offsets"]
            and connect.offsets(name)["offsets"][0]["offset"]["position"] == 10 * LINES
        ),
        30,
    )
    return name, topic


def _values(west: str, topic: str) -> list[str]:
    return [m.value().decode() for m in consume_all(west, topic)]  # type: ignore[union-attr]


def _wait_count(west: str, topic: str, count: int) -> list[str]:
    def probe() -> list[str] | None:
        values = _values(west, topic)
        return values if len(values) >= count else None

    return wait_for(f"{count} records in {topic}", probe, 60)


def _request(ns: StrimziNamespace) -> BackendRequest:
    settings = load_settings(ns.config, {})
    cluster = settings.connect_clusters["local"]
    return BackendRequest.for_cluster(
        "local",
        cluster,
        OffsetdConnectClient.for_cluster(cluster),
        FileSnapshotStore(ns.log.parent / "snapshots"),
        settings=settings,
    )


def _backend(ns: StrimziNamespace) -> StepwiseBackend:
    backend = stepwise_backend_for(_request(ns))
    assert backend.name == "strimzi"
    return backend


def _site(ns: StrimziNamespace) -> StrimziSite:
    """The cluster's resources as the `strimzi` backend drives them, for a step of its own."""
    request = _request(ns)
    assert request.strimzi is not None
    return strimzi_site(request, request.strimzi)


def test_a_rest_stop_is_resumed_by_the_operator_but_offsetds_stop_holds(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient, stack: StackInfo
) -> None:
    ns = strimzi_ns(interval_s=2.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)

    # The REST way: Strimzi's next reconcile drives the connector back to spec.state.
    assert connect.http.put(connect.path(name, "/stop")).status_code == 204
    # The operator's own record that it found the connector STOPPED: a poll of REST can miss
    # a STOPPED that lasts less than its interval (the reconcile runs every 2 s).
    wait_for(
        "the operator to find it STOPPED",
        lambda: f"{name} is STOPPED, its resource says RUNNING" in ns.standin_log(),
        timeout_s=30,
    )
    connect.wait_running(name, timeout_s=15)

    # offsetd's way: spec.state, which every reconcile keeps — here through the client the
    # daemon's actions get on such a cluster (its stop/resume are the stop/resume actions).
    backend = _backend(ns)
    client = backend.client

    async def stop_hold_resume() -> list[str]:
        await client.stop(name)
        wait_state(connect, name, "STOPPED", 20)
        seen = []
        for _ in range(4):  # two reconciles' worth
            await asyncio.sleep(1.5)
            seen.append(connect.status(name)["connector"]["state"])  # type: ignore[index]
        assert ns.get("KafkaConnector", name)["spec"]["state"] == "stopped"
        await client.resume(name)
        return seen

    assert set(asyncio.run(stop_hold_resume())) == {"STOPPED"}
    connect.wait_running(name, timeout_s=20)
    assert "state" not in ns.get("KafkaConnector", name)["spec"]  # absent, as it was


def test_list_alter_and_reset_go_through_the_resources_at_the_default_interval(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    """Strimzi's default 120 s full reconcile: the operator acts on resource events, so each
    step takes seconds; the records are re-read exactly from the new position."""
    ns = strimzi_ns(interval_s=120.0)
    name, topic = _file_source(ns, west, tmp_path, connect)

    listed = offsetd_json(ns.config, "offsets", "list", name)
    assert json.dumps(listed).count('"position": 200') == 1, listed
    written = ns.configmap(f"{name}-offsetd-list-offsets")
    assert written is not None
    assert json.loads(written["offsets.json"])["offsets"][0]["offset"] == {"position": 200}
    assert "strimzi.io/connector-offsets" not in (
        ns.get("KafkaConnector", name)["metadata"].get("annotations") or {}
    )

    doc = {"offsets": [{"partition": {"filename": str(tmp_path / f"{name}.txt")},
                        "offset": {"position": 10}}]}  # fmt: skip
    dry = offsetd(
        ns.config, "offsets", "alter", name, "--file", "-", "--dry-run", input=json.dumps(doc)
    )
    assert dry.exit_code == 0, dry.output + dry.stderr
    assert "set spec.state: stopped" in dry.stdout
    assert f"write ConfigMap {ns.namespace}/{name}-offsetd-alter-offsets" in dry.stdout
    assert '"position": 10' in dry.stdout  # the ConfigMap's content
    assert ns.configmap(f"{name}-offsetd-alter-offsets") is None  # nothing written
    assert "state" not in ns.get("KafkaConnector", name)["spec"]

    altered = offsetd(ns.config, "offsets", "alter", name, "--file", "-", input=json.dumps(doc))
    assert altered.exit_code == 0, altered.output + altered.stderr
    values = _wait_count(west, topic, 2 * LINES - 1)
    assert values[LINES:] == [f"rec-{i:05d}" for i in range(2, LINES + 1)]
    spec = ns.get("KafkaConnector", name)["spec"]
    assert "state" not in spec
    assert spec["alterOffsets"] == {"fromConfigMap": {"name": f"{name}-offsetd-alter-offsets"}}
    written = ns.configmap(f"{name}-offsetd-alter-offsets")
    assert written is not None
    assert json.loads(written["offsets.json"]) == doc

    reset = offsetd(ns.config, "offsets", "reset", name)
    assert reset.exit_code == 0, reset.output + reset.stderr
    values = _wait_count(west, topic, 3 * LINES - 1)
    assert values[2 * LINES - 1 :] == [f"rec-{i:05d}" for i in range(1, LINES + 1)]
    connect.wait_running(name)


def test_export_then_import_of_strimzis_configmap_is_identity(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    ns = strimzi_ns(interval_s=120.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    before = connect.offsets(name)
    exported = offsetd(
        ns.config, "offsets", "export", "--connectors", name, "--format", "strimzi-configmap"
    )
    assert exported.exit_code == 0, exported.output + exported.stderr
    imported = offsetd(
        ns.config, "offsets", "import", "-", "--connector", name, input=exported.stdout
    )
    assert imported.exit_code == 0, imported.output + imported.stderr
    assert connect.offsets(name) == before

    edited = exported.stdout.replace('"position": 200', '"position": 150')
    assert edited != exported.stdout
    imported = offsetd(ns.config, "offsets", "import", "-", "--connector", name, input=edited)
    assert imported.exit_code == 0, imported.output + imported.stderr
    assert connect.offsets(name)["offsets"][0]["offset"] == {"position": 150}


def test_mirrormaker2_source_set_to_last_replicated_4_replays_exactly_the_later_records(
    strimzi_ns: Factory, east: str, west: str, stack: StackInfo, connect: ConnectClient
) -> None:
    ns = strimzi_ns(interval_s=120.0)
    source = "east->west.MirrorSourceConnector"
    rest = connect.http.get(connect.path(source, "/config")).json()
    checkpoint = connect.http.get(
        connect.path("east->west.MirrorCheckpointConnector", "/config")
    ).json()
    topics = {
        "config": stack.connect["config.storage.topic"],
        "status": stack.connect["status.storage.topic"],
        "offset": stack.connect["offset.storage.topic"],
        "group": stack.connect["group.id"],
    }
    ns.apply(
        strimzi_resources.kafka_mirror_maker_2(
            MM2_RESOURCE,
            ns.version,
            source=("east", east),
            target=("west", west),
            target_topics=topics,
            source_config=rest,
            checkpoint_config=checkpoint,
        )
    )
    topic = unique("mm2-rewind")
    create_topic(east, topic)
    produce(east, topic, [(None, f"v{i}".encode()) for i in range(10)])
    mirrored = f"east.{topic}"
    wait_for(f"{mirrored} replicated", lambda: len(_values_safe(west, mirrored)) >= 10, 90)

    doc = {"offsets": [{"partition": {"cluster": "east", "topic": topic, "partition": 0},
                        "offset": {"offset": 4}}]}  # fmt: skip
    altered = offsetd(ns.config, "offsets", "alter", source, "--file", "-", input=json.dumps(doc))
    assert altered.exit_code == 0, altered.output + altered.stderr

    def replayed() -> list[str] | None:
        values = _values_safe(west, mirrored)
        return values if len(values) >= 15 else None

    values = wait_for("the replay", replayed, 90)
    assert values[10:] == [f"v{i}" for i in range(5, 10)]
    mirror = ns.get("KafkaMirrorMaker2", MM2_RESOURCE)["spec"]["mirrors"][0]
    assert "state" not in mirror["sourceConnector"]
    assert mirror["sourceConnector"]["alterOffsets"]["fromConfigMap"]["name"]
    connect.wait_running(source)
    _an_mm2_connectors_events_go_on_its_kafkamirrormaker2(ns, source)


def _held(connector: str, n: int) -> Decision:
    """The n-th decision of a DLQ storm: each names another record; the blast radius holds all."""
    record = RecordRef(topic="east.orders", partition=0, offset=n)
    source = SourceRecord(topic="dlq", partition=0, offset=n, timestamp_ms=1_800_000_000_000)
    return Decision(
        id=unique(f"held{n}"),
        rule="poison-record-skip",
        mode="enforce",
        connect_cluster="local",
        connector=connector,
        task_id=0,
        key=f"connector={connector},record={n}",
        actions=(PlannedAction(type="skip-record", params={}),),
        record=record,
        record_status="exact",
        outcome="planned",
        reason=None,
        detail=None,
        event_time_ms=source.timestamp_ms,
        decided_at_ms=source.timestamp_ms,
        inputs=DecisionInputs(
            events=(source,), trigger=EventSummary(kind="dlq_record", task_id=0, record=record)
        ),
    )


def _an_mm2_connectors_events_go_on_its_kafkamirrormaker2(
    ns: StrimziNamespace, connector: str
) -> None:
    """The daemon's Event writer, with offsetd's token (the shipped Role): an MM2 connector's
    Event regards its KafkaMirrorMaker2 at the connector's spec, and three holds of one cause
    are one Event counted three times."""
    settings = load_settings(ns.config)
    registry = CollectorRegistry()
    events = KubeEvents(
        dict(settings.connect_clusters), "test-worker", RemediationMetrics.create(registry)
    )

    async def storm() -> None:
        for n in range(3):
            events.publish(
                _held(connector, n),
                "suppressed_blast_radius",
                "12 connectors of local are failing",
                {"guard": "blast_radius"},
            )
        await events.close(30)

    asyncio.run(storm())
    found = [
        e
        for e in ns.admin.list(Event, namespace=ns.namespace)
        if e.regarding is not None and e.regarding.name == MM2_RESOURCE
    ]
    assert len(found) == 1, found
    [held] = found
    assert held.regarding is not None
    assert held.regarding.kind == "KafkaMirrorMaker2"
    assert held.regarding.fieldPath == "spec.mirrors[0].sourceConnector"
    assert (held.reason, held.type, held.action) == ("RemediationHeld", "Warning", "skip-record")
    assert held.series is not None
    assert held.series.count == 3
    assert "record east.orders/0@0" in (held.note or "")

    # Gone (the API server keeps Events an hour; here deleted): the series goes on in a new
    # Event created with its count, valid as events.k8s.io/v1 requires (count >= 2)
    assert held.metadata is not None
    assert held.metadata.name is not None
    ns.admin.delete(Event, held.metadata.name, namespace=ns.namespace)
    asyncio.run(storm())
    [again] = [
        e
        for e in ns.admin.list(Event, namespace=ns.namespace)
        if e.regarding is not None and e.regarding.name == MM2_RESOURCE
    ]
    assert again.series is not None
    assert again.series.count == 6
    failures = registry.get_sample_value(
        "offsetd_kube_event_failures_total", {"connect_cluster": "local"}
    )
    assert failures is None


def _values_safe(bootstrap: str, topic: str) -> list[str]:
    try:
        records = consume_all(bootstrap, topic, timeout_s=3)
        return [m.value().decode() for m in records]  # type: ignore[union-attr]
    except Exception:  # the topic may not exist yet
        return []


def test_the_v1beta2_api_of_strimzi_0_45_is_driven_the_same_way(
    strimzi_ns: Factory,
    kube_v1beta2: KubeCluster,
    west: str,
    tmp_path: Path,
    connect: ConnectClient,
) -> None:
    ns = strimzi_ns(kube=kube_v1beta2, interval_s=120.0)
    assert ns.version == "v1beta2"
    name, topic = _file_source(ns, west, tmp_path, connect)
    doc = {"offsets": [{"partition": {"filename": str(tmp_path / f"{name}.txt")},
                        "offset": {"position": 100}}]}  # fmt: skip
    altered = offsetd(ns.config, "offsets", "alter", name, "--file", "-", input=json.dumps(doc))
    assert altered.exit_code == 0, altered.output + altered.stderr
    values = _wait_count(west, topic, 2 * LINES - 10)
    assert values[LINES:] == [f"rec-{i:05d}" for i in range(11, LINES + 1)]
    assert ns.get("KafkaConnector", name)["apiVersion"] == "kafka.strimzi.io/v1beta2"


def test_a_gitops_owned_resource_is_refused_and_left_alone(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    ns = strimzi_ns(interval_s=120.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    ns.patch(
        "KafkaConnector", name, {"metadata": {"labels": {"argocd.argoproj.io/instance": "kafka"}}}
    )
    before = connect.offsets(name)
    refused = offsetd(ns.config, "offsets", "reset", name)
    assert refused.exit_code == 57, refused.output + refused.stderr
    assert "Argo CD (label argocd.argoproj.io/instance)" in refused.stderr
    assert "allow_gitops_managed" in refused.stderr
    assert connect.offsets(name) == before
    assert "state" not in ns.get("KafkaConnector", name)["spec"]
    connect.wait_running(name)


def test_a_missing_permission_names_the_verb_and_the_resource(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    ns = strimzi_ns(interval_s=120.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    read_only = ns.kube.grant(ns.namespace, verbs_without=("patch",))
    config = tmp_path / "read-only.yaml"
    config.write_text(ns.config.read_text().replace(str(ns.offsetd_kubeconfig), str(read_only)))
    refused = offsetd(config, "offsets", "reset", name)
    assert refused.exit_code == 56, refused.output + refused.stderr
    assert 'cannot patch resource "kafkaconnectors"' in refused.stderr
    assert "offsetd-role.yaml" in refused.stderr
    assert "token" not in refused.stderr.lower()
    connect.wait_running(name)


def test_an_offline_write_to_a_strimzi_managed_connector_is_refused_naming_the_resource(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    ns = strimzi_ns(interval_s=120.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    before = connect.offsets(name)
    refused = offsetd(ns.config, "offsets", "reset", name, "--offline", "--assume-workers-down")
    assert refused.exit_code == 11, refused.output + refused.stderr
    assert f"KafkaConnector {name} in namespace {ns.namespace}" in refused.stderr
    assert "without --offline" in refused.stderr
    assert connect.offsets(name) == before

    # A one-off with --connect-url: the flags give the Kubernetes access a config would.
    one_off = CliRunner().invoke(
        main,
        ["offsets", "reset", name, "--dry-run", "--connect-url", str(connect.http.base_url),
         "--strimzi-namespace", ns.namespace, "--kubeconfig", str(ns.offsetd_kubeconfig)],
    )  # fmt: skip
    assert one_off.exit_code == 0, one_off.output + one_off.stderr
    assert "is managed by Strimzi" in one_off.stderr
    assert "set spec.state: stopped" in one_off.stdout
    assert "strimzi.io/connector-offsets=reset" in one_off.stdout


def test_the_operators_refusal_and_restarts_and_config_go_through_the_resource(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    """What offsetd relies on from the operator, seen through offsetd's backend: an alter on a
    running connector is refused with a warning condition (and offsetd says so and takes its
    annotation back); a REST config change is put back, a spec.config change is applied;
    `strimzi.io/restart-task` restarts (a running task too: restart-tasks); `spec.autoRestart`
    makes restart rules stand down."""
    ns = strimzi_ns(interval_s=2.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    backend = _backend(ns)
    site = _site(ns)
    rest = _request(ns).client  # Connect's REST API alone

    async def scenario() -> None:
        found = await site.locate(name)
        assert found is not None
        with pytest.raises(ConnectorRejected, match="Connector is not in STOPPED state"):
            await site.operate(found, "alter")
        notes = ns.get("KafkaConnector", name)["metadata"].get("annotations") or {}
        assert "strimzi.io/connector-offsets" not in notes  # taken back: nothing retries it
        status = ns.get("KafkaConnector", name)
        assert status["status"]["observedGeneration"] == status["metadata"]["generation"]

        config = await rest.config(name)
        await rest.put_config(name, {**config, "batch.size": "7"})  # REST only
        wait_for(
            "the operator to put the REST change back",
            lambda: "batch.size" not in connect.http.get(connect.path(name, "/config")).json(),
            15,
        )
        await backend.put_config(name, {**config, "batch.size": "7"})  # through spec.config
        assert (await rest.config(name))["batch.size"] == "7"
        assert ns.get("KafkaConnector", name)["spec"]["config"]["batch.size"] == "7"
        await backend.put_config(name, config)
        assert await rest.config(name) == config

        # a stuck task's restart (restart-tasks): RUNNING, yet restarted through its resource
        restarted = await backend.restart_tasks(name, 0)
        assert [t.id for t in restarted.tasks] == [0]
        notes = ns.get("KafkaConnector", name)["metadata"].get("annotations") or {}
        assert "strimzi.io/restart-task" not in notes  # the operator acted on it
        whole = await backend.restart_tasks(name, None)  # the connector, then each task
        assert whole.name == name
        notes = ns.get("KafkaConnector", name)["metadata"].get("annotations") or {}
        assert not {"strimzi.io/restart", "strimzi.io/restart-task"} & set(notes)
        connect.wait_running(name)

        assert await backend.auto_restarted_by(name) is None
        ns.patch("KafkaConnector", name, {"spec": {"autoRestart": {"enabled": True}}})
        assert await backend.auto_restarted_by(name) == (
            f"Strimzi (spec.autoRestart of KafkaConnector {name})"
        )

    asyncio.run(scenario())
    connect.wait_running(name)


def test_a_sink_rewound_to_earliest_then_undone_through_the_resource(
    strimzi_ns: Factory, west: str, tmp_path: Path, connect: ConnectClient
) -> None:
    """The toolkit's targets and undo on a Strimzi-managed sink (a consumer-group connector)."""
    ns = strimzi_ns(interval_s=120.0)
    name, topic = unique("sz-sink").lower(), unique("sz-sink-in")
    create_topic(west, topic)
    produce(west, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(8)])
    out = tmp_path / "sink.txt"
    ns.connector(name, json_file_sink(topic, out))
    connect.wait_running(name)
    wait_for("8 lines", lambda: out.exists() and len(out.read_text().splitlines()) == 8, 60)
    wait_for(
        "the sink's committed offset",
        lambda: (o := connect.offsets(name)["offsets"]) and o[0]["offset"]["kafka_offset"] == 8,
        60,
    )

    rewound = offsetd_json(ns.config, "offsets", "alter", name, "--to-earliest")[0]
    wait_for("the replay", lambda: len(out.read_text().splitlines()) == 16, 60)
    wait_for(
        "the replayed offset committed",
        lambda: connect.offsets(name)["offsets"][0]["offset"]["kafka_offset"] == 8,
        60,
    )
    snapshot = rewound["snapshot_id"]
    undone = offsetd_json(ns.config, "offsets", "undo", snapshot, "--force")[0]
    assert undone["undo_of"] == snapshot
    assert connect.offsets(name)["offsets"][0]["offset"]["kafka_offset"] == 8
    assert "state" not in ns.get("KafkaConnector", name)["spec"]
    connect.wait_running(name)


def test_one_alter_locates_its_connector_once(
    strimzi_ns: Factory,
    west: str,
    tmp_path: Path,
    connect: ConnectClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One `offsets alter` asks the Kubernetes API for its resources: the KafkaConnect once,
    the KafkaConnector once (at plan time, then carried through every step), and once per poll
    while the operator acts on an annotation (the write, the read-back). Before the resource
    was carried, each step located it again: 1 list + 10 gets for this alter, 6 outside the
    polls; now 1 list + 5 gets, 1 outside them."""
    ns = strimzi_ns(interval_s=2.0)
    name, _topic = _file_source(ns, west, tmp_path, connect)
    reads: list[tuple[str, str, bool]] = []  # verb, kind, while waiting for the operator
    polling = [False]
    get, list_, wait = KubeApi.get, KubeApi.list, StrimziSite.await_operator

    async def counted_get(self: KubeApi, kind: Any, found: str) -> dict[str, Any]:
        reads.append(("get", kind, polling[0]))
        return await get(self, kind, found)

    async def counted_list(self: KubeApi, kind: Any) -> list[dict[str, Any]]:
        reads.append(("list", kind, polling[0]))
        return await list_(self, kind)

    async def marked_wait(self: StrimziSite, *args: Any) -> None:
        polling[0] = True
        try:
            await wait(self, *args)
        finally:
            polling[0] = False

    monkeypatch.setattr(KubeApi, "get", counted_get)
    monkeypatch.setattr(KubeApi, "list", counted_list)
    monkeypatch.setattr(StrimziSite, "await_operator", marked_wait)
    doc = {"offsets": [{"partition": {"filename": str(tmp_path / f"{name}.txt")},
                        "offset": {"position": 10}}]}  # fmt: skip
    altered = offsetd(ns.config, "offsets", "alter", name, "--file", "-", input=json.dumps(doc))
    assert altered.exit_code == 0, altered.output + altered.stderr
    print(f"kube reads for one alter: {len(reads)}: {reads}")
    assert [(verb, kind) for verb, kind, poll in reads if not poll] == [
        ("list", "KafkaConnect"),
        ("get", "KafkaConnector"),
    ]
    polls = [r for r in reads if r[2]]
    assert len(polls) >= 2  # the write's annotation and the read-back's, each at least once
    assert {(verb, kind) for verb, kind, _ in polls} == {("get", "KafkaConnector")}
