"""The notify action: a log line, the `offsetd_notifications_total` metric, an optional webhook.

A notification must never hurt the remediation it reports on: webhook failures (timeout,
refused, non-2xx) are counted and logged, never raised. It must never leak a secret either: the
body carries only the decision's coordinates and texts (no config, no headers), and the webhook
URL is logged as scheme, host and port only, because its path or query often is the token
(Slack, Teams) and its user info would be a password.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from offsetd.engine.decision import Decision
from offsetd.metrics.instruments import RemediationMetrics

__all__ = ["NotifyResult", "named_webhook", "notification_body", "notify", "redact_url"]

log = logging.getLogger("offsetd.notify")

NotifyResult = Literal["logged", "sent", "failed"]
_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "critical": logging.CRITICAL}


@dataclass(frozen=True)
class _Params:
    severity: str
    webhook: str | None
    summary: str | None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> _Params:
        severity = str(params.get("severity") or "warning")
        webhook = params.get("webhook")
        summary = params.get("summary")
        return cls(
            severity if severity in _LEVELS else "warning",
            str(webhook) if webhook else None,
            str(summary) if summary else None,
        )


def named_webhook(params: Mapping[str, Any], webhooks: Mapping[str, SecretStr]) -> dict[str, Any]:
    """The notify params with a webhook *name* (`webhook: oncall`) replaced by its URL from
    `remediation.webhooks`; an unknown name is logged and the notification stays a log line."""
    webhook = params.get("webhook")
    if not webhook or "://" in str(webhook):
        return dict(params)
    url = webhooks.get(str(webhook))
    if url is None:
        log.warning("notify: no webhook named %s in remediation.webhooks; not sent", webhook)
    return {**params, "webhook": url.get_secret_value() if url is not None else None}


def redact_url(url: str) -> str:
    """`https://user:pw@hooks.example/T/B/token?x=y` -> `https://hooks.example/…`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid url>"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme or '?'}://{host}{port}/…"


def notification_body(
    decision: Decision, params: Mapping[str, Any], outcome: str
) -> dict[str, Any]:
    """The JSON body of a notification (and the fields of its log line)."""
    p = _Params.of(params)
    record = decision.record
    return {
        "decision_id": decision.id,
        "rule": decision.rule,
        "connect_cluster": decision.connect_cluster,
        "connector": decision.connector,
        "record": None
        if record is None
        else {"topic": record.topic, "partition": record.partition, "offset": record.offset},
        "summary": p.summary or decision.summary(),
        "severity": p.severity,
        "outcome": outcome,
    }


async def notify(
    decision: Decision,
    params: Mapping[str, Any],
    outcome: str,
    *,
    metrics: RemediationMetrics | None,
    timeout_ms: int,
    transport: httpx.AsyncBaseTransport | None = None,
) -> NotifyResult:
    """Log, count and (with a `webhook` in `params`) POST the notification; never raises.

    `params` are the notify action's (`severity`, `webhook`, `summary`); `outcome` is the
    decision's outcome as the remediation layer sees it (e.g. `suppressed_blast_radius`).
    """
    p = _Params.of(params)
    body = notification_body(decision, params, outcome)
    record = decision.record
    where = f" record={record.topic}-{record.partition}@{record.offset}" if record else ""
    log.log(
        _LEVELS[p.severity],
        "notify %s rule=%s connector=%s/%s outcome=%s decision=%s%s: %s",
        p.severity,
        decision.rule,
        decision.connect_cluster,
        decision.connector,
        outcome,
        decision.id,
        where,
        body["summary"],
    )
    result: NotifyResult = "logged"
    if p.webhook is not None:
        result = await _post(p.webhook, body, timeout_ms, transport)
    if metrics is not None:
        metrics.notifications.labels(rule=decision.rule, result=result).inc()
    return result


async def _post(
    url: str, body: dict[str, Any], timeout_ms: int, transport: httpx.AsyncBaseTransport | None
) -> NotifyResult:
    shown = redact_url(url)
    try:
        async with httpx.AsyncClient(
            timeout=timeout_ms / 1000, transport=transport, follow_redirects=False
        ) as client:
            response = await client.post(url, json=body)
    except Exception as exc:  # httpx errors and anything else: a notification never breaks a saga
        # the exception text can contain the URL: only its type is logged
        log.warning(
            "notify webhook %s failed for decision %s: %s",
            shown,
            body["decision_id"],
            type(exc).__name__,
        )
        return "failed"
    if not response.is_success:
        log.warning(
            "notify webhook %s answered %s for decision %s",
            shown,
            response.status_code,
            body["decision_id"],
        )
        return "failed"
    return "sent"
