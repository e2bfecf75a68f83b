"""The daemon's `rewind` action, run: resolve the target, quarantine a skip-run's records,
plan, and hand the change to its durable run (`rewind.saga`) or its recovery.

The target is resolved by the offsets toolkit, never here: a time by one batched ListOffsets
(`offsetd.offsets.retarget.target_patch`, exactly what `offsetd offsets alter --to-timestamp`
does), a plan file by `offsetd.offsets.rewind_plan.load_plan` (its hash checked).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from offsetd.config import Settings
from offsetd.engine import Decision
from offsetd.errors import OffsetdError
from offsetd.offsets.backend import StepwiseBackend
from offsetd.offsets.change import Plan
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, OffsetEntry, same_offsets
from offsetd.offsets.retarget import Selection, target_patch
from offsetd.offsets.rewind_plan import load_plan  # plain JSON: reading a plan needs no pyspark
from offsetd.offsets.targets import Target, TargetKind
from offsetd.remediation.rewind.recovery import recover
from offsetd.remediation.rewind.saga import RewindResult, RewindSaga, entries_json
from offsetd.remediation.rewind.target import RewindSpec, plan_entries, rewind_key, rewind_spec
from offsetd.remediation.sagas import SagaRecord, SagaStore
from offsetd.remediation.skiprun import (
    CopyResult,
    RunCopier,
    SkipRunJob,
    check_positions,
    copier_for,
    quarantine_context,
    skip_run_job,
)

__all__ = ["RewindRunner"]

log = logging.getLogger("offsetd.remediation")


class RewindRunner:
    """Resolves a rewind decision's target and applies it through `StepwiseBackend`, durably."""

    def __init__(
        self,
        settings: Settings,
        *,
        owner: str = "offsetd",
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self.owner = owner
        self.now_ms = now_ms

    async def patch_for(
        self, service: StepwiseBackend, connector: str, spec: RewindSpec
    ) -> list[OffsetEntry]:
        """The entries to write: from the plan file, or the time resolved by ListOffsets."""
        patch, _job = await self.target_for(service, connector, spec)
        return patch

    async def target_for(
        self, service: StepwiseBackend, connector: str, spec: RewindSpec
    ) -> tuple[list[OffsetEntry], SkipRunJob | None]:
        """The entries to write, and for a skip-run plan the runs to quarantine first."""
        kind, _cls, _status = await service.describe(connector)
        if spec.plan_file is not None:
            path = Path(spec.plan_file).expanduser()
            plan = load_plan(path)
            entries = plan_entries(
                plan.connector,
                plan.summary.get("connector_kind"),
                plan.entries,
                connector,
                kind,
                str(path),
            )
            return entries, skip_run_job(plan)
        info = await service.client.info(connector)
        location = resolve_location(
            connector,
            info.config,
            kind,
            worker_view(self.settings, service.connect_cluster),
            self.settings,
        )
        current = await service.client.offsets(connector)
        target = Target(TargetKind.TIMESTAMP, timestamp_ms=spec.timestamp_ms)
        patch = await target_patch(
            kind, info.config, location, current, target, Selection(), self.settings
        )
        return patch, None

    async def copier(
        self, service: StepwiseBackend, connector: str, kind: ConnectorKind
    ) -> tuple[RunCopier, str]:
        """Where a skip-run's records are copied: the skip saga's quarantine topic."""
        worker = worker_view(self.settings, service.connect_cluster)
        return await copier_for(self.settings, service.client, worker, connector, kind)

    async def quarantine_runs(
        self, service: StepwiseBackend, job: SkipRunJob, plan: Plan, decision_id: str
    ) -> CopyResult:
        """Copy every record of a skip-run plan's runs to quarantine, before anything else is
        touched; raises (QuarantineFailed, InvalidDocument) when that cannot be done whole."""
        check_positions(job, plan.before)
        copier, where = await self.copier(service, job.connector, job.kind)
        log.info("%s: quarantining %d skip-run records to %s", job.connector, job.records, where)
        context = quarantine_context(job, service.connect_cluster, decision_id)
        return await asyncio.to_thread(copier.copy, job, context)

    async def run(
        self,
        service: StepwiseBackend,
        store: SagaStore,
        decision: Decision,
        params: Mapping[str, Any],
    ) -> RewindResult:
        """Resolve, plan, snapshot, stop, write, read back, restore; never raises OffsetdError."""
        connector = decision.connector
        try:
            spec = rewind_spec(params)
            patch, job = await self.target_for(service, connector, spec)
            plan = await service.plan_alter(connector, patch)
        except OffsetdError as exc:  # nothing was touched yet
            return RewindResult("aborted", f"rewind of {connector} not started: {exc}")
        copied: CopyResult | None = None
        if job is not None:
            # skip-run: the records it skips are kept whole first; no copy, no change. Also when
            # the offsets are there already (applied before): what is missing is copied now.
            try:
                copied = await self.quarantine_runs(service, job, plan, decision.id)
            except OffsetdError as exc:
                return RewindResult(
                    "aborted",
                    f"rewind of {connector} not started: the skipped runs were not all "
                    f"quarantined ({exc}); nothing was stopped or patched",
                    {"target": spec.describe(), "before": entries_json(plan.before), "after": []},
                )
        quarantined = {} if copied is None or job is None else {"quarantine": _copies(job, copied)}
        if plan.patch is not None and same_offsets(plan.after, plan.before):
            return RewindResult(
                "executed",
                f"{connector} is already at {spec.describe()}: nothing to change",
                {
                    "target": spec.describe(),
                    "before": entries_json(plan.before),
                    "after": [],
                    **quarantined,
                },
            )
        now = self.now_ms()
        record = SagaRecord(
            key=rewind_key(decision.connect_cluster, connector, decision.id),
            kind="rewind",
            connect_cluster=decision.connect_cluster,
            connector=connector,
            decision_id=decision.id,
            rule=decision.rule,
            epoch=1,
            owner=self.owner,
            prior_state=plan.prior_state,
            prior_tasks=plan.prior_tasks,
            connector_kind=str(plan.kind),
            connector_class=plan.connector_class,
            patch=tuple(e.as_json() for e in patch),
            started_at_ms=now,
            updated_at_ms=now,
        )
        result = await RewindSaga(self.now_ms, service, store, record, spec.describe()).run(plan)
        return replace(result, extra={**result.extra, **quarantined}) if quarantined else result

    async def recover(
        self, service: StepwiseBackend, store: SagaStore, record: SagaRecord
    ) -> RewindResult:
        """Finish a rewind an earlier life of the daemon started (see `recovery_step`)."""
        taken = await store.put(replace(record, epoch=record.epoch + 1, owner=self.owner))
        return await recover(RewindSaga(self.now_ms, service, store, taken, "the recorded target"))


def _copies(job: SkipRunJob, copied: CopyResult) -> dict[str, Any]:
    """Where a skip-run's records were quarantined (for the audit record)."""
    return {
        "topic": copied.topic,
        "partition": copied.partition,
        "key": job.key,
        "copied": copied.copied,
        "already": copied.already,
        "runs": job.describe(),
    }
