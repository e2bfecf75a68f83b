"""What a rewind moves to, checked before anything is touched (pure).

A rewind action names exactly one of a time or a plan file (`rewind_spec`); a plan file is
applied only to the very connector (and kind) it was computed for (`plan_entries`). A refusal
here (`RewindRefused`) means nothing was touched. The I/O that resolves a time to offsets is
the toolkit's (`offsetd.offsets.retarget`), called by the runner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offsetd.errors import InvalidDocument, OffsetdError
from offsetd.offsets.model import ConnectorKind, OffsetEntry
from offsetd.offsets.targets import Target, TargetKind, parse_timestamp

__all__ = [
    "REWIND_STEPS",
    "RewindRefused",
    "RewindSpec",
    "plan_entries",
    "rewind_key",
    "rewind_spec",
]

#: The rewind's durable steps, in order (the saga record's `completed`).
REWIND_STEPS = ("snapshot", "stop", "patch", "resume")


class RewindRefused(OffsetdError):
    """The rewind cannot be done as asked (bad target, a plan for another connector, ...);
    nothing was touched."""

    exit_code = 55


def rewind_key(connect_cluster: str, connector: str, decision_id: str) -> str:
    """One saga per decision: a rule may rewind the same connector again, later."""
    return f"rewind/{connect_cluster}/{connector}/{decision_id}"


@dataclass(frozen=True)
class RewindSpec:
    """Exactly one of a time (epoch ms) or a plan file, from the decision's action params."""

    timestamp_ms: int | None = None
    plan_file: str | None = None

    def describe(self) -> str:
        if self.plan_file is not None:
            return f"the plan {self.plan_file}"
        return Target(TargetKind.TIMESTAMP, timestamp_ms=self.timestamp_ms).describe()


def rewind_spec(params: Mapping[str, Any]) -> RewindSpec:
    """The target of a rewind action (`to_timestamp_ms` or `to_timestamp`, or `plan_file`).

    The rule model already demands exactly one; this checks again because a decision may come
    from the audit topic (recovery) or a hand-written file, not only from a validated rule.
    """
    plan = params.get("plan_file")
    stamp: int | None = None
    raw_ms = params.get("to_timestamp_ms")
    if raw_ms is not None:
        if isinstance(raw_ms, bool) or not isinstance(raw_ms, int) or raw_ms < 0:
            raise RewindRefused(f"rewind: to_timestamp_ms {raw_ms!r} is not epoch milliseconds")
        stamp = raw_ms
    elif params.get("to_timestamp") is not None:
        try:
            stamp = parse_timestamp(str(params["to_timestamp"]))
        except InvalidDocument as exc:
            raise RewindRefused(
                f"rewind: {exc}".replace("--to-timestamp", "to_timestamp")
            ) from None
    if (stamp is None) == (plan is None):
        raise RewindRefused("rewind: give exactly one of to_timestamp or plan_file")
    if plan is not None and (not isinstance(plan, str) or not plan.strip()):
        raise RewindRefused(f"rewind: plan_file {plan!r} is not a path")
    return RewindSpec(stamp, plan)


def plan_entries(
    plan_connector: str,
    plan_kind: str | None,
    entries: Sequence[OffsetEntry],
    connector: str,
    kind: ConnectorKind,
    source: str,
) -> list[OffsetEntry]:
    """The patch of a loaded plan, once it is certain the plan is for this very connector.

    A plan computed for another connector (or another kind of connector under the same name)
    would move offsets that mean something else: refused, nothing touched.
    """
    if plan_connector != connector:
        raise RewindRefused(
            f"{source} is the rewind plan of {plan_connector}, not of {connector}: not applied"
        )
    if plan_kind is not None and plan_kind != str(kind):
        raise RewindRefused(
            f"{source} was computed for a {plan_kind} connector, but {connector} is a {kind} "
            "connector now: not applied"
        )
    if not entries:
        raise RewindRefused(f"{source} changes no partition of {connector}: nothing to rewind")
    return list(entries)
