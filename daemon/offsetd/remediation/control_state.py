"""The guard state that must outlive the daemon, as pure values: keys, records and their fold.

`ControlState` is built from the control topic's records (`offsetd.remediation.control` reads
and writes them) and queried by the guards: the global pause, breakers, approvals, recent skips
and opt-outs. The `*_record` functions make the records a write sends. No I/O here.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "PAUSE_KEY",
    "Approval",
    "ApprovalStatus",
    "Breaker",
    "ControlRecord",
    "ControlState",
    "OptOut",
    "Pause",
    "approval_key",
    "approval_record",
    "breaker_key",
    "breaker_record",
    "current_user",
    "optout_key",
    "optout_record",
    "pause_record",
    "skips_key",
    "skips_record",
]

PAUSE_KEY = "pause"
ApprovalStatus = Literal["pending", "approved", "rejected"]


def breaker_key(connect_cluster: str, connector: str) -> str:
    return f"breaker/{connect_cluster}/{connector}"


def approval_key(decision_id: str) -> str:
    return f"approval/{decision_id}"


def skips_key(connect_cluster: str, connector: str) -> str:
    return f"skips/{connect_cluster}/{connector}"


def optout_key(connect_cluster: str, connector: str) -> str:
    return f"optout/{connect_cluster}/{connector}"


def current_user() -> str:
    """The OS user, for `by` when no `--by` is given (records say who acted)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


# -- state --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControlRecord:
    """One record to write: the key and its JSON value. Pure helpers return these."""

    key: str
    value: dict[str, Any]

    def encoded(self) -> tuple[bytes, bytes]:
        return self.key.encode(), json.dumps(self.value, sort_keys=True).encode()


@dataclass(frozen=True)
class Pause:
    paused: bool
    by: str
    at_ms: int
    reason: str = ""


@dataclass(frozen=True)
class Breaker:
    connect_cluster: str
    connector: str
    open: bool
    at_ms: int
    why: str
    decision_id: str | None
    by: str


@dataclass(frozen=True)
class Approval:
    decision_id: str
    status: ApprovalStatus
    rule: str
    connect_cluster: str
    connector: str
    summary: str
    requested_at_ms: int
    by: str | None = None  # who approved or rejected
    at_ms: int | None = None  # when


@dataclass(frozen=True)
class OptOut:
    connect_cluster: str
    connector: str
    opted_out: bool
    by: str
    at_ms: int
    reason: str = ""


@dataclass
class ControlState:
    """The latest value of every control key, with the queries the guards need.

    `apply` takes records in topic order and is idempotent (a key's latest value wins), so
    reading a record twice (our own write, then `catch_up`) changes nothing.
    """

    pause: Pause | None = None
    breakers: dict[tuple[str, str], Breaker] = field(default_factory=dict)
    approvals: dict[str, Approval] = field(default_factory=dict)
    skips: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)
    # the record the connector's last skip moved past, as `topic-partition@offset`
    last_skipped: dict[tuple[str, str], str] = field(default_factory=dict)
    optouts: dict[tuple[str, str], OptOut] = field(default_factory=dict)
    ignored: int = 0  # records that could not be understood (kept out of the state, counted)

    # -- building -------------------------------------------------------------------------------

    def apply(self, key: str, value: Mapping[str, Any] | None) -> None:
        """Fold one record in. Unknown keys and malformed values are counted, never fatal."""
        try:
            self._apply(key, value)
        except (KeyError, TypeError, ValueError):
            self.ignored += 1

    def apply_record(self, record: ControlRecord) -> None:
        self.apply(record.key, record.value)

    def _apply(self, key: str, value: Mapping[str, Any] | None) -> None:
        kind, _, rest = key.partition("/")
        if kind == PAUSE_KEY and not rest:
            self.pause = None if value is None else _pause(value)
            return
        if kind == "approval" and rest:
            if value is None:
                self.approvals.pop(rest, None)
            else:
                self.approvals[rest] = _approval(rest, value)
            return
        cluster, sep, connector = rest.partition("/")
        if not sep or not cluster or not connector:
            raise ValueError(key)
        where = (cluster, connector)
        if kind == "breaker":
            if value is None:
                self.breakers.pop(where, None)
            else:
                self.breakers[where] = _breaker(cluster, connector, value)
        elif kind == "skips":
            if value is None:
                self.skips.pop(where, None)
                self.last_skipped.pop(where, None)
            else:
                self.skips[where] = tuple(sorted(int(t) for t in value["times_ms"]))
                if isinstance(value.get("last_record"), str):
                    self.last_skipped[where] = value["last_record"]
        elif kind == "optout":
            if value is None:
                self.optouts.pop(where, None)
            else:
                self.optouts[where] = _optout(cluster, connector, value)
        else:
            raise ValueError(key)

    # -- queries --------------------------------------------------------------------------------

    @property
    def paused(self) -> Pause | None:
        """The pause record while automation is paused, else None."""
        return self.pause if self.pause is not None and self.pause.paused else None

    def open_breaker(self, connect_cluster: str, connector: str) -> Breaker | None:
        breaker = self.breakers.get((connect_cluster, connector))
        return breaker if breaker is not None and breaker.open else None

    def open_breakers(self) -> list[Breaker]:
        return sorted(
            (b for b in self.breakers.values() if b.open),
            key=lambda b: (b.connect_cluster, b.connector),
        )

    def approval(self, decision_id: str) -> Approval | None:
        return self.approvals.get(decision_id)

    def pending_approvals(self) -> list[Approval]:
        return sorted(
            (a for a in self.approvals.values() if a.status == "pending"),
            key=lambda a: (a.requested_at_ms, a.decision_id),
        )

    def skip_times(self, connect_cluster: str, connector: str) -> tuple[int, ...]:
        return self.skips.get((connect_cluster, connector), ())

    def skips_within(self, connect_cluster: str, connector: str, now_ms: int, per_ms: int) -> int:
        """Skips of this connector in the window (now - per, now]: what the budget counts."""
        return sum(1 for t in self.skip_times(connect_cluster, connector) if now_ms - t < per_ms)

    def last_skip(self, connect_cluster: str, connector: str) -> int | None:
        times = self.skip_times(connect_cluster, connector)
        return times[-1] if times else None

    def opt_out(self, connect_cluster: str, connector: str) -> OptOut | None:
        """The opt-out record while the connector is opted out (by `offsetd opt-out`)."""
        record = self.optouts.get((connect_cluster, connector))
        return record if record is not None and record.opted_out else None

    def opted_out(self) -> list[OptOut]:
        return sorted(
            (o for o in self.optouts.values() if o.opted_out),
            key=lambda o: (o.connect_cluster, o.connector),
        )


def _pause(value: Mapping[str, Any]) -> Pause:
    return Pause(
        paused=bool(value["paused"]),
        by=str(value["by"]),
        at_ms=int(value["at_ms"]),
        reason=str(value.get("reason") or ""),
    )


def _breaker(cluster: str, connector: str, value: Mapping[str, Any]) -> Breaker:
    decision = value.get("decision_id")
    return Breaker(
        connect_cluster=cluster,
        connector=connector,
        open=bool(value["open"]),
        at_ms=int(value["at_ms"]),
        why=str(value.get("why") or ""),
        decision_id=None if decision is None else str(decision),
        by=str(value["by"]),
    )


def _approval(decision_id: str, value: Mapping[str, Any]) -> Approval:
    status = value["status"]
    if status not in ("pending", "approved", "rejected"):
        raise ValueError(status)
    by, at = value.get("by"), value.get("at_ms")
    return Approval(
        decision_id=decision_id,
        status=status,
        rule=str(value["rule"]),
        connect_cluster=str(value["connect_cluster"]),
        connector=str(value["connector"]),
        summary=str(value.get("summary") or ""),
        requested_at_ms=int(value["requested_at_ms"]),
        by=None if by is None else str(by),
        at_ms=None if at is None else int(at),
    )


def _optout(cluster: str, connector: str, value: Mapping[str, Any]) -> OptOut:
    return OptOut(
        connect_cluster=cluster,
        connector=connector,
        opted_out=bool(value["opted_out"]),
        by=str(value["by"]),
        at_ms=int(value["at_ms"]),
        reason=str(value.get("reason") or ""),
    )


# -- records (pure: what to write) --------------------------------------------------------------


def pause_record(paused: bool, by: str, at_ms: int, reason: str = "") -> ControlRecord:
    return ControlRecord(PAUSE_KEY, {"paused": paused, "by": by, "at_ms": at_ms, "reason": reason})


def breaker_record(
    connect_cluster: str,
    connector: str,
    *,
    open: bool,
    by: str,
    at_ms: int,
    why: str,
    decision_id: str | None = None,
) -> ControlRecord:
    return ControlRecord(
        breaker_key(connect_cluster, connector),
        {"open": open, "by": by, "at_ms": at_ms, "why": why, "decision_id": decision_id},
    )


def approval_record(approval: Approval) -> ControlRecord:
    return ControlRecord(
        approval_key(approval.decision_id),
        {
            "status": approval.status,
            "rule": approval.rule,
            "connect_cluster": approval.connect_cluster,
            "connector": approval.connector,
            "summary": approval.summary,
            "requested_at_ms": approval.requested_at_ms,
            "by": approval.by,
            "at_ms": approval.at_ms,
        },
    )


def skips_record(
    state: ControlState,
    connect_cluster: str,
    connector: str,
    at_ms: int,
    keep_ms: int,
    record: str | None = None,
) -> ControlRecord:
    """The connector's skip history with one more skip at `at_ms`, pruned to `keep_ms`, and the
    record it moved past (`topic-partition@offset`, what the breaker compares a failure with).

    The whole list goes in one record because compaction keeps only a key's latest value; one
    writer per connector (the daemon's partitioning) makes read-modify-write safe.
    """
    times = [t for t in state.skip_times(connect_cluster, connector) if at_ms - t < keep_ms]
    times.append(at_ms)
    value: dict[str, Any] = {"times_ms": sorted(times)}
    if record is not None:
        value["last_record"] = record
    return ControlRecord(skips_key(connect_cluster, connector), value)


def optout_record(
    connect_cluster: str, connector: str, *, opted_out: bool, by: str, at_ms: int, reason: str = ""
) -> ControlRecord:
    return ControlRecord(
        optout_key(connect_cluster, connector),
        {"opted_out": opted_out, "by": by, "at_ms": at_ms, "reason": reason},
    )


# -- the store ----------------------------------------------------------------------------------
