"""The guard state on the stack's real Kafka, via the operator commands; notify's webhook."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from prometheus_client import CollectorRegistry
from ruamel.yaml import YAML

from offsetd.cli import main
from offsetd.config import RemediationSettings, load_settings
from offsetd.devstack.stack import StackInfo
from offsetd.errors import ControlRefused
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.remediation.control import ControlStore
from offsetd.remediation.guards import GuardContext, evaluate
from offsetd.remediation.notify import notify
from tests.integration.kafkautil import unique
from tests.unit.remediation.test_remediation_guards import decision

pytestmark = pytest.mark.integration


@pytest.fixture
def control_config(stack: StackInfo, tmp_path: Path) -> Path:
    """The stack's offsetd.yaml with a control topic of its own (tests do not see each other)."""
    data = stack.offsetd_config()
    data["remediation"] = {"control_topic": unique("offsetd.control-test")}
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    return path


def cli(config: Path, *args: str) -> Result:
    """`offsetd <command...> --config <config> <args>`: options after the command path."""
    words = list(args)
    split = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
    return CliRunner().invoke(main, [*words[:split], "--config", str(config), *words[split:]])


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout


def as_json(result: Result) -> Any:
    return json.loads(ok(result))


def store_for(config: Path) -> ControlStore:
    store = ControlStore.for_settings(load_settings(config))
    store.load()
    return store


def test_pause_shows_in_status_and_resume_lifts_it(control_config: Path) -> None:
    assert as_json(cli(control_config, "automation", "status", "-o", "json"))["paused"] is None
    ok(cli(control_config, "pause", "--reason", "db migration", "--by", "alice"))
    status = as_json(cli(control_config, "automation", "status", "-o", "json"))
    assert status["paused"]["by"] == "alice"
    assert status["paused"]["reason"] == "db migration"
    assert "PAUSED by alice" in ok(cli(control_config, "automation", "status"))
    again = cli(control_config, "pause")
    assert again.exit_code == ControlRefused.exit_code
    assert "already paused" in again.stderr

    # the guards see it, read back from Kafka by a fresh store
    with store_for(control_config) as store:
        verdict = evaluate(decision(), _ctx(store))
        assert verdict.outcome == "suppressed_paused"

    ok(cli(control_config, "resume-automation", "--by", "bob"))
    assert as_json(cli(control_config, "automation", "status", "-o", "json"))["paused"] is None
    not_paused = cli(control_config, "resume-automation")
    assert not_paused.exit_code == ControlRefused.exit_code
    with store_for(control_config) as store:
        assert store.state.pause is not None
        assert store.state.pause.by == "bob"  # the record says who lifted it
        assert evaluate(decision(), _ctx(store)).outcome == "proceed"


def test_approve_a_pending_approval_written_by_the_store(control_config: Path) -> None:
    with store_for(control_config) as daemon_side:
        daemon_side.request_approval("dec-1", "skip-poison", "local", "orders-sink", "skip 41")
        daemon_side.request_approval("dec-2", "skip-poison", "local", "orders-sink", "skip 42")
        pending = as_json(cli(control_config, "approvals", "-o", "json"))
        assert [p["decision_id"] for p in pending] == ["dec-1", "dec-2"]
        assert pending[0]["summary"] == "skip 41"
        assert "dec-1" in ok(cli(control_config, "approvals"))

        approve_mode = decision(mode="approve", id="dec-1")
        assert evaluate(approve_mode, _ctx(daemon_side)).outcome == "awaiting_approval"

        assert "approved dec-1" in ok(cli(control_config, "approve", "dec-1", "--by", "alice"))
        ok(cli(control_config, "reject", "dec-2", "--by", "eve"))

        twice = cli(control_config, "approve", "dec-1")
        assert twice.exit_code == ControlRefused.exit_code
        assert "already approved by alice" in twice.stderr
        unknown = cli(control_config, "approve", "no-such-id")
        assert unknown.exit_code == ControlRefused.exit_code
        assert "no decision no-such-id awaits approval" in unknown.stderr
        assert as_json(cli(control_config, "approvals", "-o", "json")) == []

        # the running daemon's store sees the CLI's writes after catch_up
        daemon_side.catch_up()
        assert evaluate(approve_mode, _ctx(daemon_side)).outcome == "proceed"
        rejected = evaluate(decision(mode="approve", id="dec-2"), _ctx(daemon_side))
        assert rejected.outcome == "rejected"
        # asking again for an approval that exists changes nothing
        again = daemon_side.request_approval("dec-1", "skip-poison", "local", "orders-sink", "x")
        assert again.status == "approved"


def test_breaker_list_and_reset(control_config: Path) -> None:
    with store_for(control_config) as store:
        store.set_breaker(
            "local", "orders-sink", open=True, by="offsetd", why="failed again", decision_id="d9"
        )
    listed = as_json(cli(control_config, "breaker", "list", "-o", "json"))
    assert [(b["connector"], b["decision_id"]) for b in listed] == [("orders-sink", "d9")]
    status = as_json(cli(control_config, "automation", "status", "-o", "json"))
    assert [b["connector"] for b in status["breakers"]] == ["orders-sink"]

    assert "reset by carol" in ok(
        cli(control_config, "breaker", "reset", "orders-sink", "--by", "carol")
    )
    assert as_json(cli(control_config, "breaker", "list", "-o", "json")) == []
    again = cli(control_config, "breaker", "reset", "orders-sink")
    assert again.exit_code == ControlRefused.exit_code
    assert "no open breaker for local/orders-sink" in again.stderr
    wrong = cli(control_config, "breaker", "reset", "orders-sink", "--connect-cluster", "nope")
    assert wrong.exit_code == 2


def test_opt_out_and_budgets_in_status(control_config: Path) -> None:
    ok(cli(control_config, "opt-out", "orders-sink", "--reason", "vendor bug", "--by", "dan"))
    with store_for(control_config) as store:
        assert evaluate(decision(), _ctx(store)).outcome == "suppressed_opt_out"
        store.record_skip("local", "billing-sink", keep_ms=3_600_000)
    status = as_json(cli(control_config, "automation", "status", "-o", "json"))
    assert [(o["connector"], o["reason"]) for o in status["opt_outs"]] == [
        ("orders-sink", "vendor bug")
    ]
    assert [(s["connector"], s["used"], s["max"]) for s in status["skip_budgets"]] == [
        ("billing-sink", 1, 5)
    ]
    ok(cli(control_config, "opt-in", "orders-sink"))
    assert cli(control_config, "opt-in", "orders-sink").exit_code == ControlRefused.exit_code
    assert as_json(cli(control_config, "automation", "status", "-o", "json"))["opt_outs"] == []


def test_second_store_sees_the_first_after_catch_up(control_config: Path) -> None:
    first, second = store_for(control_config), store_for(control_config)
    try:
        first.set_pause(True, "alice", "drill")
        first.record_skip("local", "orders-sink", keep_ms=3_600_000, at_ms=1_000)
        assert second.state.paused is None  # nothing read yet
        second.catch_up()
        paused = second.state.paused
        assert paused is not None
        assert (paused.by, paused.reason) == ("alice", "drill")
        assert second.state.skip_times("local", "orders-sink") == (1_000,)
        # only what is new: a second catch_up with nothing new reads nothing and changes nothing
        second.catch_up()
        assert second.state.skip_times("local", "orders-sink") == (1_000,)
        first.record_skip("local", "orders-sink", keep_ms=3_600_000, at_ms=2_000)
        asyncio.run(second.acatch_up())
        assert second.state.skip_times("local", "orders-sink") == (1_000, 2_000)
        assert second.state.ignored == 0
    finally:
        first.close()
        second.close()


def _ctx(store: ControlStore) -> GuardContext:
    return GuardContext(
        settings=RemediationSettings(),
        control=store.state,
        connector_class="org.apache.kafka.connect.file.FileStreamSinkConnector",
        connector_type="sink",
        offsets_refusal=None,
        failing_connectors=1,
        now_ms=store.now_ms(),
    )


# -- notify's webhook against a real HTTP server ------------------------------------------------


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            received.append(
                {
                    "path": self.path,
                    "content_type": self.headers.get("Content-Type"),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            status = 500 if self.path.startswith("/broken") else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_notify_posts_the_decision_to_a_real_webhook(
    webhook: tuple[str, list[dict[str, Any]]], caplog: pytest.LogCaptureFixture
) -> None:
    base, received = webhook
    registry = CollectorRegistry()
    metrics = RemediationMetrics.create(registry)
    params = {"severity": "critical", "summary": "poison record quarantined"}

    async def send() -> list[str]:
        return [
            await notify(
                decision(),
                {**params, "webhook": f"{base}/hooks/T0/secret-token"},
                "executed",
                metrics=metrics,
                timeout_ms=5000,
            ),
            await notify(
                decision(),
                {**params, "webhook": f"{base}/broken/other-token"},
                "executed",
                metrics=metrics,
                timeout_ms=5000,
            ),
        ]

    assert asyncio.run(send()) == ["sent", "failed"]
    assert received[0]["path"] == "/hooks/T0/secret-token"
    assert received[0]["content_type"] == "application/json"
    assert received[0]["body"] == {
        "decision_id": "d1",
        "rule": "skip-poison",
        "connect_cluster": "local",
        "connector": "orders-sink",
        "record": {"topic": "orders", "partition": 0, "offset": 41},
        "summary": "poison record quarantined",
        "severity": "critical",
        "outcome": "executed",
    }
    for result in ("sent", "failed"):
        labels = {"rule": "skip-poison", "result": result}
        assert registry.get_sample_value("offsetd_notifications_total", labels) == 1
    assert "secret-token" not in caplog.text
    assert "other-token" not in caplog.text
