"""A change of a connector's offsets, as the `rest` backend plans and reports it.

`Plan` is what `--dry-run` prints and `OffsetsService.execute` carries out: the before-image,
the patch (or a reset), the after-image and the notes a reader needs (the MirrorSourceConnector
off-by-one, the offset-syncs topic left alone, a sink reset's restart point). `Outcome` is what
was done. The helpers compare what was written with what Connect reports back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from offsetd.connect.client import FRAMEWORK_ONLY_PREFIX
from offsetd.offsets.model import (
    ConnectorKind,
    DiffLine,
    OffsetEntry,
    apply_patch,
    as_map,
    diff,
)

__all__ = [
    "MM2_OFFSET_SYNCS_NOTE",
    "Outcome",
    "Plan",
    "mismatch",
    "plan_notes",
    "rebased",
    "three_way_text",
    "warnings_of",
]

MM2_OFFSET_SYNCS_NOTE = (
    "the offset-syncs topic is left alone: writing tombstones into mm2-offset-syncs.*.internal "
    "breaks MirrorCheckpointConnector, and after a rewind MirrorSourceConnector emits fresh "
    "syncs for the replayed records itself"
)


@dataclass(frozen=True)
class Plan:
    """What a change will do; printed by --dry-run, executed by `OffsetsService.execute`."""

    connector: str
    operation: str  # alter | reset | undo
    kind: ConnectorKind
    connector_class: str
    prior_state: str
    prior_tasks: int
    before: tuple[OffsetEntry, ...]
    patch: tuple[OffsetEntry, ...] | None  # None: DELETE all offsets (reset)
    after: tuple[OffsetEntry, ...]
    notes: tuple[str, ...] = ()
    undo_of: str | None = None
    route: tuple[str, ...] = ()  # a backend's own steps (Strimzi's resources), else REST's

    @property
    def diff(self) -> list[DiffLine]:
        return diff(self.before, self.after)

    def steps(self) -> list[str]:
        if self.route:
            return list(self.route)
        action = (
            "DELETE all offsets" if self.patch is None else f"PATCH {len(self.patch)} partitions"
        )
        restore = {
            "RUNNING": "resume, and wait until the connector and all its tasks are RUNNING",
            "PAUSED": "pause it again (it was PAUSED)",
            "STOPPED": "leave it STOPPED (it was STOPPED)",
        }[self.prior_state]
        return [
            f"record state {self.prior_state}; snapshot {len(self.before)} partitions (undo image)",
            "stop the connector; wait until STOPPED with no tasks",
            action,
            "read the offsets back and compare",
            restore,
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "operation": self.operation,
            "connector_type": str(self.kind),
            "state": self.prior_state,
            "steps": self.steps(),
            "diff": [line.as_json() for line in self.diff],
            "notes": list(self.notes),
            **({"undo_of": self.undo_of} if self.undo_of else {}),
        }


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    snapshot_id: str
    after: tuple[OffsetEntry, ...]
    final_state: str
    message: str
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "snapshot_id": self.snapshot_id,
            "final_state": self.final_state,
            "connect_message": self.message,
            "warnings": list(self.warnings),
        }


def rebased(plan: Plan, before: tuple[OffsetEntry, ...]) -> Plan:
    after = () if plan.patch is None else tuple(apply_patch(before, plan.patch))
    return replace(plan, before=before, after=after)


def plan_notes(plan: Plan, operation: str) -> tuple[str, ...]:
    notes: list[str] = []
    if plan.kind is ConnectorKind.MIRROR_SOURCE:
        notes.append(
            "MirrorSourceConnector offsets are the last replicated source offset: to restart at "
            "source offset N, offsetd writes N-1 (null to restart at the log start)"
        )
        notes.append(MM2_OFFSET_SYNCS_NOTE)
    if plan.kind is ConnectorKind.SINK and operation == "reset":
        notes.append(
            "a sink reset deletes the consumer group; the connector then starts from its "
            "consumer's auto.offset.reset (Connect's default: earliest), reprocessing retained data"
        )
    return tuple(notes)


def mismatch(plan: Plan, actual: tuple[OffsetEntry, ...]) -> str:
    """Compare what was written with what Connect now reports, for the touched partitions."""
    got = as_map(actual)
    if plan.patch is None:
        return f"{len(got)} partitions remain after the reset" if got else ""
    for entry in plan.patch:
        seen = got.get(entry.key)
        if entry.offset is None and seen is not None:
            return f"{entry.key} should be removed but is {seen.offset}"
        if entry.offset is not None and (seen is None or seen.offset != entry.offset):
            return (
                f"{entry.key} should be {entry.offset} but is {seen.offset if seen else 'absent'}"
            )
    return ""


def warnings_of(plan: Plan, message: str) -> tuple[str, ...]:
    if message.startswith(FRAMEWORK_ONLY_PREFIX):
        return (
            f"Connect changed only its framework-managed offsets of {plan.connector}; if "
            f"{plan.connector_class} keeps offsets elsewhere too, change them there as well",
        )
    return ()


def three_way_text(
    base_before: tuple[OffsetEntry, ...],
    base_after: tuple[OffsetEntry, ...],
    current: tuple[OffsetEntry, ...],
) -> str:
    """Per partition: before the change, right after it, and now (what undo would overwrite)."""
    b, a, c = as_map(base_before), as_map(base_after), as_map(current)
    lines = ["partition | before change | after change | now"]
    for key in sorted(b.keys() | a.keys() | c.keys()):
        cells = [m[key].offset if key in m else "-" for m in (b, a, c)]
        marker = "  (moved)" if cells[1] != cells[2] else ""
        lines.append(f"{key} | {cells[0]} | {cells[1]} | {cells[2]}{marker}")
    return "\n".join(lines)
