"""offsetd.offsets.operations against an in-memory fake of Connect's REST API.

The fake (an httpx.MockTransport handler) keeps each connector's state, tasks and offsets and
behaves like Connect where offsetd relies on it: PUT stop -> STOPPED (tasks may linger for a few
status polls), resume -> RUNNING with tasks, pause -> PAUSED (no tasks when it was STOPPED),
PATCH/DELETE offsets only when STOPPED (400 otherwise), PATCH merges and null removes.
"""

import asyncio
import contextlib
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import httpx
import pytest

from offsetd.connect.client import ConnectClient
from offsetd.errors import (
    ChangeIncomplete,
    ConnectBusy,
    ConnectorRejected,
    ConnectorStateRefused,
    ConnectUnavailable,
    NotStoppedInTime,
    OffsetdError,
    StrimziManaged,
    UndoConflict,
)
from offsetd.offsets.backend import BackendRequest, StepwiseBackend, Timeouts
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.documents import configmap_key, configmap_name
from offsetd.offsets.model import (
    MIRROR_SOURCE_CLASS,
    ConnectorKind,
    OffsetEntry,
    mirror_partition,
    partition_key,
    sink_partition,
)
from offsetd.offsets.registry import stepwise_backend_for
from offsetd.offsets.snapshots import FileSnapshotStore, Snapshot
from offsetd.retry import Backoff

T = TypeVar("T")

BASE = "http://connect.test:8083"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"
FRAMEWORK_ONLY = (
    "The Connect framework-managed offsets for this connector have been altered successfully. "
    "However, if this connector manages offsets externally, they will need to be manually "
    "altered in the system that the connector uses."
)
LINGERING = (
    "Failed to alter consumer group offsets for connector {name} either because its tasks "
    "haven't stopped completely yet or the connector was resumed before the request to alter "
    "its offsets could be successfully completed."
)
TRACE = "java.lang.IllegalStateException: poison record\n\tat com.example.Task.put(Task.java:42)"


# -- the fake Connect -----------------------------------------------------------------------------


@dataclass
class FakeConnector:
    name: str
    connector_class: str
    type: str
    state: str = "RUNNING"
    task_count: int = 1
    tasks: list[dict[str, Any]] = field(default_factory=list)
    offsets: dict[str, OffsetEntry] = field(default_factory=dict)
    # behaviour knobs
    stop_lingers: int = 0  # status polls after stop during which the old tasks are still shown
    resume_lag: int = 0  # status polls after resume with the connector RUNNING but no tasks yet
    fail_task_on_resume: bool = False
    patch_error: tuple[int, str] | None = None
    patch_message: str = ALTERED
    ignore_patch: bool = False  # answer 200 but change nothing (read-back mismatch)
    apply_then_error: bool = False  # apply the PATCH, then answer with patch_error anyway
    on_stop_commit: list[OffsetEntry] = field(default_factory=list)  # last commit while stopping
    patch_bodies: list[dict[str, Any]] = field(default_factory=list)  # every PATCH body received
    stale_reads: int = 0  # GETs of offsets after a write that still show the old offsets
    _stale: list[dict[str, Any]] = field(default_factory=list)
    _stale_left: int = 0
    _lingering: int = 0
    _lagging: int = 0
    _awaiting_tasks: bool = False

    def __post_init__(self) -> None:
        if not self.tasks and self.state in ("RUNNING", "PAUSED"):
            self.tasks = [self._task(i, self.state) for i in range(self.task_count)]

    def _task(self, i: int, state: str, trace: str | None = None) -> dict[str, Any]:
        task: dict[str, Any] = {"id": i, "state": state, "worker_id": "w1:8083"}
        if trace:
            task["trace"] = trace
        return task

    def set_offsets(self, entries: list[OffsetEntry]) -> None:
        self.offsets = {e.key: e for e in entries}

    def offsets_answer(self) -> list[dict[str, Any]]:
        """GET .../offsets: the offsets, or for `stale_reads` reads after a write the old ones."""
        if self._stale_left > 0:
            self._stale_left -= 1
            return self._stale
        return [e.as_json() for e in self.offsets.values()]

    def _written(self, before: list[dict[str, Any]]) -> None:
        self._stale, self._stale_left = before, self.stale_reads

    def image(self) -> dict[str, Any]:
        """Offsets as comparable data: partition key -> offset map."""
        return {k: e.offset for k, e in self.offsets.items()}

    # REST
    def status(self) -> dict[str, Any]:
        # `stop_lingers` / `resume_lag` polls show the old state of the tasks; the next is clean.
        if self._lingering > 0:
            self._lingering -= 1
        elif self.state == "STOPPED":
            self.tasks = []
        if self._lagging > 0:
            self._lagging -= 1
        elif self.state == "RUNNING" and self._awaiting_tasks:
            self._awaiting_tasks = False
            self._start_tasks()
        return {
            "name": self.name,
            "connector": {"state": self.state, "worker_id": "w1:8083"},
            "tasks": list(self.tasks),
            "type": self.type,
        }

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": {"connector.class": self.connector_class, "name": self.name},
            "tasks": [{"connector": self.name, "task": i} for i in range(len(self.tasks))],
            "type": self.type,
        }

    def stop(self) -> None:
        if self.state == "STOPPED":
            return
        self.state = "STOPPED"
        for entry in self.on_stop_commit:
            self.offsets[entry.key] = entry
        if self.stop_lingers:
            self._lingering = self.stop_lingers
        else:
            self.tasks = []

    def resume(self) -> None:
        self.state = "RUNNING"
        self._lingering = 0
        if self.resume_lag:
            self.tasks = []
            self._lagging = self.resume_lag
            self._awaiting_tasks = True
        else:
            self._start_tasks()

    def _start_tasks(self) -> None:
        self.tasks = [self._task(i, "RUNNING") for i in range(self.task_count)]
        if self.fail_task_on_resume:
            self.tasks[0] = self._task(0, "FAILED", TRACE)

    def pause(self) -> None:
        was = self.state
        self.state = "PAUSED"
        self.tasks = [] if was == "STOPPED" else [self._task(t["id"], "PAUSED") for t in self.tasks]

    def not_stopped(self) -> httpx.Response | None:
        if self.state != "STOPPED":
            message = (
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{self.name}/stop' endpoint"
            )
            return _error(400, message)
        if self.tasks and self.type == "sink":
            return _error(500, LINGERING.format(name=self.name))
        return None

    def patch(self, body: dict[str, Any]) -> httpx.Response:
        self.patch_bodies.append(body)
        refused = self.not_stopped()
        if refused is not None:
            return refused
        if not body.get("offsets"):
            return _error(
                400, "Partitions / offsets need to be provided for an alter offsets request"
            )
        if self.patch_error is not None and not self.apply_then_error:
            return _error(*self.patch_error)
        self._written([e.as_json() for e in self.offsets.values()])
        if not self.ignore_patch:
            for raw in body["offsets"]:
                entry = OffsetEntry(raw["partition"], raw["offset"])
                if entry.offset is None:
                    self.offsets.pop(entry.key, None)
                else:
                    self.offsets[entry.key] = entry
        if self.patch_error is not None:
            return _error(*self.patch_error)
        return httpx.Response(200, json={"message": self.patch_message})

    def delete(self) -> httpx.Response:
        refused = self.not_stopped()
        if refused is not None:
            return refused
        self._written([e.as_json() for e in self.offsets.values()])
        self.offsets = {}
        return httpx.Response(200, json={"message": RESET})


def _error(status: int, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error_code": status, "message": message})


class FakeConnect:
    def __init__(self, *connectors: FakeConnector, version: str = "3.9.0") -> None:
        self.connectors = {c.name: c for c in connectors}
        self.version = version
        self.requests: list[tuple[str, str]] = []  # (method, path with the name decoded)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        raw = request.url.raw_path.decode().split("?")[0]
        parts = raw.strip("/").split("/")
        method = request.method
        if parts == [""]:
            self.requests.append((method, "/"))
            return httpx.Response(200, json={"version": self.version, "commit": "x"})
        name = unquote(parts[1]) if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        self.requests.append((method, f"/connectors/{name}" + (f"/{sub}" if sub else "")))
        connector = self.connectors.get(name)
        if connector is None:
            return _error(404, f"Connector {name} not found")
        if (method, sub) == ("GET", ""):
            return httpx.Response(200, json=connector.info())
        if (method, sub) == ("GET", "status"):
            return httpx.Response(200, json=connector.status())
        if (method, sub) == ("GET", "offsets"):
            return httpx.Response(200, json={"offsets": connector.offsets_answer()})
        if (method, sub) == ("PUT", "stop"):
            connector.stop()
            return httpx.Response(204)
        if (method, sub) == ("PUT", "resume"):
            connector.resume()
            return httpx.Response(202)
        if (method, sub) == ("PUT", "pause"):
            connector.pause()
            return httpx.Response(202)
        if (method, sub) == ("PATCH", "offsets"):
            return connector.patch(json.loads(request.content))
        if (method, sub) == ("DELETE", "offsets"):
            return connector.delete()
        return _error(405, f"{method} {raw} is not supported by the fake")

    def changes(self) -> list[tuple[str, str]]:
        """Every request that is not a GET."""
        return [r for r in self.requests if r[0] != "GET"]


async def _instant(_seconds: float) -> None:
    return None


@dataclass
class Env:
    fake: FakeConnect
    service: StepwiseBackend
    store: FileSnapshotStore
    client: ConnectClient  # Connect's REST API, as the backend's parts read and write it

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        # The client is not closed between runs (MockTransport holds no connections).
        return asyncio.run(coro)

    def alter(self, name: str, patch: list[OffsetEntry]) -> Outcome:
        async def go() -> Outcome:
            return await self.service.apply(await self.service.plan_alter(name, patch))

        return self.run(go())

    def reset(self, name: str) -> Outcome:
        async def go() -> Outcome:
            return await self.service.apply(await self.service.plan_reset(name))

        return self.run(go())

    def undo(self, snapshot_id: str, *, force: bool = False) -> Outcome:
        async def go() -> Outcome:
            plan = await self.service.plan_undo(snapshot_id, force=force)
            return await self.service.apply(plan)

        return self.run(go())

    def only_snapshot(self, connector: str) -> Snapshot:
        snaps = self.store.list(connector=connector)
        assert len(snaps) == 1, snaps
        return snaps[0]


def make_env(
    tmp_path: Path,
    *connectors: FakeConnector,
    orchestrator: str = "none",
    timeouts: Timeouts | None = None,
    version: str = "3.9.0",
) -> Env:
    fake = FakeConnect(*connectors, version=version)
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake), base_url=BASE)
    client = ConnectClient(http, backoff=Backoff(attempts=3, first_s=0, max_s=0), sleep=_instant)
    store = FileSnapshotStore(tmp_path / "snapshots")
    service = stepwise_backend_for(
        BackendRequest(
            "local",
            orchestrator,
            client,
            store,
            timeouts=timeouts or Timeouts(stop_s=2.0, resume_s=2.0, poll_s=0, read_back_s=0.2),
        )
    )
    return Env(fake, service, store, client)


def sink_entry(partition: int, offset: int | None, topic: str = "orders") -> OffsetEntry:
    return OffsetEntry(
        sink_partition(topic, partition), None if offset is None else {"kafka_offset": offset}
    )


def mm2_entry(partition: int, offset: int | None) -> OffsetEntry:
    return OffsetEntry(
        mirror_partition("east", "orders", partition),
        None if offset is None else {"offset": offset},
    )


def sink_connector(name: str = "my-sink", state: str = "RUNNING", **kw: Any) -> FakeConnector:
    connector = FakeConnector(name, SINK_CLASS, "sink", state=state, **kw)
    connector.set_offsets([sink_entry(0, 10), sink_entry(1, 20)])
    return connector


def image(*entries: OffsetEntry) -> dict[str, Any]:
    return {e.key: e.offset for e in entries}


# -- the safe sequence ----------------------------------------------------------------------------


def test_running_connector_stop_patch_read_back_resume(tmp_path: Path) -> None:
    connector = sink_connector(stop_lingers=2, resume_lag=2)
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, 5), sink_entry(2, 7)])

    assert connector.image() == image(sink_entry(0, 5), sink_entry(1, 20), sink_entry(2, 7))
    assert connector.state == "RUNNING"
    assert [t["state"] for t in connector.tasks] == ["RUNNING"]
    assert outcome.final_state == "RUNNING"
    assert outcome.message == ALTERED
    assert outcome.warnings == ()
    assert image(*outcome.after) == connector.image()

    assert env.fake.changes() == [
        ("PUT", "/connectors/my-sink/stop"),
        ("PATCH", "/connectors/my-sink/offsets"),
        ("PUT", "/connectors/my-sink/resume"),
    ]
    # between PATCH and resume: the offsets were read back
    reqs = env.fake.requests
    patch_at = reqs.index(("PATCH", "/connectors/my-sink/offsets"))
    resume_at = reqs.index(("PUT", "/connectors/my-sink/resume"))
    assert ("GET", "/connectors/my-sink/offsets") in reqs[patch_at:resume_at]
    # it waited for the tasks to leave (2 lingering polls) and to come back (2 lagging polls)
    stop_at = reqs.index(("PUT", "/connectors/my-sink/stop"))
    assert reqs[stop_at:patch_at].count(("GET", "/connectors/my-sink/status")) >= 3
    assert reqs[resume_at:].count(("GET", "/connectors/my-sink/status")) >= 3

    snap = env.store.get(outcome.snapshot_id)
    assert snap.status == "applied"
    assert snap.operation == "alter"
    assert snap.connect_cluster == "local"
    assert image(*snap.before) == image(sink_entry(0, 10), sink_entry(1, 20))
    assert image(*snap.after) == connector.image()
    assert snap.message == ALTERED


def test_paused_connector_is_paused_again(tmp_path: Path) -> None:
    connector = sink_connector(state="PAUSED")
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(1, 0)])
    assert connector.state == "PAUSED"
    assert outcome.final_state == "PAUSED"
    assert connector.image() == image(sink_entry(0, 10), sink_entry(1, 0))
    assert env.fake.changes() == [
        ("PUT", "/connectors/my-sink/stop"),
        ("PATCH", "/connectors/my-sink/offsets"),
        ("PUT", "/connectors/my-sink/pause"),
    ]
    assert env.store.get(outcome.snapshot_id).status == "applied"


def test_stopped_connector_is_left_stopped(tmp_path: Path) -> None:
    connector = sink_connector(state="STOPPED")
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, None)])
    assert connector.state == "STOPPED"
    assert connector.tasks == []
    assert outcome.final_state == "STOPPED"
    assert connector.image() == image(sink_entry(1, 20))
    assert env.fake.changes() == [("PATCH", "/connectors/my-sink/offsets")]
    snap = env.store.get(outcome.snapshot_id)
    assert snap.status == "applied"
    assert image(*snap.after) == image(sink_entry(1, 20))


def test_reset_deletes_everything_and_resumes(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)
    outcome = env.reset("my-sink")
    assert connector.offsets == {}
    assert connector.state == "RUNNING"
    assert outcome.after == ()
    assert outcome.message == RESET
    assert env.fake.changes() == [
        ("PUT", "/connectors/my-sink/stop"),
        ("DELETE", "/connectors/my-sink/offsets"),
        ("PUT", "/connectors/my-sink/resume"),
    ]
    assert any("auto.offset.reset" in note for note in outcome.plan.notes)
    snap = env.store.get(outcome.snapshot_id)
    assert (snap.operation, snap.status, snap.after) == ("reset", "applied", ())
    assert image(*snap.before) == image(sink_entry(0, 10), sink_entry(1, 20))


def test_mirror_source_connector_with_arrow_in_name(tmp_path: Path) -> None:
    name = "east->west.MirrorSourceConnector"
    connector = FakeConnector(name, MIRROR_SOURCE_CLASS, "source", task_count=2)
    connector.set_offsets([mm2_entry(0, 41), mm2_entry(1, 7)])
    env = make_env(tmp_path, connector)
    outcome = env.alter(name, [mm2_entry(0, 9)])
    assert outcome.plan.kind is ConnectorKind.MIRROR_SOURCE
    assert any("N-1" in note for note in outcome.plan.notes)
    assert connector.image() == image(mm2_entry(0, 9), mm2_entry(1, 7))
    assert connector.state == "RUNNING"
    assert len(connector.tasks) == 2
    assert ("PATCH", f"/connectors/{name}/offsets") in env.fake.changes()


def test_plan_shows_diff_and_steps(tmp_path: Path) -> None:
    env = make_env(tmp_path, sink_connector())

    async def go() -> Plan:
        return await env.service.plan_alter("my-sink", [sink_entry(0, 5), sink_entry(3, 1)])

    plan = env.run(go())
    changes = {json.dumps(d.partition, sort_keys=True): str(d.change) for d in plan.diff}
    assert sorted(changes.values()) == ["added", "changed", "unchanged"]
    assert plan.steps()[-1].startswith("resume")
    assert plan.as_json()["state"] == "RUNNING"
    # planning changes nothing
    assert env.fake.changes() == []
    assert env.store.list_info() == []


def test_offsets_that_moved_while_stopping_become_the_undo_image(tmp_path: Path) -> None:
    # A running sink commits once more while it stops: the undo image is the one at rest.
    connector = sink_connector(on_stop_commit=[sink_entry(1, 25)])
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, 3)])
    snap = env.store.get(outcome.snapshot_id)
    assert image(*snap.before) == image(sink_entry(0, 10), sink_entry(1, 25))
    assert image(*outcome.plan.before) == image(sink_entry(0, 10), sink_entry(1, 25))
    assert connector.image() == image(sink_entry(0, 3), sink_entry(1, 25))


# -- refusals before anything is touched ----------------------------------------------------------


@pytest.mark.parametrize("state", ["FAILED", "UNASSIGNED", "RESTARTING"])
@pytest.mark.parametrize("operation", ["alter", "reset"])
def test_unhealthy_connector_is_refused_with_only_reads(
    tmp_path: Path, state: str, operation: str
) -> None:
    connector = sink_connector(state=state)
    connector.tasks = [{"id": 0, "state": "FAILED", "worker_id": "w", "trace": TRACE}]
    before = connector.image()
    env = make_env(tmp_path, connector)

    async def go() -> Plan:
        if operation == "alter":
            return await env.service.plan_alter("my-sink", [sink_entry(0, 1)])
        return await env.service.plan_reset("my-sink")

    with pytest.raises(ConnectorStateRefused) as info:
        env.run(go())
    assert state in str(info.value)
    assert "touched nothing" in str(info.value)
    assert env.fake.requests
    assert env.fake.changes() == []
    assert connector.state == state
    assert connector.image() == before
    assert env.store.list_info() == []


def test_connector_that_failed_after_planning_is_refused(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)

    async def go() -> Outcome:
        plan = await env.service.plan_alter("my-sink", [sink_entry(0, 1)])
        connector.state = "FAILED"
        return await env.service.apply(plan)

    with pytest.raises(ConnectorStateRefused, match="changed from RUNNING to FAILED"):
        env.run(go())
    assert env.fake.changes() == []
    assert env.store.list_info() == []


def test_strimzi_managed_cluster_is_refused_with_the_configmap(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector, orchestrator="strimzi")

    async def go() -> Outcome:
        return await env.service.apply(await env.service.plan_alter("my-sink", [sink_entry(0, 1)]))

    with pytest.raises(StrimziManaged) as info:
        env.run(go())
    text = str(info.value)
    assert "kind: ConfigMap" in text
    assert configmap_name("my-sink") in text
    assert f"{configmap_key('my-sink')}: |" in text
    assert "strimzi.io/connector-offsets=alter" in text
    assert "spec.state: stopped" in text
    assert '"kafka_offset": 1' in text
    assert env.fake.changes() == []
    assert env.store.list_info() == []
    assert connector.state == "RUNNING"


def test_strimzi_mm2_reset_names_the_mirrormaker_annotation(tmp_path: Path) -> None:
    name = "east->west.MirrorSourceConnector"
    connector = FakeConnector(name, MIRROR_SOURCE_CLASS, "source")
    connector.set_offsets([mm2_entry(0, 1)])
    env = make_env(tmp_path, connector, orchestrator="strimzi")

    async def go() -> Outcome:
        return await env.service.apply(await env.service.plan_reset(name))

    with pytest.raises(StrimziManaged) as info:
        env.run(go())
    assert "strimzi.io/connector-offsets=reset" in str(info.value)
    assert f"strimzi.io/mirrormaker-connector={name}" in str(info.value)
    assert env.fake.changes() == []


def test_too_old_connect_is_refused_before_any_change(tmp_path: Path) -> None:
    env = make_env(tmp_path, sink_connector(), version="3.5.1")

    async def go() -> Plan:
        return await env.service.plan_alter("my-sink", [sink_entry(0, 1)])

    with pytest.raises(OffsetdError, match=r"3\.6 or newer"):
        env.run(go())
    assert env.fake.changes() == []


# -- failures past the stop step ------------------------------------------------------------------


def test_rejected_patch_resumes_and_says_offsets_unchanged(tmp_path: Path) -> None:
    connect_says = "Failed to modify offsets for connector my-sink: partition 0 is invalid"
    connector = sink_connector(patch_error=(500, connect_says))
    before = connector.image()
    env = make_env(tmp_path, connector)
    with pytest.raises(ConnectorRejected) as info:
        env.alter("my-sink", [sink_entry(0, 5)])
    text = str(info.value)
    assert connect_says in text
    assert "put back to RUNNING" in text
    assert "offsets unchanged" in text
    assert connector.state == "RUNNING"
    assert connector.tasks
    assert connector.image() == before
    snap = env.only_snapshot("my-sink")
    assert snap.status == "failed"
    assert snap.id in text
    assert connect_says in snap.message
    assert env.fake.changes()[-1] == ("PUT", "/connectors/my-sink/resume")


def test_busy_patch_keeps_its_type_and_restores_paused(tmp_path: Path) -> None:
    connector = sink_connector(state="PAUSED", patch_error=(409, "rebalance in progress"))
    env = make_env(tmp_path, connector)
    with pytest.raises(ConnectBusy, match=r"put back to PAUSED.*offsets unchanged"):
        env.alter("my-sink", [sink_entry(0, 5)])
    assert connector.state == "PAUSED"
    patches = [r for r in env.fake.changes() if r[0] == "PATCH"]
    assert len(patches) == 3  # Backoff(attempts=3)
    assert env.only_snapshot("my-sink").status == "failed"


def test_patch_error_after_the_write_does_not_claim_offsets_unchanged(tmp_path: Path) -> None:
    connector = sink_connector(patch_error=(500, "Request timed out"), apply_then_error=True)
    env = make_env(tmp_path, connector)
    with pytest.raises(OffsetdError) as info:
        env.alter("my-sink", [sink_entry(0, 5)])
    assert connector.image()[sink_entry(0, 0).key] == {"kafka_offset": 5}  # it was written
    assert "offsets unchanged" not in str(info.value)


def test_empty_patch_does_not_touch_the_connector(tmp_path: Path) -> None:
    connector = FakeConnector("empty", SINK_CLASS, "sink")
    env = make_env(tmp_path, connector)
    with contextlib.suppress(OffsetdError):  # refusing before any change would be fine too
        env.alter("empty", [])
    assert env.fake.changes() == []


# -- partitions already at their target -----------------------------------------------------------


def _body(*entries: OffsetEntry) -> dict[str, Any]:
    return {"offsets": [e.as_json() for e in entries]}


def test_the_patch_carries_only_the_partitions_that_move(tmp_path: Path) -> None:
    connector = sink_connector()  # 0 at 10, 1 at 20
    env = make_env(tmp_path, connector)
    # 0: already there; 1: moves; 2: a removal of a partition that has no offset
    patch = [sink_entry(0, 10), sink_entry(1, 5), sink_entry(2, None)]

    async def go() -> Plan:
        return await env.service.plan_alter("my-sink", patch)

    plan = env.run(go())
    assert plan.writes == (sink_entry(1, 5),)
    assert plan.left_out == (sink_entry(0, 10), sink_entry(2, None))
    assert "PATCH 1 partition (2 already at their targets: left out)" in plan.steps()
    shown = plan.as_json()
    assert shown["patch"] == [sink_entry(1, 5).as_json()]
    assert shown["left_out"] == [sink_partition("orders", 0), sink_partition("orders", 2)]
    assert [d["change"] for d in shown["diff"]] == ["unchanged", "changed"]

    outcome = env.alter("my-sink", patch)
    assert connector.patch_bodies == [_body(sink_entry(1, 5))]
    assert connector.image() == image(sink_entry(0, 10), sink_entry(1, 5))
    assert outcome.final_state == "RUNNING"
    assert env.store.get(outcome.snapshot_id).status == "applied"


def test_mirror_source_offsets_compare_as_stored(tmp_path: Path) -> None:
    """MM2 stores the last replicated offset: the document's {"offset": 41} for a partition at
    41 is no change (no +1 anywhere), and a null for a partition it has no offset for is none."""
    name = "east->west.MirrorSourceConnector"
    connector = FakeConnector(name, MIRROR_SOURCE_CLASS, "source")
    connector.set_offsets([mm2_entry(0, 41), mm2_entry(1, 7)])
    env = make_env(tmp_path, connector)
    env.alter(name, [mm2_entry(0, 41), mm2_entry(1, 3), mm2_entry(2, None)])
    assert connector.patch_bodies == [_body(mm2_entry(1, 3))]


def test_everything_already_at_its_target_touches_nothing(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, 10), sink_entry(1, 20)])
    assert env.fake.changes() == []  # no stop, no PATCH, no resume
    assert connector.patch_bodies == []
    assert env.store.list_info() == []  # no snapshot of a change that is not one
    assert outcome.snapshot_id == ""
    assert outcome.message == "nothing to change: all 2 partitions are already at their targets"
    assert outcome.final_state == "RUNNING"
    assert image(*outcome.after) == connector.image()
    steps = outcome.plan.steps()
    assert steps == [
        "nothing to change: all 2 partitions are already at their targets: nothing is "
        "written, and my-sink stays RUNNING"
    ]
    assert outcome.as_json()["patch"] == []
    assert outcome.as_json()["snapshot_id"] is None


def test_a_partition_that_moves_while_stopping_is_written_after_all(tmp_path: Path) -> None:
    # Partition 0 is at its target when the plan is made, but the running sink commits 12 as it
    # stops: the document says 10, so 10 is written.
    connector = sink_connector(on_stop_commit=[sink_entry(0, 12)])
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, 10), sink_entry(1, 5)])
    assert outcome.plan.left_out == ()
    assert connector.patch_bodies == [_body(sink_entry(0, 10), sink_entry(1, 5))]
    assert connector.image() == image(sink_entry(0, 10), sink_entry(1, 5))


def test_a_connector_that_stops_at_the_targets_gets_no_patch(tmp_path: Path) -> None:
    # The last commit before the stop lands exactly on the target: Connect refuses an empty
    # PATCH, and there is nothing to write; the connector is read back and resumed.
    connector = sink_connector(on_stop_commit=[sink_entry(1, 25)])
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(1, 25)])
    assert connector.patch_bodies == []
    assert env.fake.changes() == [
        ("PUT", "/connectors/my-sink/stop"),
        ("PUT", "/connectors/my-sink/resume"),
    ]
    assert outcome.message == (
        "not written: the partition is already at the target once my-sink stopped"
    )
    assert outcome.final_state == "RUNNING"
    assert env.store.get(outcome.snapshot_id).status == "applied"


def test_read_back_mismatch_leaves_connector_stopped(tmp_path: Path) -> None:
    connector = sink_connector(ignore_patch=True)
    env = make_env(tmp_path, connector)
    with pytest.raises(ChangeIncomplete) as info:
        env.alter("my-sink", [sink_entry(0, 5)])
    snap = env.only_snapshot("my-sink")
    text = str(info.value)
    assert "left STOPPED" in text
    assert f"offsetd offsets undo {snap.id}" in text
    assert "should be" in text
    assert connector.state == "STOPPED"
    assert connector.tasks == []
    assert snap.status == "left-stopped"
    assert image(*snap.after) == connector.image()
    assert not any(r[1].endswith(("/resume", "/pause")) for r in env.fake.changes())


@pytest.mark.parametrize("operation", ["alter", "reset"])
def test_a_read_back_that_shows_the_old_offsets_for_a_moment_is_read_again(
    tmp_path: Path, operation: str
) -> None:
    """Connect acknowledges a write before every GET shows it (a source connector's worker
    re-reads its offsets topic): a difference that goes away is no failure."""
    connector = sink_connector(stale_reads=2)
    env = make_env(tmp_path, connector)
    if operation == "alter":
        outcome = env.alter("my-sink", [sink_entry(0, 5)])
        assert image(*env.store.get(outcome.snapshot_id).after) == connector.image()
    else:
        outcome = env.reset("my-sink")
        assert connector.offsets == {}
    assert outcome.final_state == "RUNNING"
    assert env.store.get(outcome.snapshot_id).status == "applied"
    reads = [r for r in env.fake.requests if r == ("GET", "/connectors/my-sink/offsets")]
    assert len(reads) >= 3  # the stale answers were read again


def test_reset_read_back_with_partitions_left(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)
    original_delete = connector.delete

    def half_delete() -> httpx.Response:
        kept = dict(list(connector.offsets.items())[:1])
        response = original_delete()
        connector.offsets = kept
        return response

    connector.delete = half_delete  # type: ignore[method-assign]
    with pytest.raises(ChangeIncomplete, match="1 partitions remain after the reset"):
        env.reset("my-sink")
    assert connector.state == "STOPPED"
    assert env.only_snapshot("my-sink").status == "left-stopped"


@pytest.mark.parametrize("prior", ["RUNNING", "PAUSED"])
def test_stop_timeout_puts_the_connector_back(tmp_path: Path, prior: str) -> None:
    connector = sink_connector(state=prior, stop_lingers=10**9)  # tasks never leave
    before = connector.image()
    env = make_env(tmp_path, connector, timeouts=Timeouts(stop_s=0.05, resume_s=2, poll_s=0))
    with pytest.raises(NotStoppedInTime) as info:
        env.alter("my-sink", [sink_entry(0, 5)])
    text = str(info.value)
    assert "did not reach STOPPED with no tasks" in text
    assert f"put back to {prior}" in text
    assert "offsets unchanged" in text
    assert connector.state == prior
    assert connector.image() == before
    assert not any(r[0] in ("PATCH", "DELETE") for r in env.fake.changes())
    assert env.only_snapshot("my-sink").status == "failed"


def test_task_failing_after_resume_is_reported(tmp_path: Path) -> None:
    connector = sink_connector(fail_task_on_resume=True)
    env = make_env(tmp_path, connector)
    with pytest.raises(ChangeIncomplete) as info:
        env.alter("my-sink", [sink_entry(0, 5)])
    snap = env.only_snapshot("my-sink")
    text = str(info.value)
    assert "task 0 FAILED" in text
    assert "poison record" in text
    assert "were changed" in text
    assert f"offsetd offsets undo {snap.id}" in text
    assert snap.status == "restore-failed"
    assert connector.image()[sink_entry(0, 0).key] == {"kafka_offset": 5}


def test_resume_timeout_is_change_incomplete(tmp_path: Path) -> None:
    connector = sink_connector(resume_lag=10**9)  # tasks never come back
    env = make_env(tmp_path, connector, timeouts=Timeouts(stop_s=2, resume_s=0.05, poll_s=0))
    with pytest.raises(ChangeIncomplete, match="not all RUNNING within"):
        env.alter("my-sink", [sink_entry(0, 5)])
    assert env.only_snapshot("my-sink").status == "restore-failed"


def test_framework_only_message_is_a_warning(tmp_path: Path) -> None:
    connector = sink_connector(patch_message=FRAMEWORK_ONLY)
    env = make_env(tmp_path, connector)
    outcome = env.alter("my-sink", [sink_entry(0, 5)])
    assert len(outcome.warnings) == 1
    assert "framework-managed" in outcome.warnings[0]
    assert "my-sink" in outcome.warnings[0]
    assert SINK_CLASS in outcome.warnings[0]
    assert outcome.as_json()["warnings"] == list(outcome.warnings)
    assert outcome.final_state == "RUNNING"


# -- undo -----------------------------------------------------------------------------------------


def test_undo_restores_the_before_image_exactly(tmp_path: Path) -> None:
    connector = sink_connector()
    original = connector.image()
    env = make_env(tmp_path, connector)
    change = env.alter("my-sink", [sink_entry(0, 99), sink_entry(5, 1), sink_entry(1, None)])
    assert connector.image() == image(sink_entry(0, 99), sink_entry(5, 1))

    undone = env.undo(change.snapshot_id)
    assert connector.image() == original  # partition 5, added by the change, is gone again
    assert connector.state == "RUNNING"
    assert undone.plan.operation == "undo"
    assert undone.plan.undo_of == change.snapshot_id
    snap = env.store.get(undone.snapshot_id)
    assert snap.undo_of == change.snapshot_id
    assert snap.status == "applied"
    assert image(*snap.after) == original


def test_undo_of_a_reset(tmp_path: Path) -> None:
    connector = sink_connector(state="STOPPED")
    original = connector.image()
    env = make_env(tmp_path, connector)
    change = env.reset("my-sink")
    assert connector.offsets == {}
    env.undo(change.snapshot_id)
    assert connector.image() == original
    assert connector.state == "STOPPED"


def test_undo_conflict_shows_a_three_way_diff(tmp_path: Path) -> None:
    connector = sink_connector(state="STOPPED")
    env = make_env(tmp_path, connector)
    change = env.alter("my-sink", [sink_entry(0, 50)])
    connector.offsets[sink_entry(0, 0).key] = sink_entry(0, 77)  # the connector moved on
    changes_before = len(env.fake.changes())

    async def plan() -> Plan:
        return await env.service.plan_undo(change.snapshot_id, force=False)

    with pytest.raises(UndoConflict) as info:
        env.run(plan())
    text = str(info.value)
    assert change.snapshot_id in text
    assert "--force" in text
    assert "partition | before change | after change | now" in text
    moved = [line for line in text.splitlines() if "(moved)" in line]
    assert len(moved) == 1
    assert '"kafka_partition":0' in moved[0]
    assert "{'kafka_offset': 10} | {'kafka_offset': 50} | {'kafka_offset': 77}" in moved[0]
    assert len(env.fake.changes()) == changes_before
    assert connector.image()[sink_entry(0, 0).key] == {"kafka_offset": 77}


def test_undo_with_force_proceeds(tmp_path: Path) -> None:
    connector = sink_connector()
    original = connector.image()
    env = make_env(tmp_path, connector)
    change = env.alter("my-sink", [sink_entry(0, 50)])
    connector.offsets[sink_entry(0, 0).key] = sink_entry(0, 77)
    connector.offsets[sink_entry(9, 0).key] = sink_entry(9, 3)  # a new partition appeared
    env.undo(change.snapshot_id, force=True)
    assert connector.image() == original


def test_undo_refuses_a_snapshot_of_another_connect_cluster(tmp_path: Path) -> None:
    connector = sink_connector(state="STOPPED")
    env = make_env(tmp_path, connector)
    foreign = Snapshot(
        id="20260101T000000.000Z-abcdef",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        connect_cluster="other-cluster",
        connector="my-sink",
        operation="alter",
        status="applied",
        before=(sink_entry(0, 1), sink_entry(1, 2)),
        after=tuple(connector.offsets.values()),
    )
    env.store.put(foreign)

    async def plan() -> Plan:
        return await env.service.plan_undo(foreign.id, force=True)

    with pytest.raises(OffsetdError, match="other-cluster"):
        env.run(plan())


def test_partition_key_is_what_the_fake_uses() -> None:
    # sanity: the fake identifies partitions the way offsetd does (order-independent)
    a = OffsetEntry({"kafka_partition": 0, "kafka_topic": "orders"}, {"kafka_offset": 1})
    assert a.key == partition_key(sink_partition("orders", 0))


def test_undo_marks_the_original_change_undone(tmp_path: Path) -> None:
    env = make_env(tmp_path, sink_connector())
    change = env.alter("my-sink", [sink_entry(0, 42)])
    env.undo(change.snapshot_id)
    assert env.store.get(change.snapshot_id).status == "undone"


def test_undo_when_the_before_image_holds_already_touches_nothing(tmp_path: Path) -> None:
    # The connector moved back to where it was before the change (a reset re-consumed): undo
    # has nothing to write, so it does not stop the connector; the change is undone all the same.
    connector = sink_connector()
    env = make_env(tmp_path, connector)
    change = env.alter("my-sink", [sink_entry(0, 42)])
    connector.set_offsets([sink_entry(0, 10), sink_entry(1, 20)])
    before = len(env.fake.changes())
    outcome = env.undo(change.snapshot_id, force=True)
    assert env.fake.changes()[before:] == []
    assert outcome.snapshot_id == ""
    assert outcome.plan.undo_of == change.snapshot_id
    undone = env.store.get(change.snapshot_id)
    assert undone.status == "undone"
    assert "nothing was written" in undone.message


def test_undo_of_a_change_that_never_wrote_is_refused(tmp_path: Path) -> None:
    connector = sink_connector(patch_error=(500, "validation failed"))
    env = make_env(tmp_path, connector)
    with pytest.raises(ConnectorRejected):
        env.alter("my-sink", [sink_entry(0, 42)])
    failed = env.only_snapshot("my-sink")
    assert failed.status == "failed"
    with pytest.raises(UndoConflict, match="was not applied"):
        env.run(env.service.plan_undo(failed.id, force=False))


def test_a_failure_while_stopping_puts_the_connector_back(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)
    original = connector.image()

    async def go() -> None:
        plan = await env.service.plan_alter("my-sink", [sink_entry(0, 1)])
        real_offsets = env.client.offsets
        calls = {"n": 0}

        async def flaky(name: str) -> list[OffsetEntry]:
            calls["n"] += 1
            if calls["n"] == 1:  # the re-read right after STOPPED
                raise ConnectUnavailable("Connect at x did not answer (ReadTimeout)")
            return await real_offsets(name)

        env.client.offsets = flaky  # type: ignore[method-assign]
        await env.service.apply(plan)

    with pytest.raises(ConnectUnavailable, match="put back to RUNNING; offsets unchanged"):
        env.run(go())
    assert connector.state == "RUNNING"
    assert connector.image() == original
    assert env.only_snapshot("my-sink").status == "failed"


def test_a_read_back_failure_leaves_it_stopped_and_says_so(tmp_path: Path) -> None:
    connector = sink_connector()
    env = make_env(tmp_path, connector)

    async def go() -> None:
        plan = await env.service.plan_alter("my-sink", [sink_entry(0, 1)])
        real_offsets = env.client.offsets
        calls = {"n": 0}

        async def flaky(name: str) -> list[OffsetEntry]:
            calls["n"] += 1
            if calls["n"] == 2:  # the read-back after PATCH
                raise ConnectUnavailable("Connect at x did not answer (ReadTimeout)")
            return await real_offsets(name)

        env.client.offsets = flaky  # type: ignore[method-assign]
        await env.service.apply(plan)

    with pytest.raises(ChangeIncomplete, match="left STOPPED") as info:
        env.run(go())
    snap = env.only_snapshot("my-sink")
    assert snap.status == "left-stopped"
    assert snap.id in str(info.value)
    assert connector.state == "STOPPED"
