"""The managed Connect sketch (`offsetd.offsets.managed`) against a recorded transport: each
test replays request/answer pairs recorded in `recorded/managed_offsets.json`, in order, and
fails on any request that differs from the recording (method, path, body, bearer token)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from offsetd.connect.client import ConnectClient
from offsetd.connect.offsets import JsonScalar
from offsetd.errors import ConnectorRejected
from offsetd.offsets.backend import BackendRequest, Timeouts
from offsetd.offsets.managed.api import ManagedApi, managed_http
from offsetd.offsets.managed.parts import ManagedReader, ManagedWriter
from offsetd.offsets.model import OffsetEntry
from offsetd.offsets.registry import BACKENDS
from offsetd.offsets.snapshots.files import FileSnapshotStore
from offsetd.retry import Backoff

RECORDED = json.loads((Path(__file__).parent / "recorded" / "managed_offsets.json").read_text())
TOKEN = "recorded-token"
SOURCE: dict[str, JsonScalar] = {"filename": "/data/orders.txt"}


class Replay:
    """An httpx transport that answers from a recording, in order."""

    def __init__(self, name: str) -> None:
        self.pairs: list[dict[str, Any]] = list(RECORDED[name])
        self.seen = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert self.pairs, f"unrecorded request {request.method} {request.url.path}"
        pair = self.pairs.pop(0)
        wanted = pair["request"]
        self.seen += 1
        assert (request.method, request.url.path) == (wanted["method"], wanted["path"])
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        body = json.loads(request.content) if request.content else None
        assert body == wanted.get("body"), body
        answer = pair["answer"]
        if answer["body"] is None:
            return httpx.Response(answer["status"])
        return httpx.Response(answer["status"], json=answer["body"])

    def done(self) -> None:
        assert not self.pairs, f"{len(self.pairs)} recorded requests were not made"


def _http(replay: Replay) -> httpx.AsyncClient:
    return managed_http(
        "https://api.example.cloud", "env-1", "lkc-1", TOKEN, transport=httpx.MockTransport(replay)
    )


async def _no_wait(_seconds: float) -> None:
    return None


def _api(replay: Replay) -> ManagedApi:
    return ManagedApi(_http(replay), poll_s=0, sleep=_no_wait)


def test_the_reader_lists_every_connectors_offsets_from_the_services_own_path() -> None:
    replay = Replay("list")
    listed = asyncio.run(ManagedReader(_api(replay)).list_offsets([]))
    assert listed == {"orders-src": [OffsetEntry(SOURCE, {"position": 200})]}
    replay.done()


def test_the_writer_requests_the_patch_and_waits_until_the_service_applied_it() -> None:
    replay = Replay("write_applied")
    entry = OffsetEntry(SOURCE, {"position": 10})
    said = asyncio.run(ManagedWriter(_api(replay)).write("orders-src", (entry,)))
    assert said == "the service applied the PATCH of orders-src's offsets"
    replay.done()


def test_a_write_the_service_refuses_says_its_words() -> None:
    replay = Replay("write_refused")
    with pytest.raises(ConnectorRejected, match="Connector is not in STOPPED state"):
        asyncio.run(ManagedWriter(_api(replay)).write("orders-src", None))
    replay.done()


def test_the_one_sequence_runs_over_the_managed_parts(tmp_path: Path) -> None:
    """The seam: the registry's `managed` sketch is the same safe sequence — recheck, snapshot,
    stop, rebase at rest, the service's write request, read back, resume — with only a reader
    and a writer of its own."""
    replay = Replay("alter_through_the_sequence")
    http = _http(replay)
    client = ConnectClient(http, backoff=Backoff(attempts=1, first_s=0, max_s=0), sleep=_no_wait)
    request = BackendRequest(
        "hosted",
        "none",
        client,
        FileSnapshotStore(tmp_path),
        timeouts=Timeouts(stop_s=1, resume_s=1, poll_s=0, read_back_s=0),
    )
    backend = BACKENDS["managed"].steps
    assert backend is not None
    managed = backend(request)

    async def alter() -> Any:
        plan = await managed.plan_alter("orders-src", [OffsetEntry(SOURCE, {"position": 10})])
        return await managed.apply(plan)

    outcome = asyncio.run(alter())
    assert outcome.after == (OffsetEntry(SOURCE, {"position": 10}),)
    assert outcome.final_state == "RUNNING"
    assert "the service applied the PATCH" in outcome.message
    snapshot = FileSnapshotStore(tmp_path).get(outcome.snapshot_id)
    assert snapshot.status == "applied"
    assert snapshot.before == (OffsetEntry(SOURCE, {"position": 200}),)
    replay.done()
