"""The `--offline` side of `offsetd offsets`: straight from and to Kafka, no Connect REST."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from offsetd.cli.common import Target, run_async
from offsetd.cli.output import emit_json, table
from offsetd.errors import InvalidDocument, UndoConflict
from offsetd.offsets import documents, offline
from offsetd.offsets.model import OffsetEntry, as_map, same_offsets
from offsetd.offsets.offline import ops as offline_ops
from offsetd.offsets.snapshots import Snapshot

F = Callable[..., Any]


def offline_options(func: F) -> F:
    options = [
        click.option(
            "--offline",
            is_flag=True,
            help="Read/write the offsets topic or consumer group directly, not via REST.",
        ),
        click.option(
            "--force",
            "offline_force",
            is_flag=True,
            help="--offline: write even though a worker runs the connector's tasks.",
        ),
        click.option(
            "--assume-workers-down",
            is_flag=True,
            help="--offline: no worker answers REST; write anyway.",
        ),
        click.option(
            "--key-template",
            default=None,
            help="--offline: a key in the offsets topic's format giving the key order "
            "of new partitions, for connector classes offsetd does not know.",
        ),
        click.option(
            "--connector-type",
            type=click.Choice(["source", "sink"]),
            default=None,
            help="--offline: the connector's type when its config cannot tell.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _target(target: Target) -> offline_ops.OfflineTarget:
    run_async(target.client.aclose())  # REST is not used offline (only by the safety gate)
    return offline_ops.OfflineTarget(target.settings, target.worker, target.name)


def list_offline(target: Target, names: list[str], history: bool) -> None:
    off = _target(target)
    view = offline.read_offsets(
        off.worker_conf(),
        target.worker.offsets_topic,
        connectors=set(names) or None,
        history=history,
    )
    for lp in view.conflicts():
        click.echo(
            f"warning: {lp.partition} is stored under several keys:\n{lp.describe()}", err=True
        )
    if view.malformed:
        click.echo(
            f"warning: {len(view.malformed)} malformed records skipped "
            f"(first: {view.malformed[0].as_json()})",
            err=True,
        )
    if target.output == "json":
        emit_json(
            view.as_json()
            if history
            else documents.export_document(
                {name: view.entries(name) for name in sorted(view.connectors)}
            )
        )
        return
    if history:
        rows = [
            (
                f"{view.topic}-{h.kafka_partition}@{h.kafka_offset}",
                h.timestamp_ms,
                h.connector,
                h.partition,
                h.offset if h.offset is not None else "tombstone",
            )
            for h in view.history or ()
        ]
        click.echo(table(["record", "timestamp", "connector", "partition", "offset"], rows))
        return
    rows2 = [
        (name, e.partition, e.offset)
        for name in sorted(view.connectors)
        for e in view.entries(name)
    ]
    click.echo(table(["connector", "partition", "offset"], rows2))


def change_offline(
    target: Target,
    connector: str,
    patch: list[OffsetEntry] | None,
    *,
    raw_patch: list[Any] | None,
    dry_run: bool,
    force: bool,
    assume_workers_down: bool,
    key_template: str | None,
    connector_type: str | None,
) -> None:
    """alter (patch) or reset (None) one connector offline, with the safety gate first."""
    off = _target(target)
    rest_url = target.client.url if target.client else None
    if not dry_run:
        offline.check_offline_allowed(
            rest_url, connector, force=force, assume_workers_down=assume_workers_down
        )
    plan = offline_ops.plan(off, connector, patch, raw=raw_patch, connector_type=connector_type)
    if dry_run:
        _show(target, plan.as_json(), plan)
        click.echo("dry run: nothing was changed")
        return
    sid, _after, report = offline_ops.execute(
        plan,
        target.settings,
        off.worker_conf(),
        target.store,
        target.name,
        key_template=key_template,
    )
    result = {**plan.as_json(), "snapshot_id": sid, "report": report.as_json()}
    _show(target, result, plan)
    if target.output != "json":
        click.echo(f"done: snapshot {sid}; restart the workers (or resume the connector) to use it")


def undo_offline(target: Target, snap: Snapshot, *, force: bool, dry_run: bool) -> None:
    """Restore a snapshot's before-image offline; `force` also passes the workers-running gate."""
    off = _target(target)
    current = offline_ops.plan(off, snap.connector, []).before
    moved = not same_offsets(current, snap.after)
    if moved and not force:
        raise UndoConflict(
            f"the offsets of {snap.connector} moved since change {snap.id}; review and repeat "
            "with --force to restore the before-image anyway"
        )
    wanted = as_map(snap.before)
    patch = [*wanted.values()]
    patch += [OffsetEntry(e.partition, None) for k, e in as_map(current).items() if k not in wanted]
    change_offline(
        target,
        snap.connector,
        patch,
        raw_patch=None,
        dry_run=dry_run,
        force=force,
        assume_workers_down=True,
        key_template=None,
        connector_type=None,
    )


def _show(target: Target, data: dict[str, Any], plan: offline_ops.OfflinePlan) -> None:
    if target.output == "json":
        emit_json([data])
        return
    click.echo(f"offline {plan.connector} ({plan.kind}): {plan.location.describe()}")
    rows = [
        (d["partition"], d["before"], d["after"], d["change"])
        for d in data["diff"]
        if d["change"] != "unchanged"
    ]
    click.echo(table(["partition", "before", "after", "change"], rows) if rows else "(no change)")


def no_targets_offline() -> None:
    raise InvalidDocument("--offline takes a --file document (targets need REST for now)")
