"""The skip-poison saga on a Strimzi-managed sink: through the KafkaConnector, crash or not.

The stand-in operator reconciles every 2 s during the whole saga, so a REST stop would be
resumed under it; offsetd stops through `spec.state`, writes the offsets through the
`alterOffsets` ConfigMap and annotation, and puts `spec.state` back exactly — also when the
process running the saga is killed (SIGKILL-equivalent exit through the test hooks) at a step
and a new one recovers it.

The plain run also reads back, with kubectl, the Kubernetes Events offsetd leaves on the
KafkaConnector (`offsetd.remediation.kube_events`): the skip's `RecordSkipped`, then two rewinds
refused because Argo CD owns the resource, one `RemediationFailed` Event counted twice.

About 2.5 minutes in one lane: each step waits for the stand-in operator's reconciles, and each
crash point is a real process killed and recovered.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.config import load_settings
from offsetd.connect.client import ConnectClient as OffsetdConnectClient
from offsetd.engine.decision import Decision, EventSummary, PlannedAction
from offsetd.offsets.backend import BackendRequest
from offsetd.offsets.registry import stepwise_backend_for
from offsetd.offsets.snapshots.files import FileSnapshotStore
from offsetd.offsets.strimzi.resources import PRIOR_STATES
from offsetd.remediation.faults import CRASH_EXIT_CODE
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.saga_runner import spawn
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_remediation import (
    Poisoned,
    assert_skipped_once,
    skip_decision,
    with_saga_sections,
)

pytestmark = pytest.mark.timeout(300)


def _poisoned_sink(ns: StrimziNamespace, connect: ConnectClient, west: str, tmp: Path) -> Poisoned:
    topic, name, dlq = unique("szpoison"), unique("szpoison-sink").lower(), unique("dlq")
    create_topic(west, topic)
    create_topic(west, dlq)
    before = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(3)]
    after = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(4, 7)]
    offsets = produce(west, topic, [*before, (b"bad", b"{not json"), *after])
    sink = tmp / f"{name}.txt"
    ns.connector(name, dlq_json_file_sink(topic, sink, dlq))

    def failed() -> bool:
        status = connect.status(name)
        return status is not None and [t["state"] for t in status["tasks"]] == ["FAILED"]

    wait_for(f"{name} to fail on the poison record", failed, timeout_s=60)
    return Poisoned(name, topic, offsets[3], sink, dlq)


def _config(ns: StrimziNamespace, tmp: Path) -> tuple[Path, dict[str, Any]]:
    data = with_saga_sections(YAML(typ="safe").load(ns.config.read_text()), tmp)
    path = tmp / "offsetd-skip.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path, data


def _resource_left_clean(ns: StrimziNamespace, name: str) -> None:
    doc = ns.get("KafkaConnector", name)
    assert "state" not in doc["spec"], doc["spec"]  # absent before, absent again
    notes = doc["metadata"].get("annotations") or {}
    for key in (PRIOR_STATES, "strimzi.io/connector-offsets", "strimzi.io/pause-reconciliation"):
        assert key not in notes, notes


# One crash after each step's action (the point where a half-done change is most likely);
# the plain run is the "no crash" case. The REST saga's tests cover every point of every step.
CASES = [None, "recheck", "quarantine", "snapshot", "stop", "patch", "resume", "verify"]


@pytest.mark.parametrize("step", CASES, ids=[c or "no-crash" for c in CASES])
def test_a_poison_record_in_a_strimzi_managed_sink_is_skipped_exactly_once(
    strimzi_ns: Any, connect: ConnectClient, west: str, tmp_path: Path, step: str | None
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=2.0)
    p = _poisoned_sink(ns, connect, west, tmp_path)
    config, data = _config(ns, tmp_path)
    decision = tmp_path / "decision.json"
    decision.write_text(skip_decision(p).model_dump_json())
    if step is None:
        done = spawn(config, "run", str(decision))
        assert done.returncode == 0, done.stderr[-3000:]
    else:
        crashed = spawn(config, "run", str(decision), fault=f"crash:{step}:after-action")
        assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr[-3000:]
        recovered = spawn(config, "recover")
        assert recovered.returncode == 0, recovered.stderr[-3000:]
    assert_skipped_once(connect, west, data, p)
    _resource_left_clean(ns, p.name)
    alter = ns.configmap(f"{p.name}-offsetd-alter-offsets")
    assert alter is not None, "the offsets went through Strimzi's alterOffsets ConfigMap"
    written = json.loads(alter["offsets.json"])["offsets"]
    assert written[0]["offset"] == {"kafka_offset": p.poison + 1}
    if step is None:
        _the_events_tell_kubectl_what_offsetd_did(ns, p, config, decision, tmp_path)


def _kubectl(ns: StrimziNamespace, *args: str) -> str:
    tool = shutil.which("kubectl")
    assert tool, "kubectl reads the Events back"
    done = subprocess.run(
        [tool, f"--kubeconfig={ns.kube.info().admin_kubeconfig}", "-n", ns.namespace, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _offsetds_events(ns: StrimziNamespace, name: str) -> list[dict[str, Any]]:
    """The namespace's Events about KafkaConnector `name` written by offsetd, as events.k8s.io/v1
    (`regarding`, `note`, `series`), read back with kubectl and the admin's kubeconfig."""
    found = json.loads(_kubectl(ns, "get", "events.v1.events.k8s.io", "-o", "json"))["items"]
    return sorted(
        (
            e
            for e in found
            if e.get("regarding", {}).get("name") == name
            and e.get("reportingController") == "offsetd.io/remediation"
        ),
        key=lambda e: str(e["eventTime"]),
    )


def _rewind_decision(p: Poisoned, n: int) -> Decision:
    """A rewind of the sink to its start (not caused by a failure: no breaker involved)."""
    skip = skip_decision(p)
    return skip.model_copy(
        update={
            "id": unique(f"rewind{n}"),
            "rule": "rewind-after-incident",
            "key": f"connector={p.name},rewind={n}",
            "actions": (PlannedAction(type="rewind", params={"to_timestamp_ms": 0}),),
            "record": None,
            "record_status": None,
            "inputs": skip.inputs.model_copy(
                update={"trigger": EventSummary(kind="task_status", state="RUNNING")}
            ),
        }
    )


def _the_events_tell_kubectl_what_offsetd_did(
    ns: StrimziNamespace, p: Poisoned, config: Path, skip_file: Path, tmp: Path
) -> None:
    skip = Decision.model_validate_json(skip_file.read_text())
    uid = ns.get("KafkaConnector", p.name)["metadata"]["uid"]
    [skipped] = _offsetds_events(ns, p.name)
    assert (skipped["reason"], skipped["type"], skipped["action"]) == (
        "RecordSkipped",
        "Normal",
        "skip-record",
    )
    assert f"record {p.topic}/0@{p.poison}" in skipped["note"]
    assert f"offsetd history --incident {skip.id}" in skipped["note"]
    assert skipped["regarding"]["uid"] == uid
    assert skipped["regarding"]["kind"] == "KafkaConnector"
    assert skipped["reportingInstance"]
    assert "series" not in skipped

    # Argo CD now owns the resource: each rewind is aborted before anything moves, and the
    # two failures of one cause are one Event counted twice (not two Events).
    ns.patch(
        "KafkaConnector", p.name, {"metadata": {"labels": {"argocd.argoproj.io/instance": "kafka"}}}
    )
    files = []
    for n in (1, 2):
        files.append(tmp / f"rewind{n}.json")
        files[-1].write_text(_rewind_decision(p, n).model_dump_json())
    done = spawn(config, "run", *map(str, files))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])["outcomes"] == ["aborted", "aborted"]
    events = _offsetds_events(ns, p.name)
    assert [e["reason"] for e in events] == ["RecordSkipped", "RemediationFailed"], events
    failed = events[1]
    assert (failed["type"], failed["action"], failed["series"]["count"]) == ("Warning", "rewind", 2)
    assert "Argo CD" in failed["note"]
    assert "rewind1" in failed["note"]
    assert failed["metadata"]["annotations"]["offsetd.io/last-decision"].startswith("rewind2")

    # kubectl describe shows them (core/v1 view: `involvedObject` selected by the uid)
    described = _kubectl(ns, "describe", "kafkaconnector", p.name)
    assert "RecordSkipped" in described, described
    assert "RemediationFailed" in described, described
    assert "(x2 over" in described, described
    token = json.loads(ns.offsetd_kubeconfig.read_text())["users"][0]["user"]["token"]
    assert token not in json.dumps(events)


def test_a_failed_task_is_restarted_through_strimzi_io_restart_task(
    strimzi_ns: Any, connect: ConnectClient, west: str, tmp_path: Path
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=120.0)
    p = _poisoned_sink(ns, connect, west, tmp_path)
    config, _data = _config(ns, tmp_path)
    settings = load_settings(config, {})
    cluster = settings.connect_clusters["local"]
    backend = stepwise_backend_for(
        BackendRequest.for_cluster(
            "local",
            cluster,
            OffsetdConnectClient.for_cluster(cluster),
            FileSnapshotStore(tmp_path / "snapshots"),
            settings=settings,
        )
    )
    assert backend.name == "strimzi"
    assert len(consume_all(west, p.dlq)) == 1  # the one failed run so far
    answer = asyncio.run(backend.restart_failed(p.name))
    assert [t.state for t in answer.tasks] == ["RESTARTING"]
    assert "strimzi.io/restart-task" not in (
        ns.get("KafkaConnector", p.name)["metadata"].get("annotations") or {}
    )
    # The task ran again and failed again on the same poison record: a real restart, seen as
    # a second copy of the record in the DLQ.
    wait_for("a second DLQ copy after the restart", lambda: len(consume_all(west, p.dlq)) >= 2, 60)
