"""Locating a poison record on the real stack: what the committed offset says, and what it doesn't.

The recipe of test_connect_facts: a 1-partition topic, one FileStreamSink task (StringConverter
key, schemaless JsonConverter value, `errors.tolerance=none`, no DLQ), five good records
committed first, then one produce call holding the next records, so that they share one producer
batch and reach the task in one poll. After the failure the group's committed offset C is the
start of that batch; locating must still name the poison record N exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from offsetd.config import Settings, load_settings
from offsetd.connect.client import ConnectClient as OffsetdConnect
from offsetd.devstack import connect as devconnect
from offsetd.devstack.stack import StackInfo
from offsetd.engine.decision import Decision
from offsetd.events.models import RecordRef
from offsetd.recordchecks import NotJson, ValueMatches
from offsetd.remediation.locate import (
    MAX_POLL_RECORDS_KEY,
    Located,
    LocateResult,
    NotLocated,
    locate,
)
from offsetd.remediation.status_trail import StatusTrail
from tests.integration.extra_worker import extra_worker
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

POISON = b"not json{"
POLICY_NONE_REFUSAL = (
    "The 'None' policy does not allow 'max.poll.records' to be overridden in the connector "
    "configuration."
)


def _good(start: int, n: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(start, start + n)]


def decision_for(connector: str, record: RecordRef | None = None) -> Decision:
    """A planned skip decision as the engine makes it (the DLQ named the record, or not)."""
    return Decision.model_validate(
        {
            "id": unique("decision"),
            "rule": "poison-record-skip",
            "mode": "enforce",
            "connect_cluster": "local",
            "connector": connector,
            "task_id": 0,
            "key": f"connector={connector}",
            "actions": [{"type": "skip-record", "params": {}}],
            "record": record,
            "record_status": "exact" if record is not None else "to_locate",
            "outcome": "planned",
            "reason": None,
            "detail": None,
            "event_time_ms": 0,
            "decided_at_ms": 0,
            "inputs": {"events": [], "trigger": {"kind": "task_status", "state": "FAILED"}},
        }
    )


def _committed(connect: ConnectClient, name: str) -> int | None:
    entries = connect.offsets(name)["offsets"]
    return entries[0]["offset"]["kafka_offset"] if entries else None


def _task_failed(connect: ConnectClient, name: str) -> bool:
    status = connect.status(name)
    return bool(status and status["tasks"] and status["tasks"][0]["state"] == "FAILED")


def _config(connect: ConnectClient, name: str) -> dict[str, str]:
    response = connect.http.get(connect.path(name, "/config"))
    assert response.status_code == 200, response.text
    result: dict[str, str] = response.json()
    return result


def _locate(url: str, settings: Settings, decision: Decision, **kwargs: Any) -> LocateResult:
    async def run() -> LocateResult:
        async with OffsetdConnect(httpx.AsyncClient(base_url=url, timeout=95.0)) as client:
            return await locate(client, decision, settings, timeout_s=60, **kwargs)

    return asyncio.run(run())


@dataclasses.dataclass
class FailedSink:
    name: str
    topic: str
    out: Path
    poison: int
    committed: int  # C right after the first failure
    original: dict[str, str]


def _failed_sink(
    connect: ConnectClient,
    west: str,
    out: Path,
    before: int,
    after: int,
    extra: dict[str, str],
    *,
    overrides: bool = True,
) -> FailedSink:
    """Five good records committed, then `before` good ones, the poison, `after` good ones."""
    name, topic = unique("locate-sink"), unique("locate")
    create_topic(west, topic)
    assert produce(west, topic, _good(0, 5)) == [0, 1, 2, 3, 4]
    config = json_file_sink(topic, out, **{"errors.tolerance": "none", **extra})
    if not overrides:
        config = {k: v for k, v in config.items() if not k.startswith("consumer.override.")}
    connect.create(name, config)
    connect.wait_running(name)
    wait_for("the first five records committed", lambda: _committed(connect, name) == 5)
    batch = [*_good(5, before), (b"poison", POISON), *_good(5 + before + 1, after)]
    offsets = produce(west, topic, batch)  # one call: one producer batch, one poll
    wait_for(f"{name} FAILED", lambda: _task_failed(connect, name))
    return FailedSink(name, topic, out, offsets[before], _committed(connect, name) or -1, {})


@pytest.fixture(scope="module")
def settings(offsetd_yaml: Path) -> Settings:
    return load_settings(offsetd_yaml, environ={})


@pytest.fixture(scope="module")
def middle(
    connect: ConnectClient, west: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FailedSink]:
    out = tmp_path_factory.mktemp("locate") / "middle.out"
    sink = _failed_sink(connect, west, out, before=3, after=3, extra={})
    sink.original = _config(connect, sink.name)
    yield sink
    connect.delete(sink.name)


def test_the_committed_offset_is_the_batch_start_not_the_poison_record(middle: FailedSink) -> None:
    assert middle.poison == 8
    assert middle.committed == 5 < middle.poison
    # The three good records before the poison were never delivered to the sink.
    assert middle.out.read_text().splitlines() == [f"{{n={i}}}" for i in range(5)]


def test_check_at_the_batch_start_refuses_an_undelivered_prefix(
    middle: FailedSink, stack: StackInfo, settings: Settings
) -> None:
    result = _locate(
        stack.connect["url"],
        settings,
        decision_for(middle.name),
        check=NotJson(kind="not_json"),
        single_record_batches=False,
    )
    assert isinstance(result, NotLocated), result
    assert result.reason == "undelivered_prefix"
    assert "offset 8, after the committed offset 5" in result.detail


def test_single_record_batches_name_the_poison_record_in_the_middle_of_a_batch(
    middle: FailedSink, connect: ConnectClient, stack: StackInfo, settings: Settings
) -> None:
    overrides: list[str | None] = []

    async def on_override(original: str | None) -> None:
        overrides.append(original)

    started = time.monotonic()
    result = _locate(
        stack.connect["url"], settings, decision_for(middle.name), on_override=on_override
    )
    print(f"located in {time.monotonic() - started:.1f} s: {result}")
    assert isinstance(result, Located), result
    assert result.record == RecordRef(topic=middle.topic, partition=0, offset=middle.poison)
    assert result.how == "single_record_batches"
    assert overrides == [None]  # the sink had no max.poll.records override of its own
    # With one-record batches the records before the poison one were delivered, one by one,
    # and the committed offset is the poison record itself.
    assert _committed(connect, middle.name) == middle.poison
    assert middle.out.read_text().splitlines() == [f"{{n={i}}}" for i in range(8)]
    # The original config is back, exactly: the same keys and values.
    after = _config(connect, middle.name)
    assert after == middle.original
    assert MAX_POLL_RECORDS_KEY not in after
    # ...and the task is FAILED again on the poison record, now with the original batches.
    wait_for("the task FAILED again", lambda: _task_failed(connect, middle.name))
    assert _committed(connect, middle.name) == middle.poison


def test_check_names_the_record_at_the_committed_offset_once_it_is_the_poison_one(
    middle: FailedSink, stack: StackInfo, settings: Settings
) -> None:
    decision = decision_for(middle.name)
    url = stack.connect["url"]
    located = _locate(
        url, settings, decision, check=NotJson(kind="not_json"), single_record_batches=False
    )
    assert isinstance(located, Located), located
    assert (located.record.offset, located.how) == (middle.poison, "check")
    passed = _locate(
        url,
        settings,
        decision,
        check=ValueMatches(kind="value_matches", pattern="^never$"),
        single_record_batches=False,
    )
    assert isinstance(passed, NotLocated), passed
    assert passed.reason == "check_passed"


def test_single_record_batches_when_the_poison_record_starts_the_batch(
    connect: ConnectClient,
    west: str,
    stack: StackInfo,
    settings: Settings,
    tmp_path: Path,
) -> None:
    # The sink's own override (2) must come back too, not just be removed.
    sink = _failed_sink(connect, west, tmp_path / "first.out", 0, 3, {MAX_POLL_RECORDS_KEY: "2"})
    try:
        original = _config(connect, sink.name)
        assert sink.poison == sink.committed == 5
        result = _locate(stack.connect["url"], settings, decision_for(sink.name))
        assert isinstance(result, Located), result
        assert (result.record.offset, result.how) == (5, "single_record_batches")
        assert _config(connect, sink.name) == original
        assert original[MAX_POLL_RECORDS_KEY] == "2"
    finally:
        connect.delete(sink.name)


def _marked_trail(settings: Settings, connector: str) -> StatusTrail:
    """A status trail of `connector` on the stack's status topic, marked now."""
    local = settings.connect_clusters["local"]
    internal = settings.kafka_clusters[local.kafka_cluster].client_config()
    trail = StatusTrail(internal, local.status_topic, connector)
    trail.mark()
    return trail


def test_the_status_topic_shows_a_restart_that_failed_again(
    connect: ConnectClient, west: str, stack: StackInfo, settings: Settings, tmp_path: Path
) -> None:
    """RUNNING then FAILED after the mark, however fast: the evidence polling can miss."""
    sink = _failed_sink(connect, west, tmp_path / "trail.out", 0, 1, {})
    try:
        trail = _marked_trail(settings, sink.name)
        time.sleep(2)
        assert not trail.ran_and_failed(frozenset({0}))  # still FAILED, never restarted
        httpx.post(
            f"{stack.connect['url']}/connectors/{sink.name}/restart",
            params={"includeTasks": "true", "onlyFailed": "true"},
        ).raise_for_status()
        wait_for(
            "the trail to show RUNNING then FAILED", lambda: trail.ran_and_failed(frozenset({0}))
        )
        assert not trail.ran_and_failed(frozenset({1}))  # another task id: nothing seen
    finally:
        connect.delete(sink.name)


def test_a_config_change_alone_restarts_a_failed_task(
    connect: ConnectClient, west: str, stack: StackInfo, settings: Settings, tmp_path: Path
) -> None:
    """Connect restarts a connector's tasks for a new config by itself, FAILED ones included.

    That run can fail before locate's restart request, which then finds no FAILED task to
    restart: the reason locate marks the status topic before writing the one-record override
    (the CI flake `failure_did_not_repeat` with the poison record first in its batch).
    """
    sink = _failed_sink(connect, west, tmp_path / "config.out", 0, 1, {})
    try:
        trail = _marked_trail(settings, sink.name)
        config = {**_config(connect, sink.name), MAX_POLL_RECORDS_KEY: "1"}
        httpx.put(
            f"{stack.connect['url']}/connectors/{sink.name}/config", json=config, timeout=30
        ).raise_for_status()
        wait_for(
            "RUNNING then FAILED with no restart request",
            lambda: trail.ran_and_failed(frozenset({0})),
        )
    finally:
        connect.delete(sink.name)


def test_the_dlq_named_record_is_taken_as_is(stack: StackInfo, settings: Settings) -> None:
    ref = RecordRef(topic="orders", partition=3, offset=1200)
    result = _locate(stack.connect["url"], settings, decision_for("no-such-connector", ref))
    assert isinstance(result, Located)
    assert (result.record, result.how) == (ref, "dlq")


def test_a_mirror_source_connector_is_not_located(stack: StackInfo, settings: Settings) -> None:
    name = stack.mm2["connectors"][0]
    assert name.endswith("MirrorSourceConnector")
    result = _locate(stack.connect["url"], settings, decision_for(name))
    assert isinstance(result, NotLocated), result
    assert result.reason == "not_a_sink"


@dataclasses.dataclass(frozen=True)
class _NoOverrides(devconnect.WorkerGroup):
    def worker_properties(self, rest_port: int) -> dict[str, str | int]:
        props = super().worker_properties(rest_port)
        props["connector.client.config.override.policy"] = "None"
        return props


def test_a_worker_whose_policy_refuses_overrides_is_left_untouched(
    stack: StackInfo, settings: Settings, west: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Policy `None` (Connect's default before 3.0): validate names the refused key; nothing is
    written, and the answer is NotLocated override_not_allowed."""
    monkeypatch.setattr(devconnect, "WorkerGroup", _NoOverrides)
    with extra_worker(stack, tmp_path / "worker", prefix="locate") as worker:
        client = ConnectClient(worker.url)
        # No consumer.override.auto.offset.reset either: Connect's sink default is earliest.
        sink = _failed_sink(client, west, tmp_path / "none.out", 2, 2, {}, overrides=False)
        original = _config(client, sink.name)
        refused = client.http.put(
            client.path(sink.name, "/config"), json={**original, MAX_POLL_RECORDS_KEY: "1"}
        )
        assert refused.status_code == 400
        assert refused.json()["message"] == (
            "Connector configuration is invalid and contains the following 1 error(s):\n"
            f"{POLICY_NONE_REFUSAL}\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`"
        )
        result = _locate(worker.url, settings, decision_for(sink.name))
        assert isinstance(result, NotLocated), result
        assert result.reason == "override_not_allowed"
        assert POLICY_NONE_REFUSAL in result.detail
        assert _config(client, sink.name) == original
        assert _task_failed(client, sink.name)
        client.delete(sink.name)
