"""`offsetd quarantine list`: the records offsetd skipped, kept whole in the quarantine topic."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from offsetd.cli.common import reports_errors
from offsetd.cli.output import emit_json, table
from offsetd.cli.run import config_option
from offsetd.config import load_settings
from offsetd.kafkalogin import checked_config
from offsetd.remediation.quarantine import read_quarantined
from offsetd.remediation.quarantine_format import QuarantinedRecord

__all__ = ["PREVIEW_CHARS", "as_json", "list_", "quarantine"]

PREVIEW_CHARS = 60


@click.group("quarantine")
def quarantine() -> None:
    """Records offsetd moved a connector past, each kept whole with its error context."""


@quarantine.command("list")
@config_option
@click.option("--connector", default=None, help="Only this connector's records.")
@click.option("--limit", default=50, show_default=True, help="The newest this many.")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table")
@reports_errors
def list_(config_path: Path, connector: str | None, limit: int, output: str) -> None:
    """The quarantined records, newest first (JSON carries key and value in base64)."""
    settings = load_settings(config_path)
    conf = checked_config(settings, settings.daemon_kafka_cluster())
    records = [
        r
        for r in read_quarantined(conf, settings.remediation.quarantine_topic)
        if connector is None or r.connector == connector
    ]
    records = list(reversed(records))[:limit]
    if output == "json":
        emit_json([as_json(r) for r in records])
        return
    rows = [
        (
            _when(r.quarantined_at_ms),
            r.connector,
            f"{r.original.topic}-{r.original.partition}@{r.original.offset}"
            if r.original
            else None,
            r.headers.get("__connect.errors.exception.class.name"),
            _preview(r.stored.value),
            f"{r.ref.partition}@{r.ref.offset}",
        )
        for r in records
    ]
    click.echo(table(["quarantined at", "connector", "record", "error", "value", "copy"], rows))


def as_json(record: QuarantinedRecord) -> dict[str, Any]:
    stored = record.stored
    original = record.original
    return {
        "quarantine": record.ref.as_dict(),
        "record": (
            {"topic": original.topic, "partition": original.partition, "offset": original.offset}
            if original
            else None
        ),
        "connector": record.connector,
        "saga_key": record.saga_key,
        "quarantined_at_ms": record.quarantined_at_ms,
        "timestamp_ms": stored.timestamp_ms,
        "key_base64": _b64(stored.key),
        "value_base64": _b64(stored.value),
        "original_headers": [[k, _b64(v)] for k, v in record.original_headers],
        "context": record.headers,
    }


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _preview(data: bytes | None) -> str | None:
    if data is None:
        return None
    text = data[: PREVIEW_CHARS * 4].decode("utf-8", errors="replace")
    text = text.replace("\n", " ")
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def _when(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
