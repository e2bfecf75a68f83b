"""The fault-injecting proxy in front of the real Connect: forwards, injects exactly, retries."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from offsetd.connect.client import ConnectClient
from offsetd.devstack.faultproxy import (
    NO_ANSWER,
    REBALANCE_409,
    RETRIABLE_500,
    FaultProxy,
)
from offsetd.errors import ConnectUnavailable
from offsetd.offsets.model import entries_from_json
from offsetd.retry import Backoff
from tests.integration.kafkautil import (
    ConnectClient as RestClient,
)
from tests.integration.kafkautil import (
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

STALE = (
    "Cannot complete request momentarily due to stale configuration "
    "(typically caused by a concurrent config change)"
)


@pytest.fixture
def proxy(connect: RestClient) -> Iterator[FaultProxy]:
    with FaultProxy(str(connect.http.base_url)) as running:
        yield running


@pytest.fixture
def stopped_sink(connect: RestClient, west: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A FileStreamSink that consumed 5 records and is now STOPPED (offsets may be patched)."""
    topic, name = unique("fp-topic"), unique("fp-sink")
    create_topic(west, topic)
    produce(west, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(5)])
    connect.create(name, json_file_sink(topic, tmp_path / "out.txt"))
    connect.wait_running(name)
    wait_for(
        "the sink's offset",
        lambda: (e := connect.offsets(name)["offsets"]) and e[0]["offset"]["kafka_offset"] == 5,
    )
    assert connect.http.put(connect.path(name, "/stop")).status_code == 204

    def stopped() -> bool:
        status = connect.status(name)
        return (
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        )

    wait_for(f"{name} STOPPED", stopped)
    try:
        yield name, topic
    finally:
        connect.delete(name)


def _patch_body(topic: str, offset: int) -> dict[str, Any]:
    return {
        "offsets": [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": 0},
                "offset": {"kafka_offset": offset},
            }
        ]
    }


def test_forwards_get_put_patch_to_the_real_connect(
    proxy: FaultProxy, connect: RestClient, west: str, tmp_path: Path
) -> None:
    topic, name = unique("fp-fwd"), unique("fp-fwd")
    create_topic(west, topic)
    with httpx.Client(base_url=proxy.url, timeout=30) as http:
        root = http.get("/")
        assert root.status_code == 200
        assert "kafka_cluster_id" in root.json()
        created = http.put(f"/connectors/{name}/config", json=json_file_sink(topic, tmp_path / "o"))
        assert created.status_code == 201, created.text
        try:
            connect.wait_running(name)
            expanded = http.get("/connectors", params=[("expand", "status"), ("expand", "info")])
            assert expanded.status_code == 200
            assert expanded.json()[name]["info"]["config"]["topics"] == topic
            assert http.put(f"/connectors/{name}/stop").status_code == 204
            wait_for(
                f"{name} STOPPED",
                lambda: (connect.status(name) or {}).get("connector", {}).get("state") == "STOPPED",
            )
            patched = http.patch(f"/connectors/{name}/offsets", json=_patch_body(topic, 0))
            assert patched.status_code == 200, patched.text
            assert "altered successfully" in patched.json()["message"]
            # a real error from Connect passes through untouched
            missing = http.get("/connectors/no-such-connector-xyz/status")
            assert missing.status_code == 404
            assert missing.json()["error_code"] == 404
        finally:
            connect.delete(name)
    seen = [(c.method, c.path, c.status, c.fault) for c in proxy.calls]
    assert ("PUT", f"/connectors/{name}/config", 201, None) in seen
    assert ("PATCH", f"/connectors/{name}/offsets", 200, None) in seen
    assert ("GET", "/connectors", 200, None) in seen
    assert any(c.query == "expand=status&expand=info" for c in proxy.calls)


def test_injected_409_comes_back_exactly_once(
    proxy: FaultProxy, stopped_sink: tuple[str, str], connect: RestClient
) -> None:
    name, topic = stopped_sink
    proxy.inject("PATCH", r"^/connectors/[^/]+/offsets$", REBALANCE_409)
    with httpx.Client(base_url=proxy.url, timeout=30) as http:
        first = http.patch(f"/connectors/{name}/offsets", json=_patch_body(topic, 2))
        assert first.status_code == 409
        assert first.headers["content-type"] == "application/json"
        assert first.json() == {"error_code": 409, "message": STALE}
        assert connect.offsets(name)["offsets"][0]["offset"]["kafka_offset"] == 5  # untouched
        second = http.patch(f"/connectors/{name}/offsets", json=_patch_body(topic, 2))
        assert second.status_code == 200, second.text
    assert connect.offsets(name)["offsets"][0]["offset"]["kafka_offset"] == 2
    patches = [(c.status, c.fault) for c in proxy.calls if c.method == "PATCH"]
    assert patches == [(409, "rebalance_409"), (200, None)]


def test_offsetd_client_retries_409_and_lingering_500_through_the_proxy(
    proxy: FaultProxy, stopped_sink: tuple[str, str], connect: RestClient
) -> None:
    name, topic = stopped_sink
    proxy.inject("PATCH", r"/offsets$", REBALANCE_409)
    proxy.inject("PATCH", r"/offsets$", RETRIABLE_500)

    async def patch() -> str:
        client = ConnectClient(
            httpx.AsyncClient(base_url=proxy.url, timeout=30),
            backoff=Backoff(attempts=4, first_s=0.05, max_s=0.1),
        )
        async with client:
            entries = entries_from_json(_patch_body(topic, 3)["offsets"])
            return await client.patch_offsets(name, entries)

    message = asyncio.run(patch())
    assert "altered successfully" in message
    assert connect.offsets(name)["offsets"][0]["offset"]["kafka_offset"] == 3
    patches = [(c.status, c.fault) for c in proxy.calls if c.method == "PATCH"]
    assert patches == [(409, "rebalance_409"), (500, "retriable_500"), (200, None)]


def test_no_answer_holds_until_the_client_gives_up(
    proxy: FaultProxy, stopped_sink: tuple[str, str]
) -> None:
    name, _ = stopped_sink
    proxy.inject("GET", r"/status$", NO_ANSWER)

    async def status() -> None:
        async with ConnectClient(httpx.AsyncClient(base_url=proxy.url, timeout=1.0)) as client:
            await client.status(name)

    with pytest.raises(ConnectUnavailable, match="did not answer"):
        asyncio.run(status())
    # the fault was used up: the next request is forwarded
    assert httpx.get(f"{proxy.url}/connectors/{name}/status", timeout=10).status_code == 200


def test_request_is_forwarded_whole_with_basic_auth() -> None:
    """Connect on the stack has no auth, so a tiny recorder stands upstream for this one check."""
    seen: list[dict[str, Any]] = []

    class Recorder(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            """Quiet."""

        def do_PATCH(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": self.rfile.read(length),
                }
            )
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        upstream = f"http://127.0.0.1:{server.server_address[1]}"
        with FaultProxy(upstream) as proxy:
            response = httpx.patch(
                f"{proxy.url}/connectors/a%2Fb/offsets?x=1&y=2",
                content=b'{"offsets":[]}',
                auth=("connect-user", "pw"),
                timeout=10,
            )
            assert response.status_code == 200
            assert response.content == b"{}"
            assert all("pw" not in repr(call) for call in proxy.calls)
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [
        {
            "path": "/connectors/a%2Fb/offsets?x=1&y=2",
            "auth": "Basic " + base64.b64encode(b"connect-user:pw").decode(),
            "body": b'{"offsets":[]}',
        }
    ]
