"""offsetd.connect.client against httpx.MockTransport: retries, error mapping, URL encoding."""

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX, ConnectClient, ConnectorState
from offsetd.errors import (
    ConnectAccessDenied,
    ConnectBusy,
    ConnectorNotFound,
    ConnectorRejected,
    ConnectTooOld,
    ConnectUnavailable,
    OffsetdError,
)
from offsetd.offsets.model import OffsetEntry
from offsetd.remediation.guards import count_failing
from offsetd.retry import Backoff

T = TypeVar("T")
Handler = Callable[[httpx.Request], httpx.Response]

BASE = "http://connect.test:8083"
LINGERING = (
    "Failed to alter consumer group offsets for connector my-sink either because its tasks "
    "haven't stopped completely yet or the connector was resumed before the request to alter "
    "its offsets could be successfully completed. If the connector is in a stopped state, this "
    "operation can be safely retried. If it doesn't eventually succeed, the Connect cluster may "
    "need to be restarted to get rid of the zombie sink tasks."
)
NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be "
    "done for the specified connector by issuing a 'PUT' request to the "
    "'/connectors/my-sink/stop' endpoint"
)
REBALANCE = (
    "Cannot complete request momentarily due to stale configuration (typically caused by a "
    "concurrent config change)"
)


class Recorder:
    """A MockTransport handler that records requests and answers from a script."""

    def __init__(self, *answers: httpx.Response | Exception | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return answer(request)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def client(self, backoff: Backoff | None = None) -> ConnectClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self), base_url=BASE)
        return ConnectClient(http, backoff=backoff or Backoff(attempts=4), sleep=self.sleep)

    @property
    def paths(self) -> list[str]:
        # raw_path: the path exactly as sent (percent-encoding kept), without the query
        return [f"{r.method} {r.url.raw_path.decode().split('?')[0]}" for r in self.requests]


def error(status: int, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error_code": status, "message": message})


def ok_message(
    message: str = "The offsets for this connector have been altered successfully",
) -> httpx.Response:
    return httpx.Response(200, json={"message": message})


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _closing(client: ConnectClient, coro: Coroutine[Any, Any, T]) -> T:
    async with client:
        return await coro


def call(rec: Recorder, what: Callable[[ConnectClient], Coroutine[Any, Any, T]], **kw: Any) -> T:
    client = rec.client(**kw)
    return run(_closing(client, what(client)))


ENTRIES = [
    OffsetEntry({"kafka_topic": "orders", "kafka_partition": 0}, {"kafka_offset": 5}),
    OffsetEntry({"kafka_topic": "orders", "kafka_partition": 1}, None),
]


# -- retries --------------------------------------------------------------------------------------


def test_409_is_retried_then_succeeds() -> None:
    rec = Recorder(error(409, REBALANCE), error(409, REBALANCE), ok_message())
    message = call(rec, lambda c: c.patch_offsets("my-sink", ENTRIES))
    assert message.startswith("The offsets for this connector")
    assert len(rec.requests) == 3
    assert rec.sleeps == [0.5, 1.0]
    for request in rec.requests:
        assert request.method == "PATCH"
        assert json.loads(request.content) == {
            "offsets": [
                {
                    "partition": {"kafka_topic": "orders", "kafka_partition": 0},
                    "offset": {"kafka_offset": 5},
                },
                {"partition": {"kafka_topic": "orders", "kafka_partition": 1}, "offset": None},
            ]
        }


def test_409_forever_is_connect_busy_after_the_configured_attempts() -> None:
    rec = Recorder(error(409, REBALANCE))
    backoff = Backoff(attempts=5, first_s=0.25, max_s=1.0)
    with pytest.raises(ConnectBusy) as info:
        call(rec, lambda c: c.stop("my-sink"), backoff=backoff)
    assert len(rec.requests) == 5
    assert rec.sleeps == [0.25, 0.5, 1.0, 1.0]
    assert "my-sink" in str(info.value)
    assert "409" in str(info.value)
    assert REBALANCE in str(info.value)


def test_single_attempt_never_sleeps() -> None:
    rec = Recorder(error(409, REBALANCE))
    with pytest.raises(ConnectBusy):
        call(rec, lambda c: c.offsets("x"), backoff=Backoff(attempts=1))
    assert len(rec.requests) == 1
    assert rec.sleeps == []


def test_lingering_sink_tasks_500_is_retried() -> None:
    rec = Recorder(error(500, LINGERING), ok_message("done"))
    assert call(rec, lambda c: c.patch_offsets("my-sink", ENTRIES)) == "done"
    assert len(rec.requests) == 2
    assert len(rec.sleeps) == 1


def test_rebalance_expected_500_is_retried() -> None:
    # Seen on the stack right after a connector's config was changed (RebalanceNeededException).
    rec = Recorder(
        error(500, "Request cannot be completed because a rebalance is expected"),
        ok_message("done"),
    )
    assert call(rec, lambda c: c.patch_offsets("my-sink", ENTRIES)) == "done"
    assert len(rec.requests) == 2


def test_lingering_sink_tasks_500_forever_is_busy() -> None:
    rec = Recorder(error(500, LINGERING))
    with pytest.raises(ConnectBusy, match="zombie sink tasks"):
        call(rec, lambda c: c.delete_offsets("my-sink"), backoff=Backoff(attempts=3))
    assert len(rec.requests) == 3


# -- error mapping --------------------------------------------------------------------------------


def test_other_500_on_patch_is_connector_rejected_with_connects_message() -> None:
    text = (
        "Failed to modify offsets for connector mm2 because it doesn't support external "
        "modification of offsets"
    )
    rec = Recorder(error(500, text))
    with pytest.raises(ConnectorRejected) as info:
        call(rec, lambda c: c.patch_offsets("mm2", ENTRIES))
    assert text in str(info.value)
    assert len(rec.requests) == 1  # not retried
    assert rec.sleeps == []


def test_500_on_delete_is_connector_rejected() -> None:
    rec = Recorder(error(500, "Request timed out"))
    with pytest.raises(ConnectorRejected, match="Request timed out"):
        call(rec, lambda c: c.delete_offsets("s"))


def test_500_on_a_read_is_a_plain_error() -> None:
    rec = Recorder(error(500, "boom"))
    with pytest.raises(OffsetdError) as info:
        call(rec, lambda c: c.status("s"))
    assert type(info.value) is OffsetdError
    assert "500" in str(info.value)
    assert "boom" in str(info.value)


def test_400_not_stopped_is_not_retried_and_carries_the_message() -> None:
    rec = Recorder(error(400, NOT_STOPPED))
    with pytest.raises(OffsetdError) as info:
        call(rec, lambda c: c.patch_offsets("my-sink", ENTRIES))
    assert not isinstance(info.value, ConnectorRejected | ConnectBusy)
    assert "STOPPED state" in str(info.value)
    assert len(rec.requests) == 1


@pytest.mark.parametrize(
    "method",
    [
        lambda c: c.info("my-sink"),
        lambda c: c.status("my-sink"),
        lambda c: c.offsets("my-sink"),
        lambda c: c.stop("my-sink"),
        lambda c: c.resume("my-sink"),
        lambda c: c.pause("my-sink"),
        lambda c: c.patch_offsets("my-sink", ENTRIES),
        lambda c: c.delete_offsets("my-sink"),
    ],
)
def test_404_is_connector_not_found_naming_it(
    method: Callable[[ConnectClient], Coroutine[Any, Any, Any]],
) -> None:
    rec = Recorder(error(404, "Connector my-sink not found"))
    with pytest.raises(ConnectorNotFound) as info:
        call(rec, method)
    assert "'my-sink'" in str(info.value)
    assert BASE in str(info.value)
    assert len(rec.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_access_denied_and_asked_once(status: int) -> None:
    rec = Recorder(httpx.Response(status, text="Unauthorized"))
    with pytest.raises(ConnectAccessDenied) as info:
        call(rec, lambda c: c.connector_names())
    assert info.value.status == status
    assert not info.value.retriable
    assert BASE in str(info.value)
    assert len(rec.requests) == 1


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("server hung up"),
    ],
)
def test_transport_errors_are_connect_unavailable(exc: Exception) -> None:
    rec = Recorder(exc)
    with pytest.raises(ConnectUnavailable) as info:
        call(rec, lambda c: c.offsets("s"))
    assert type(exc).__name__ in str(info.value)
    assert BASE in str(info.value)
    assert len(rec.requests) == 1


def test_non_json_error_body_is_quoted() -> None:
    rec = Recorder(httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(OffsetdError, match="502: <html>Bad Gateway</html>"):
        call(rec, lambda c: c.status("s"))


# -- version gate ---------------------------------------------------------------------------------


def version_answer(version: str) -> httpx.Response:
    return httpx.Response(200, json={"version": version, "commit": "abc", "kafka_cluster_id": "x"})


@pytest.mark.parametrize("version", ["3.5.1", "3.4.0", "2.8.2", "3.5.0-SNAPSHOT"])
def test_require_offsets_api_refuses_old_connect(version: str) -> None:
    rec = Recorder(version_answer(version))
    with pytest.raises(ConnectTooOld) as info:
        call(rec, lambda c: c.require_offsets_api())
    assert version.split("-", maxsplit=1)[0] in str(info.value)
    assert "3.6" in str(info.value)
    assert rec.paths == ["GET /"]


@pytest.mark.parametrize("version", ["3.6.0", "3.6.2", "3.9.0", "4.2.0", "3.7.0-SNAPSHOT"])
def test_require_offsets_api_accepts_new_connect(version: str) -> None:
    rec = Recorder(version_answer(version))
    call(rec, lambda c: c.require_offsets_api())
    assert rec.paths == ["GET /"]


def test_version_parsing() -> None:
    rec = Recorder(version_answer("3.6.1-rc2"))
    assert call(rec, lambda c: c.version()) == (3, 6, 1)


# -- URL encoding and bodies ----------------------------------------------------------------------

MM2 = "east->west.MirrorSourceConnector"
MM2_PATH = "/connectors/east-%3Ewest.MirrorSourceConnector"


def status_body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "connector": {"state": "RUNNING", "worker_id": "w:8083"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w:8083"}],
        "type": "source",
    }


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (lambda c: c.status(MM2), f"GET {MM2_PATH}/status"),
        (lambda c: c.offsets(MM2), f"GET {MM2_PATH}/offsets"),
        (lambda c: c.stop(MM2), f"PUT {MM2_PATH}/stop"),
        (lambda c: c.resume(MM2), f"PUT {MM2_PATH}/resume"),
        (lambda c: c.pause(MM2), f"PUT {MM2_PATH}/pause"),
        (lambda c: c.patch_offsets(MM2, []), f"PATCH {MM2_PATH}/offsets"),
        (lambda c: c.delete_offsets(MM2), f"DELETE {MM2_PATH}/offsets"),
        (lambda c: c.restart_failed(MM2), f"POST {MM2_PATH}/restart"),
    ],
)
def test_names_with_arrow_are_url_encoded(
    method: Callable[[ConnectClient], Coroutine[Any, Any, Any]], expected: str
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/status") or request.method == "POST":
            return httpx.Response(200, json=status_body(MM2))
        if request.url.path.endswith("/offsets") and request.method == "GET":
            return httpx.Response(200, json={"offsets": []})
        if request.method in ("PATCH", "DELETE"):
            return ok_message()
        return httpx.Response(204 if request.url.path.endswith("/stop") else 202)

    rec = Recorder(answer)
    call(rec, method)
    assert rec.paths == [expected]
    assert str(rec.requests[0].url).startswith(f"{BASE}{MM2_PATH}")


def test_slash_and_space_in_names_are_encoded() -> None:
    rec = Recorder(httpx.Response(200, json={"offsets": []}))
    call(rec, lambda c: c.offsets("a b/c?d"))
    assert rec.paths == ["GET /connectors/a%20b%2Fc%3Fd/offsets"]


def test_restart_failed_uses_include_tasks_and_only_failed() -> None:
    rec = Recorder(httpx.Response(202, json=status_body("s")))
    state = call(rec, lambda c: c.restart_failed("s"))
    assert rec.requests[0].url.params["includeTasks"] == "true"
    assert rec.requests[0].url.params["onlyFailed"] == "true"
    assert state.state == "RUNNING"


def test_reads_parse_connect_shapes() -> None:
    info_body = {
        "name": "s",
        "config": {"connector.class": "FileStreamSink", "topics": "t"},
        "tasks": [{"connector": "s", "task": 0}, {"connector": "s", "task": 1}],
        "type": "sink",
    }
    offsets_body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}
        ]
    }

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/connectors":
            return httpx.Response(200, json=["b", "a"])
        if path.endswith("/offsets"):
            return httpx.Response(200, json=offsets_body)
        return httpx.Response(200, json=info_body)

    rec = Recorder(answer)

    async def reads(c: ConnectClient) -> tuple[Any, ...]:
        return (await c.connector_names(), await c.info("s"), await c.offsets("s"))

    names, info, offsets = call(rec, reads)
    assert names == ["a", "b"]
    assert (info.connector_class, info.type, info.task_count) == ("FileStreamSink", "sink", 2)
    assert offsets == [OffsetEntry({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 3})]


def test_connector_state_helpers() -> None:
    failed = ConnectorState.from_json(
        {
            "name": "s",
            "connector": {"state": "RUNNING", "worker_id": "w"},
            "tasks": [
                {"id": 0, "state": "RUNNING", "worker_id": "w"},
                {
                    "id": 1,
                    "state": "FAILED",
                    "worker_id": "w",
                    "trace": "org.apache.kafka.connect.errors.ConnectException: boom\n\tat x",
                },
            ],
            "type": "sink",
        }
    )
    assert not failed.all_running()
    assert failed.failed_part() == (
        "task 1 FAILED: org.apache.kafka.connect.errors.ConnectException: boom"
    )
    stopped = ConnectorState.from_json(
        {"name": "s", "connector": {"state": "STOPPED", "worker_id": "w"}, "tasks": []}
    )
    assert stopped.failed_part() is None
    assert stopped.type == "unknown"
    running = ConnectorState.from_json(
        {"name": "s", "connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": []}
    )
    assert running.all_running(min_tasks=0)
    assert not running.all_running(min_tasks=1)


def test_framework_only_prefix_matches_connects_text() -> None:
    text = (
        "The Connect framework-managed offsets for this connector have been altered "
        "successfully. However, if this connector manages offsets externally, they will need "
        "to be manually altered in the system that the connector uses."
    )
    assert text.startswith(FRAMEWORK_ONLY_PREFIX)


def test_backoff_delays() -> None:
    assert list(Backoff(attempts=6, first_s=0.5, max_s=3.0).delays()) == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert list(Backoff(attempts=1).delays()) == []


def test_statuses_asks_for_status_only_and_feeds_the_failing_count() -> None:
    body = {
        "a": {"status": status_body("a")},
        "b": {"status": {**status_body("b"), "tasks": [{"id": 0, "state": "FAILED"}]}},
    }
    rec = Recorder(httpx.Response(200, json=body))
    answer = call(rec, lambda c: c.statuses())
    assert rec.requests[0].url.params.get_list("expand") == ["status"]
    assert count_failing(answer) == 1
