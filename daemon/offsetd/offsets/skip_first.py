"""Quarantine first, then patch: applying a skip-run plan (`offsetd rewind plan --mode skip-run`).

A skip-run plan moves each partition past runs of records a predicate matched. Those records
are never delivered, so before anything is patched every one of them is copied to the
quarantine topic; only once every copy is acknowledged does the patch go on. This module is
that rule, for any backend's plan: the plan must still be for the connector's kind, the runs
must still start where the connector is, the copy is made (or, dry, described) and the plan
carries notes saying so. What copies the records is given (`RunQuarantine`: the CLI wires the
daemon's quarantine copier), so the toolkit needs no Kafka producer of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from offsetd.errors import InvalidDocument, OffsetdError
from offsetd.offsets.change import Plan
from offsetd.offsets.model import ConnectorKind, OffsetEntry

__all__ = ["RunQuarantine", "RunsToSkip", "quarantine_first"]


class RunsToSkip(Protocol):
    """The runs a skip-run plan skips (`offsetd.remediation.skiprun.SkipRunJob`)."""

    @property
    def connector(self) -> str: ...

    @property
    def kind(self) -> ConnectorKind: ...

    @property
    def key(self) -> str: ...

    @property
    def records(self) -> int: ...

    @property
    def runs(self) -> Sequence[object]: ...

    def describe(self) -> list[str]: ...


class RunQuarantine(Protocol):
    """Copies a plan's runs to the quarantine topic."""

    def check(self, before: Sequence[OffsetEntry]) -> None:
        """Raise when the connector moved since the plan was computed (nothing is copied)."""
        ...

    async def prepare(self) -> str:
        """Ready the copier; where the copies go (for people). Writes nothing."""
        ...

    async def copy(self) -> str:
        """Copy every record of every run (copies made before are not repeated); what was
        done, in words. Raises if any copy was not acknowledged."""
        ...


async def quarantine_first(
    plan: Plan,
    runs: RunsToSkip,
    quarantine: RunQuarantine,
    *,
    dry_run: bool,
    log: Callable[[str], None],
) -> Plan:
    """Copy every record of the plan's skipped runs to quarantine (or, dry: say what would be);
    raises, with nothing patched, if any copy fails. Returns the plan with notes about it."""
    if plan.kind is not runs.kind:
        raise InvalidDocument(
            f"the skip-run plan was computed for a {runs.kind} connector, but {runs.connector} "
            f"is a {plan.kind} connector now: not applied"
        )
    quarantine.check(plan.before)
    where = await quarantine.prepare()
    lines = [f"skip-run: {line}" for line in runs.describe()]
    count = f"{runs.records:,} records of {len(runs.runs)} runs"
    if dry_run:
        head = (
            f"skip-run: would first copy {count} to {where} (key {runs.key}); nothing is "
            "patched unless every copy is acknowledged"
        )
        return dataclasses.replace(plan, notes=(*plan.notes, head, *lines))
    log(f"skip-run: copying {count} to {where} first")
    try:
        done = await quarantine.copy()
    except OffsetdError as exc:
        raise exc.reworded(
            f"the skipped runs of {runs.connector} were not all quarantined ({exc}): nothing was "
            "patched; run the import again once that is fixed (copies made are not repeated)"
        ) from None
    log(f"skip-run: {done}")
    head = f"skip-run: {done} before the patch (key {runs.key})"
    return dataclasses.replace(plan, notes=(*plan.notes, head, *lines))
