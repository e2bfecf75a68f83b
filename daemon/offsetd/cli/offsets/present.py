"""How `offsetd offsets` prints what a backend did: one presenter per backend, chosen with it.

JSON output is the same for every backend (each result's `as_json()`); the text differs: the
REST path shows its steps, notes and the undo id, the offline path where the offsets live and
that the workers must be restarted to use them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from offsetd.cli.common import Target
from offsetd.cli.output import emit_json, table
from offsetd.offsets import documents
from offsetd.offsets.backend import OffsetsBackend
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.offline.backend import OfflineBackend, OfflineOutcome
from offsetd.offsets.offline.ops import OfflinePlan

__all__ = ["list_offsets", "report"]

Result = Any  # a backend's plan (dry run) or outcome


def report(
    backend: OffsetsBackend[Any, Any], results: list[Result], output: str, dry_run: bool
) -> None:
    """Print a command's plans (dry run) or outcomes the way its backend's users read them."""
    _REPORTS.get(backend.name, _rest_report)(results, output, dry_run)


def _rest_report(results: list[Plan | Outcome], output: str, dry_run: bool) -> None:
    if output == "json":
        emit_json([r.as_json() for r in results])
        return
    for result in results:
        plan = result.plan if isinstance(result, Outcome) else result
        click.echo(f"{plan.operation} {plan.connector} ({plan.kind}, {plan.prior_state})")
        for number, step in enumerate(plan.steps(), start=1):
            click.echo(f"  {number}. {step}")
        for note in plan.notes:
            click.echo(f"  note: {note}")
        rows = [
            (d.partition, d.before, d.after, d.change) for d in plan.diff if d.change != "unchanged"
        ]
        click.echo(
            table(["partition", "before", "after", "change"], rows) if rows else "  (no change)"
        )
        if isinstance(result, Outcome) and not result.snapshot_id:
            click.echo(
                f"{result.message}: nothing was written and no snapshot taken; "
                f"{plan.connector} was not touched ({result.final_state})"
            )
        elif isinstance(result, Outcome):
            click.echo(
                f"done: snapshot {result.snapshot_id}; {plan.connector} is {result.final_state}"
            )
            click.echo(f"undo with: offsetd offsets undo {result.snapshot_id}")
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)
        elif dry_run:
            click.echo("dry run: nothing was changed")


def _offline_report(
    results: list[OfflinePlan | OfflineOutcome], output: str, dry_run: bool
) -> None:
    for result in results:
        plan = result.plan if isinstance(result, OfflineOutcome) else result
        _show(output, result.as_json(), plan)
        if isinstance(result, OfflineOutcome):
            if output != "json":
                click.echo(
                    f"done: snapshot {result.snapshot_id}; restart the workers (or resume the "
                    "connector) to use it"
                )
        elif dry_run:
            click.echo("dry run: nothing was changed")


# backend name -> its text report; the REST one serves the backends that work through REST
_REPORTS: dict[str, Callable[[list[Any], str, bool], None]] = {
    OfflineBackend.name: _offline_report,
}


def _show(output: str, data: dict[str, Any], plan: OfflinePlan) -> None:
    if output == "json":
        emit_json([data])
        return
    click.echo(f"offline {plan.connector} ({plan.kind}): {plan.location.describe()}")
    rows = [
        (d["partition"], d["before"], d["after"], d["change"])
        for d in data["diff"]
        if d["change"] != "unchanged"
    ]
    click.echo(table(["partition", "before", "after", "change"], rows) if rows else "(no change)")


# -- list ---------------------------------------------------------------------------------------


async def list_offsets(
    backend: OffsetsBackend[Any, Any], target: Target, names: Sequence[str], history: bool
) -> Callable[[], None]:
    """Read what `offsetd offsets list` shows; returns the printing, done once the client is
    closed (so a broken pipe never leaves a connection open)."""
    if isinstance(backend, OfflineBackend):
        view = await backend.read_view(names, history)
        return lambda: _print_view(view, target.output, history)
    found = await backend.list_offsets(names)
    return lambda: _print_found(found, target.output)


def _print_found(found: dict[str, Any], output: str) -> None:
    if output == "json":
        emit_json(documents.export_document(found))
        return
    rows = [
        (name, e.partition, e.offset) for name, entries in sorted(found.items()) for e in entries
    ]
    click.echo(table(["connector", "partition", "offset"], rows))


def _print_view(view: Any, output: str, history: bool) -> None:
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
    if output == "json":
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
