"""`offsetd offsets`: list, export, alter, import, reset, undo, history — one safe command each."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from offsetd.cli.common import Target, connect_options, reports_errors, resolve_target, run_async
from offsetd.cli.offline import (
    change_offline,
    list_offline,
    no_targets_offline,
    offline_options,
    undo_offline,
)
from offsetd.cli.output import emit_json, table
from offsetd.errors import InvalidDocument
from offsetd.offsets import documents
from offsetd.offsets.location import resolve_location
from offsetd.offsets.model import ConnectorKind, OffsetEntry
from offsetd.offsets.operations import OffsetsService, Outcome, Plan, Timeouts
from offsetd.offsets.retarget import Selection, target_patch
from offsetd.offsets.targets import Target as OffsetTarget
from offsetd.offsets.targets import TargetKind, parse_timestamp
from offsetd.remediation.quarantine import QuarantineFailed
from offsetd.remediation.skiprun import (
    SkipRunJob,
    check_positions,
    copier_for,
    quarantine_context,
    skip_run_job_of_file,
)


@click.group()
def offsets() -> None:
    """Connector offsets: list, export, alter, import, reset, undo, history."""


def _say(message: str) -> None:
    click.echo(f"[offsetd] {message}", err=True)


def _target(**kwargs: Any) -> Target:
    return resolve_target(**kwargs)


def _service(
    target: Target, stop_timeout: float = 60, resume_timeout: float = 120
) -> OffsetsService:
    return OffsetsService(
        target.client,
        target.store,
        connect_cluster=target.name,
        orchestrator=target.orchestrator,
        timeouts=Timeouts(stop_s=stop_timeout, resume_s=resume_timeout),
        log=_say,
    )


_OFFLINE_KEYS = (
    "offline",
    "offline_force",
    "assume_workers_down",
    "key_template",
    "connector_type",
)


def _pop_offline(kw: dict[str, Any]) -> dict[str, Any]:
    """Take the --offline options out of the keyword arguments meant for resolve_target."""
    taken = {key: kw.pop(key) for key in _OFFLINE_KEYS}
    taken["force"] = taken.pop("offline_force")
    return taken


def _with_client(target: Target, work: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with target.client:
            return await work()

    return run_async(run())


# -- list / export ------------------------------------------------------------------------------


async def _collect(target: Target, names: list[str]) -> dict[str, list[OffsetEntry]]:
    client = target.client
    await client.require_offsets_api()
    chosen = names or await client.connector_names()
    return {name: await client.offsets(name) for name in chosen}


def _names(connectors: tuple[str, ...], connectors_csv: str | None, all_: bool) -> list[str]:
    names = list(connectors) + [n.strip() for n in (connectors_csv or "").split(",") if n.strip()]
    if names and all_:
        raise click.UsageError("name connectors or use --all, not both")
    return names


@offsets.command("list")
@click.argument("connectors", nargs=-1)
@click.option("--connectors", "connectors_csv", default=None, help="Comma-separated names.")
@click.option("--all", "all_", is_flag=True, help="Every connector (the default with no names).")
@click.option("--offline", is_flag=True, help="Read the offsets topic directly, not via REST.")
@click.option(
    "--from-beginning",
    is_flag=True,
    help="--offline: show every record of the offsets topic, in log order.",
)
@connect_options
@reports_errors
def list_(
    connectors: tuple[str, ...],
    connectors_csv: str | None,
    all_: bool,
    offline: bool,
    from_beginning: bool,
    **kw: Any,
) -> None:
    """Show the offsets of one connector, several, or all."""
    target = _target(**kw)
    if offline or from_beginning:
        list_offline(target, _names(connectors, connectors_csv, all_), from_beginning)
        return
    found = _with_client(target, lambda: _collect(target, _names(connectors, connectors_csv, all_)))
    if target.output == "json":
        emit_json(documents.export_document(found))
        return
    rows = [
        (name, e.partition, e.offset) for name, entries in sorted(found.items()) for e in entries
    ]
    click.echo(table(["connector", "partition", "offset"], rows))


@offsets.command()
@click.option("--connectors", "connectors_csv", default=None, help="Comma-separated names.")
@click.option("--all", "all_", is_flag=True, help="Every connector (the default).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["kip199", "strimzi-configmap"]),
    default="kip199",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of stdout.",
)
@connect_options
@reports_errors
def export(connectors_csv: str | None, all_: bool, fmt: str, out: Path | None, **kw: Any) -> None:
    """Export offsets as KIP-199's document or as Strimzi ConfigMaps."""
    kw["output"] = "json"
    target = _target(**kw)
    found = _with_client(target, lambda: _collect(target, _names((), connectors_csv, all_)))
    if fmt == "kip199":
        text = json.dumps(documents.export_document(found), indent=2) + "\n"
    else:
        text = documents.configmaps(found)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        _say(f"wrote offsets of {len(found)} connectors to {out}")


# -- changes ------------------------------------------------------------------------------------


def _target_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--to-timestamp",
            default=None,
            help="First record at or after this time (ISO 8601 with zone, or epoch ms).",
        ),
        click.option("--to-earliest", is_flag=True, help="The log start of each partition."),
        click.option("--to-latest", is_flag=True, help="The log end of each partition."),
        click.option("--shift-by", type=int, default=None, help="Move each partition by N."),
        click.option("--topic", "topics", multiple=True, help="Only these topics (repeatable)."),
        click.option(
            "--partition",
            "partitions",
            type=int,
            multiple=True,
            help="Only these partitions (repeatable).",
        ),
        click.option(
            "--include-uncommitted",
            is_flag=True,
            help="Also set partitions that have no offset yet.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _change_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--dry-run", is_flag=True, help="Print the plan and the diff; change nothing."
        ),
        click.option(
            "--stop-timeout",
            default=60.0,
            show_default=True,
            help="Seconds to wait for STOPPED with no tasks.",
        ),
        click.option(
            "--resume-timeout",
            default=120.0,
            show_default=True,
            help="Seconds to wait for the connector and its tasks to run again.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _parse_target(
    to_timestamp: str | None, to_earliest: bool, to_latest: bool, shift_by: int | None
) -> OffsetTarget | None:
    given = [
        x for x in (to_timestamp, to_earliest or None, to_latest or None, shift_by) if x is not None
    ]
    if len(given) > 1:
        raise click.UsageError(
            "use only one of --to-timestamp, --to-earliest, --to-latest, --shift-by"
        )
    if to_timestamp is not None:
        return OffsetTarget(TargetKind.TIMESTAMP, timestamp_ms=parse_timestamp(to_timestamp))
    if to_earliest:
        return OffsetTarget(TargetKind.EARLIEST)
    if to_latest:
        return OffsetTarget(TargetKind.LATEST)
    if shift_by is not None:
        return OffsetTarget(TargetKind.SHIFT, shift=shift_by)
    return None


async def _targeted_patch(
    target: Target, service: OffsetsService, connector: str, spec: OffsetTarget, sel: Selection
) -> list[OffsetEntry]:
    info = await target.client.info(connector)
    kind, _cls, _status = await service.describe(connector)
    location = resolve_location(connector, info.config, kind, target.worker, target.settings)
    current = await target.client.offsets(connector)
    _say(f"{connector}: offsets in {location.describe()}; target: {spec.describe()}")
    return await target_patch(kind, info.config, location, current, spec, sel, target.settings)


async def _plan_and_run(
    service: OffsetsService, plans: list[Callable[[], Awaitable[Plan]]], dry_run: bool
) -> list[Plan | Outcome]:
    results: list[Plan | Outcome] = []
    for make in plans:
        plan = await make()
        results.append(plan if dry_run else await service.execute(plan))
    return results


def _report(results: list[Plan | Outcome], output: str, dry_run: bool) -> None:
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
        if isinstance(result, Outcome):
            click.echo(
                f"done: snapshot {result.snapshot_id}; {plan.connector} is {result.final_state}"
            )
            click.echo(f"undo with: offsetd offsets undo {result.snapshot_id}")
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)
        elif dry_run:
            click.echo("dry run: nothing was changed")


@offsets.command()
@click.argument("connector")
@click.option(
    "--file",
    "file_",
    type=click.File("r"),
    default=None,
    help="Offsets document or Strimzi ConfigMap ('-' for stdin).",
)
@_target_options
@_change_options
@offline_options
@connect_options
@reports_errors
def alter(
    connector: str,
    file_: Any,
    to_timestamp: str | None,
    to_earliest: bool,
    to_latest: bool,
    shift_by: int | None,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    include_uncommitted: bool,
    dry_run: bool,
    stop_timeout: float,
    resume_timeout: float,
    **kw: Any,
) -> None:
    """Change one connector's offsets: from a document, or to a target (time, shift, ...)."""
    spec = _parse_target(to_timestamp, to_earliest, to_latest, shift_by)
    if (spec is None) == (file_ is None):
        raise click.UsageError(
            "give either --file or one of --to-timestamp/--to-earliest/--to-latest/--shift-by"
        )
    off = _pop_offline(kw)
    target = _target(**kw)
    job = _skip_run_job(file_)
    if off.pop("offline"):
        if spec is not None:
            no_targets_offline()
        if job is not None:
            raise click.UsageError(
                "a skip-run plan is applied online: its runs are quarantined before the patch"
            )
        raw = documents.parse_document(file_.read(), connector=connector)[connector]
        change_offline(target, connector, None, raw_patch=raw, dry_run=dry_run, **off)
        return
    service = _service(target, stop_timeout, resume_timeout)
    selection = Selection(topics, partitions, include_uncommitted)

    async def make_plan() -> Plan:
        if spec is not None:
            patch = await _targeted_patch(target, service, connector, spec, selection)
        else:
            raw = documents.parse_document(file_.read(), connector=connector)
            kind, _cls, _status = await service.describe(connector)
            patch = documents.validate_entries(connector, kind, raw[connector])
        plan = await service.plan_alter(connector, patch)
        if job is not None:
            plan = await _quarantine_first(target, job, plan, dry_run)
        return plan

    results = _with_client(target, lambda: _plan_and_run(service, [make_plan], dry_run))
    _report(results, target.output, dry_run)


@offsets.command("import")
@click.argument("source", type=click.File("r"))
@click.option(
    "--connector",
    default=None,
    help='The connector, for a ConfigMap keyed offsets.json or a bare {"offsets"}.',
)
@_change_options
@connect_options
@reports_errors
def import_(
    source: Any,
    connector: str | None,
    dry_run: bool,
    stop_timeout: float,
    resume_timeout: float,
    **kw: Any,
) -> None:
    """Apply an exported document or Strimzi ConfigMap (file or '-' for stdin).

    A skip-run plan of `offsetd rewind plan` (read from its file, with its .summary.json
    beside it) first copies every record of each skipped run to the quarantine topic; only
    once all copies are acknowledged is anything patched. --dry-run lists the runs.
    """
    job = _skip_run_job(source)
    raw = documents.parse_document(source.read(), connector=connector)
    target = _target(**kw)
    service = _service(target, stop_timeout, resume_timeout)

    async def validated() -> list[tuple[str, Callable[[], Awaitable[Plan]]]]:
        checked: dict[str, list[OffsetEntry]] = {}
        for name, entries in raw.items():  # validate everything before changing anything
            kind, _cls, _status = await service.describe(name)
            checked[name] = documents.validate_entries(name, kind, entries)
        return [(name, _alter_plan(service, name, patch)) for name, patch in checked.items()]

    async def run() -> list[Plan | Outcome]:
        results: list[Plan | Outcome] = []
        for name, make in await validated():
            plan = await make()
            if job is not None and name == job.connector:
                plan = await _quarantine_first(target, job, plan, dry_run)
            results.append(plan if dry_run else await service.execute(plan))
        return results

    _report(_with_client(target, run), target.output, dry_run)


def _alter_plan(
    service: OffsetsService, name: str, patch: list[OffsetEntry]
) -> Callable[[], Awaitable[Plan]]:
    return lambda: service.plan_alter(name, patch)


def _skip_run_job(source: Any) -> SkipRunJob | None:
    """The runs to quarantine when `source` is a skip-run plan file (None: any other input)."""
    name = getattr(source, "name", None)
    if not isinstance(name, str) or name in ("-", "<stdin>"):
        return None
    return skip_run_job_of_file(name)


async def _quarantine_first(target: Target, job: SkipRunJob, plan: Plan, dry_run: bool) -> Plan:
    """Copy every record of the plan's skipped runs to quarantine (or, dry: say what would be);
    raises, with nothing patched, if any copy fails. Returns the plan with notes about it."""
    if plan.kind is not job.kind:
        raise InvalidDocument(
            f"the skip-run plan was computed for a {job.kind} connector, but {job.connector} is "
            f"a {plan.kind} connector now: not applied"
        )
    check_positions(job, plan.before)
    copier, where = await copier_for(
        target.settings, target.client, target.worker, job.connector, job.kind
    )
    runs = [f"skip-run: {line}" for line in job.describe()]
    if dry_run:
        head = (
            f"skip-run: would first copy {job.records:,} records of {len(job.runs)} runs to "
            f"{where} (key {job.key}); nothing is patched unless every copy is acknowledged"
        )
        return dataclasses.replace(plan, notes=(*plan.notes, head, *runs))
    _say(f"skip-run: copying {job.records:,} records of {len(job.runs)} runs to {where} first")
    context = quarantine_context(job, target.name)
    try:
        result = await asyncio.to_thread(copier.copy, job, context)
    except QuarantineFailed as exc:
        raise QuarantineFailed(
            f"the skipped runs of {job.connector} were not all quarantined ({exc}): nothing was "
            "patched; run the import again once that is fixed (copies made are not repeated)"
        ) from None
    _say(f"skip-run: {result.describe()}")
    head = f"skip-run: {result.describe()} before the patch (key {job.key})"
    return dataclasses.replace(plan, notes=(*plan.notes, head, *runs))


@offsets.command()
@click.argument("connector")
@click.option(
    "--mm2",
    is_flag=True,
    help="The connector is a MirrorSourceConnector: reset (or with a target, rewind) "
    "it and verify that it replicates again.",
)
@_target_options
@_change_options
@offline_options
@connect_options
@reports_errors
def reset(
    connector: str,
    mm2: bool,
    to_timestamp: str | None,
    to_earliest: bool,
    to_latest: bool,
    shift_by: int | None,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    include_uncommitted: bool,
    dry_run: bool,
    stop_timeout: float,
    resume_timeout: float,
    **kw: Any,
) -> None:
    """Delete a connector's offsets (with --mm2 and a target: move them) — the safe way."""
    spec = _parse_target(to_timestamp, to_earliest, to_latest, shift_by)
    if spec is not None and not mm2:
        raise click.UsageError("targets go with `offsets alter`, or with `reset --mm2`")
    off = _pop_offline(kw)
    target = _target(**kw)
    if off.pop("offline"):
        if spec is not None or mm2:
            no_targets_offline()
        change_offline(target, connector, None, raw_patch=None, dry_run=dry_run, **off)
        return
    service = _service(target, stop_timeout, resume_timeout)
    selection = Selection(topics, partitions, include_uncommitted)

    async def make_plan() -> Plan:
        if mm2:
            kind, _cls, _status = await service.describe(connector)
            if kind is not ConnectorKind.MIRROR_SOURCE:
                raise InvalidDocument(
                    f"--mm2: {connector} is a {kind} connector, not MirrorSourceConnector"
                )
        if spec is not None:
            patch = await _targeted_patch(target, service, connector, spec, selection)
            return await service.plan_alter(connector, patch)
        return await service.plan_reset(connector)

    async def run() -> list[Plan | Outcome]:
        results = await _plan_and_run(service, [make_plan], dry_run)
        if mm2 and not dry_run:
            outcome = results[0]
            assert isinstance(outcome, Outcome)
            await service.verify_replicating(outcome)
        return results

    _report(_with_client(target, run), target.output, dry_run)


@offsets.command()
@click.argument("snapshot_id")
@click.option("--force", is_flag=True, help="Restore even though the offsets moved since.")
@click.option(
    "--offline",
    is_flag=True,
    help="Write directly to the offsets topic / group (workers down, or --force).",
)
@_change_options
@connect_options
@reports_errors
def undo(
    snapshot_id: str,
    force: bool,
    dry_run: bool,
    stop_timeout: float,
    resume_timeout: float,
    **kw: Any,
) -> None:
    """Restore the before-image of an earlier change exactly."""
    offline = kw.pop("offline")
    target = _target(**kw)
    if offline:
        snap = target.store.get(snapshot_id)
        undo_offline(target, snap, force=force, dry_run=dry_run)
        return
    service = _service(target, stop_timeout, resume_timeout)

    async def make_plan() -> Plan:
        return await service.plan_undo(snapshot_id, force=force)

    results = _with_client(target, lambda: _plan_and_run(service, [make_plan], dry_run))
    _report(results, target.output, dry_run)


@offsets.command()
@click.option("--connector", default=None, help="Only this connector's changes.")
@click.option("--limit", default=50, show_default=True)
@connect_options
@reports_errors
def history(connector: str | None, limit: int, **kw: Any) -> None:
    """The changes offsetd made, newest first, with their undo ids."""
    target = _target(**kw)
    snaps = target.store.list_info(connector=connector, limit=limit)
    run_async(target.client.aclose())
    if target.output == "json":
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
    headers = ["id", "time (utc)", "connector", "operation", "status", "partitions"]
    click.echo(table(headers, rows))
