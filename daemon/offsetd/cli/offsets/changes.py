"""`offsetd offsets alter`, `import`, `reset` and `undo`: planned, shown, then applied safely.

Each command asks its backend (chosen once, `choose.backend_of`) for a plan and applies it
unless `--dry-run`; a feature the backend does not have (targets, skip-run plans, MM2
verification offline) is refused before anything is read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import click

from offsetd.cli.common import Target, connect_options, reports_errors
from offsetd.cli.offsets.choose import (
    F,
    backend_of,
    offline_options,
    online_backend_of,
    say,
    take_offline,
    target_of,
    with_client,
)
from offsetd.cli.offsets.present import report
from offsetd.errors import InvalidDocument
from offsetd.offsets import documents
from offsetd.offsets.backend import Feature, OfflineOptions, OffsetsBackend, StepwiseBackend
from offsetd.offsets.change import Outcome, Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry
from offsetd.offsets.retarget import Selection
from offsetd.offsets.skip_first import quarantine_first
from offsetd.offsets.targets import Target as OffsetTarget
from offsetd.offsets.targets import TargetKind, parse_timestamp
from offsetd.remediation.skiprun import (
    RunCopier,
    SkipRunJob,
    check_positions,
    copier_for,
    quarantine_context,
    skip_run_job_of_file,
)

__all__ = ["alter", "import_", "reset", "undo"]

AnyBackend = OffsetsBackend[Any, Any]


def _target_options(func: F) -> F:
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


def _change_options(func: F) -> F:
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


def _require(backend: AnyBackend, feature: Feature, wanted: bool) -> None:
    """A feature this backend does not have is refused before anything is read."""
    why = backend.feature_refusal(feature) if wanted else None
    if why is None:
        return
    if feature == "skip-run":
        raise click.UsageError(why)
    raise InvalidDocument(why)


async def _plan_and_run(
    backend: AnyBackend, plans: list[Callable[[], Awaitable[Any]]], dry_run: bool
) -> list[Any]:
    results: list[Any] = []
    for make in plans:
        plan = await make()
        results.append(plan if dry_run else await backend.apply(plan))
    return results


@click.command()
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
    offline = take_offline(kw, dry_run=dry_run)
    target = target_of(**kw)
    job = _skip_run_job(file_)
    backend = backend_of(target, offline, stop_timeout, resume_timeout)
    _require(backend, "targets", spec is not None)
    _require(backend, "skip-run", job is not None)
    selection = Selection(topics, partitions, include_uncommitted)

    async def make_plan() -> Any:
        if spec is not None:
            plan = await backend.plan_target(connector, spec, selection)
        else:
            raw = documents.parse_document(file_.read(), connector=connector)
            plan = await backend.plan_document(connector, raw[connector])
        if job is not None:
            plan = await quarantine_first(
                plan, job, _SkipRunQuarantine(target, job), dry_run=dry_run, log=say
            )
        return plan

    results = with_client(target, lambda: _plan_and_run(backend, [make_plan], dry_run))
    report(backend, results, target.output, dry_run)


@click.command("import")
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
    target = target_of(**kw)
    service = online_backend_of(target, stop_timeout, resume_timeout)

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
                quarantine = _SkipRunQuarantine(target, job)
                plan = await quarantine_first(plan, job, quarantine, dry_run=dry_run, log=say)
            results.append(plan if dry_run else await service.apply(plan))
        return results

    report(service, with_client(target, run), target.output, dry_run)


def _alter_plan(
    service: StepwiseBackend, name: str, patch: list[OffsetEntry]
) -> Callable[[], Awaitable[Plan]]:
    return lambda: service.plan_alter(name, patch)


def _skip_run_job(source: Any) -> SkipRunJob | None:
    """The runs to quarantine when `source` is a skip-run plan file (None: any other input)."""
    name = getattr(source, "name", None)
    if not isinstance(name, str) or name in ("-", "<stdin>"):
        return None
    return skip_run_job_of_file(name)


class _SkipRunQuarantine:
    """The daemon's quarantine copier for a skip-run plan's runs (`offsets.skip_first`)."""

    def __init__(self, target: Target, job: SkipRunJob) -> None:
        self.target = target
        self.job = job
        self.copier: RunCopier | None = None

    def check(self, before: Sequence[OffsetEntry]) -> None:
        check_positions(self.job, before)

    async def prepare(self) -> str:
        target, job = self.target, self.job
        self.copier, where = await copier_for(
            target.settings, target.client, target.worker, job.connector, job.kind
        )
        return where

    async def copy(self) -> str:
        assert self.copier is not None, "prepare() first"
        context = quarantine_context(self.job, self.target.name)
        return (await asyncio.to_thread(self.copier.copy, self.job, context)).describe()


@click.command()
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
    offline = take_offline(kw, dry_run=dry_run)
    target = target_of(**kw)
    backend = backend_of(target, offline, stop_timeout, resume_timeout)
    _require(backend, "targets", spec is not None)
    _require(backend, "mm2-verify", mm2)
    selection = Selection(topics, partitions, include_uncommitted)

    async def make_plan() -> Any:
        if spec is not None:
            plan = await backend.plan_target(connector, spec, selection)
        else:
            plan = await backend.plan_reset(connector)
        if mm2 and plan.kind is not ConnectorKind.MIRROR_SOURCE:
            raise InvalidDocument(
                f"--mm2: {connector} is a {plan.kind} connector, not MirrorSourceConnector"
            )
        return plan

    async def run() -> list[Any]:
        results = await _plan_and_run(backend, [make_plan], dry_run)
        if mm2 and not dry_run:
            await backend.verify_replicating(results[0])
        return results

    report(backend, with_client(target, run), target.output, dry_run)


@click.command()
@click.argument("snapshot_id")
@click.option("--force", is_flag=True, help="Restore even though the offsets moved since.")
@click.option(
    "--offline",
    is_flag=True,
    help="Write directly to the offsets topic / group (workers down, or --force).",
)
@click.option(
    "--kafka-cluster",
    default=None,
    help="The change was a consumer group's (offsetd mm2 failover/failback) on this Kafka "
    "cluster alias: restore the group there.",
)
@_change_options
@connect_options
@reports_errors
def undo(
    snapshot_id: str,
    force: bool,
    kafka_cluster: str | None,
    dry_run: bool,
    stop_timeout: float,
    resume_timeout: float,
    **kw: Any,
) -> None:
    """Restore the before-image of an earlier change exactly."""
    if kafka_cluster is not None:
        from offsetd.cli.mm2 import undo_group_change  # noqa: PLC0415 (only this path needs it)

        undo_group_change(
            snapshot_id,
            kafka_cluster,
            force=force,
            dry_run=dry_run,
            config_path=kw["config_path"],
            snapshot_dir=kw["snapshot_dir"],
            output=kw["output"],
        )
        return
    offline = OfflineOptions(dry_run=dry_run) if kw.pop("offline") else None
    target = target_of(**kw)
    backend = backend_of(target, offline, stop_timeout, resume_timeout)

    async def make_plan() -> Any:
        return await backend.plan_undo(snapshot_id, force=force)

    results = with_client(target, lambda: _plan_and_run(backend, [make_plan], dry_run))
    report(backend, results, target.output, dry_run)
