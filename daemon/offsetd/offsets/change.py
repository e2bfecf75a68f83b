"""A change of a connector's offsets, as the backends that work through the workers plan and
report it.

`Plan` is what `--dry-run` prints and `ChangeSequence.execute` carries out: the before-image,
the patch (or a reset), the after-image and the notes a reader needs (the MirrorSourceConnector
off-by-one, the offset-syncs topic left alone, a sink reset's restart point). `Outcome` is what
was done. The helpers compare what was written with what Connect reports back.

A patch is what was asked for; what is *written* is only the part of it that changes something
(`Plan.writes`, against the before-image, recomputed when the plan is rebased at rest): a
partition already at its target is unchanged in the dry run, in the PATCH body and in the steps,
and a plan with nothing to write never stops the connector.
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
    "changing",
    "mismatch",
    "nothing_to_change",
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
    """What a change will do; printed by --dry-run, executed by `ChangeSequence.execute`."""

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

    @property
    def writes(self) -> tuple[OffsetEntry, ...] | None:
        """The body of the PATCH: the patch's entries that change the before-image (None: a
        reset, DELETE). Connect would accept the others too, but a body that names partitions
        it does not move says more than it does, in the dry run and in Connect's own log."""
        return None if self.patch is None else changing(self.before, self.patch)

    @property
    def left_out(self) -> tuple[OffsetEntry, ...]:
        """Entries of the patch that are already at their target: not written."""
        if self.patch is None:
            return ()
        written = {e.key for e in self.writes or ()}
        return tuple(e for e in self.patch if e.key not in written)

    def steps(self) -> list[str]:
        if self.route:
            return list(self.route)
        nothing = nothing_to_change(self)
        if nothing is not None:
            return [f"{nothing}: nothing is written, and {self.connector} stays {self.prior_state}"]
        writes = self.writes
        action = "DELETE all offsets" if writes is None else f"PATCH {_partitions(len(writes))}"
        if self.left_out:
            count = len(self.left_out)
            where = "its target" if count == 1 else "their targets"
            action += f" ({count} already at {where}: left out)"
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
            # the body PATCH carries (null: DELETE), and the partitions already at their target
            "patch": None if self.writes is None else [e.as_json() for e in self.writes],
            "left_out": [e.partition for e in self.left_out],
            "notes": list(self.notes),
            **({"undo_of": self.undo_of} if self.undo_of else {}),
        }


@dataclass(frozen=True)
class Outcome:
    """What was done; `snapshot_id` is empty when nothing was (`nothing_to_change`)."""

    plan: Plan
    snapshot_id: str
    after: tuple[OffsetEntry, ...]
    final_state: str
    message: str
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "snapshot_id": self.snapshot_id or None,
            "final_state": self.final_state,
            "offsets_after": [e.as_json() for e in self.after],  # as read back
            "connect_message": self.message,
            "warnings": list(self.warnings),
        }


def changing(
    before: tuple[OffsetEntry, ...], patch: tuple[OffsetEntry, ...]
) -> tuple[OffsetEntry, ...]:
    """The entries of `patch` that change `before`: a new offset, or the removal (null) of a
    partition that has one. The offsets are compared in the connector's own convention, as
    Connect stores and returns them (sink: the next offset; MirrorSourceConnector: the last
    replicated one), so no off-by-one can make an unchanged partition look changed."""
    current = as_map(before)
    out = []
    for entry in patch:
        seen = current.get(entry.key)
        if (seen.offset if seen is not None else None) != entry.offset:
            out.append(entry)
    return tuple(out)


def nothing_to_change(plan: Plan) -> str | None:
    """Why executing `plan` would write nothing (None: it writes something)."""
    if plan.patch is None:
        return None if plan.before else "nothing to change: the connector has no offsets"
    if not plan.patch:
        return "nothing to change: the patch is empty"
    if plan.writes:
        return None
    return f"nothing to change: {_already(len(plan.patch))}"


def _partitions(count: int) -> str:
    return f"{count} partition" + ("" if count == 1 else "s")


def _already(count: int) -> str:
    if count == 1:
        return "its 1 partition is already at its target"
    return f"all {count} partitions are already at their targets"


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
