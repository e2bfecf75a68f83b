"""`offsetd offsets history`: the changes offsetd made, newest first, with their undo ids."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from offsetd.cli.common import connect_options, reports_errors, run_async
from offsetd.cli.offsets.choose import target_of
from offsetd.cli.output import emit_json, table

__all__ = ["history"]


@click.command()
@click.option("--connector", default=None, help="Only this connector's changes.")
@click.option("--limit", default=50, show_default=True)
@click.option(
    "--kafka-cluster",
    default=None,
    help="The consumer groups' changes on this Kafka cluster alias (mm2 failover/failback); "
    "--connector then names a group.",
)
@connect_options
@reports_errors
def history(connector: str | None, limit: int, kafka_cluster: str | None, **kw: Any) -> None:
    """The changes offsetd made, newest first, with their undo ids."""
    output = kw["output"]
    if kafka_cluster is not None:
        from offsetd.cli.mm2 import group_store  # noqa: PLC0415 (only this path needs it)

        store = group_store(kw["config_path"], kafka_cluster, kw["snapshot_dir"])
        snaps = store.list_info(
            connector=connector, connect_cluster=f"kafka:{kafka_cluster}", limit=limit
        )
    else:
        target = target_of(**kw)
        snaps = target.store.list_info(connector=connector, limit=limit)
        run_async(target.client.aclose())
    if output == "json":
        emit_json(
            [
                {
                    "id": s.id,
                    "created_at": s.created_at.isoformat(),
                    "connect_cluster": s.connect_cluster,
                    "connector": s.connector,
                    "operation": s.operation,
                    "status": s.status,
                    "summary": dataclasses.asdict(s.summary),
                    "message": s.message,
                    "undo_of": s.undo_of,
                }
                for s in snaps
            ]
        )
        return
    rows = [
        (
            s.id,
            s.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            s.connector,
            s.operation,
            s.status,
            f"{s.summary.changed} changed, {s.summary.added} added, {s.summary.removed} removed",
        )
        for s in snaps
    ]
    subject = "group" if kafka_cluster is not None else "connector"
    headers = ["id", "time (utc)", subject, "operation", "status", "partitions"]
    click.echo(table(headers, rows))
