"""notify: the body, the redaction of webhook URLs, failures counted and never raised."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from prometheus_client import CollectorRegistry

from offsetd.metrics.instruments import RemediationMetrics
from offsetd.remediation.notify import NotifyResult, notification_body, notify, redact_url
from tests.unit.remediation.test_remediation_guards import decision

SECRET_URL = "https://hooks.example.com:8443/services/T0/B0/s3cr3t-token?key=also-secret"


def _count(registry: CollectorRegistry, result: str) -> float:
    value = registry.get_sample_value(
        "offsetd_notifications_total", {"rule": "skip-poison", "result": result}
    )
    return value or 0.0


def test_redact_url_keeps_only_scheme_host_and_port() -> None:
    assert redact_url(SECRET_URL) == "https://hooks.example.com:8443/…"
    assert redact_url("http://user:pw@127.0.0.1/x") == "http://127.0.0.1/…"
    assert redact_url("http://[::1]:9/x") == "http://[::1]:9/…"


def test_body_carries_the_decision_and_no_webhook() -> None:
    params = {"severity": "critical", "webhook": SECRET_URL, "summary": "poison in orders"}
    body = notification_body(decision(), params, "executed")
    assert body == {
        "decision_id": "d1",
        "rule": "skip-poison",
        "connect_cluster": "local",
        "connector": "orders-sink",
        "record": {"topic": "orders", "partition": 0, "offset": 41},
        "summary": "poison in orders",
        "severity": "critical",
        "outcome": "executed",
    }
    default = notification_body(decision(), {}, "dry_run")
    assert default["severity"] == "warning"
    assert "rule=skip-poison" in default["summary"]  # the decision's own summary line


def test_webhook_success_failure_and_log_redaction(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    metrics = RemediationMetrics.create(registry)
    seen: list[dict[str, object]] = []

    def ok(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(204)

    def refuse(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    def explode(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to {request.url}")

    params = {"webhook": SECRET_URL, "summary": "s"}
    caplog.set_level(logging.INFO, logger="offsetd.notify")

    async def go() -> list[NotifyResult]:
        return [
            await notify(
                decision(),
                params,
                "executed",
                metrics=metrics,
                timeout_ms=1000,
                transport=httpx.MockTransport(handler),
            )
            for handler in (ok, refuse, explode)
        ] + [await notify(decision(), {}, "dry_run", metrics=metrics, timeout_ms=1000)]

    assert asyncio.run(go()) == ["sent", "failed", "failed", "logged"]
    assert seen[0]["decision_id"] == "d1"
    assert _count(registry, "sent") == 1
    assert _count(registry, "failed") == 2
    assert _count(registry, "logged") == 1
    assert "s3cr3t" not in caplog.text
    assert "also-secret" not in caplog.text
    assert "hooks.example.com:8443/…" in caplog.text


def test_a_named_webhook_takes_its_url_from_the_config(caplog: pytest.LogCaptureFixture) -> None:
    from pydantic import SecretStr

    from offsetd.remediation.notify import named_webhook

    hooks = {"oncall": SecretStr("https://hooks.example/T0/B0/s3cr3t")}
    params = {"severity": "critical", "webhook": "oncall"}
    assert named_webhook(params, hooks) == {
        "severity": "critical",
        "webhook": "https://hooks.example/T0/B0/s3cr3t",
    }
    assert params["webhook"] == "oncall"  # the rule's params are not changed
    url = {"webhook": "https://other.example/x"}
    assert named_webhook(url, hooks) == url
    with caplog.at_level("WARNING"):
        assert named_webhook({"webhook": "pager"}, hooks) == {"webhook": None}
    assert "no webhook named pager" in caplog.text


def test_a_rule_may_name_a_webhook_instead_of_a_url() -> None:
    from offsetd.rules.actions import Notify

    assert Notify.model_validate({"type": "notify", "webhook": "oncall"}).webhook == "oncall"
