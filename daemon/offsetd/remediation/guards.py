"""The guardrails: may this decision act now? Pure: no I/O, time comes in as `now_ms`.

`evaluate(decision, ctx)` returns a `Verdict`: an outcome (one of `REMEDIATION_OUTCOMES`, or
`proceed`), the guard that decided and a sentence for the audit and the log. Only a `proceed`
verdict carries a `WritePermit`, and only this module can make one: an executor that demands a
permit before any writing call cannot write for a dry run, a suppressed or an unapproved decision,
whatever its own code paths do.

The guards, in the order they are checked, and why that order:

0. scope -> `suppressed_out_of_scope`: the connector is not in this deployment's scope
   (`offsetd.scope`), or the scope needs its labels and they are not known. First, and for
   every decision (notify-only and observe too): nothing about a connector another deployment
   owns is ours to do or to tell. The daemon drops such connectors' events before the rules;
   this is the defence in depth before any call.
1. engine: the engine already suppressed it (disabled, inhibited, cooldown, rule budget); those
   say the most about the rule and come first so the audit keeps the engine's reason.
2. mode observe -> `dry_run`. The other guards are still evaluated and their verdict is reported
   in the sentence ("enforce would have: ..."), so observe shows what enforce would do.
3. backend -> the offsets backend's own refusal (`offsetd.offsets.registry`): on a cluster
   configured as Strimzi-run without Kubernetes access (`strimzi-manual`), `refused_strimzi` —
   Strimzi would revert a REST stop on its next reconcile, so nothing is done there. With
   access, the `strimzi` backend acts through the resources and refuses nothing here.
4. pause -> `suppressed_paused`: the global kill switch (`offsetd pause`).
5. opt-out -> `suppressed_opt_out`: `remediation.opt_out` globs, or `offsetd opt-out`.
6. breaker -> `breaker_open`: a skip did not help before; a person must reset it.
7. allowlist -> `refused_not_allowed`: offsets are moved (actions whose effects say
   `moves_offsets`: skip-record, rewind) only for classes
   whose offsets Connect owns (`sink` = any sink, plus named classes).
8. blast radius -> `suppressed_blast_radius`: more than `max_failing_connectors` connectors of
   the Connect cluster that are failing now or went FAILED within `blast_radius.within` (or a
   count we could not read) is an outage, not a poison record. A window, not the count now:
   while failing connectors are being restarted, and between a DLQ record and its FAILED
   status, the count now is lowest exactly when many fail at once (`failing_within`).
9. skip budget -> `suppressed_budget`: at most `skip_budget.max` skips per connector per
   `skip_budget.per`, counted from the durable history, across rules.
10. approval (mode approve) -> `awaiting_approval` until approved; `rejected` once rejected.
    Last, so nobody is asked to approve what a guard would refuse anyway.

Guards 3 to 9 protect Connect; a decision none of whose actions declares `writes` in its
`effects` (`offsetd.rules.actions`; notify only) passes them, because telling people is what
should still happen during an outage or a pause.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal, cast

from offsetd.config import RemediationSettings
from offsetd.engine.decision import Decision
from offsetd.offsets.backend import Refusal
from offsetd.outcomes import suppressed_outcome
from offsetd.remediation.control_state import ControlRecord, ControlState, breaker_record
from offsetd.scope import Scope

__all__ = [
    "PROCEED",
    "GuardContext",
    "StatusSample",
    "Verdict",
    "WritePermit",
    "class_allowed",
    "count_failing",
    "evaluate",
    "failing_now",
    "failing_within",
    "open_breaker_if_recent_skip",
]

PROCEED = "proceed"

Guard = Literal[
    "scope",
    "engine",
    "mode",
    "strimzi",
    "pause",
    "opt_out",
    "breaker",
    "allowlist",
    "blast_radius",
    "skip_budget",
    "approval",
    "none",
]


class WritePermit:
    """Proof that the guards let this decision act; only `evaluate` creates one."""

    __slots__ = ("decision_id",)

    def __init__(self, decision_id: str, _token: object) -> None:
        if _token is not _TOKEN:
            raise TypeError("a WritePermit comes only from guards.evaluate")
        self.decision_id = decision_id

    def __repr__(self) -> str:
        return f"WritePermit({self.decision_id})"


_TOKEN = object()


@dataclass(frozen=True)
class GuardContext:
    """What the guards look at, read by the executor at execution time.

    `failing_connectors`: connectors of this Connect cluster failing now or FAILED within
    `blast_radius.within` (`failing_within`); None if it could not be read (then the
    blast-radius gate holds); `failing_names` names them for the audit. `connector_type` is
    Connect's `sink` / `source` / `unknown`.
    """

    settings: RemediationSettings
    control: ControlState
    connector_class: str | None
    connector_type: str | None
    offsets_refusal: Refusal | None  # the offsets backend's: why it must not write here
    failing_connectors: int | None
    now_ms: int
    failing_names: tuple[str, ...] = ()
    # offsetd.scope: the Connect cluster's effective scope (None: `settings.scope`) and the
    # connector's labels (None: not known, which a scope by labels does not act on).
    scope: Scope | None = None
    connector_labels: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Verdict:
    """What to do with a decision now: `outcome`, the `guard` that decided, and why."""

    outcome: str
    guard: Guard
    detail: str
    permit: WritePermit | None = None
    would_be: str | None = None  # observe mode: the outcome enforce would have had

    @property
    def proceed(self) -> bool:
        return self.outcome == PROCEED and self.permit is not None


def evaluate(decision: Decision, ctx: GuardContext) -> Verdict:
    """The verdict for `decision` now (see the module docstring for the order)."""
    scope = ctx.scope or Scope.of(ctx.settings.scope, "remediation.scope")
    owned = scope.check(decision.connector, ctx.connector_labels)
    if owned.in_scope is not True:
        return Verdict("suppressed_out_of_scope", "scope", f"not acting: {owned.detail}")
    if decision.outcome == "suppressed":
        outcome = suppressed_outcome(decision.reason or "disabled")
        why = decision.detail or f"suppressed by the engine ({decision.reason})"
        return Verdict(outcome, "engine", why)
    inner = _protective(decision, ctx)
    if decision.mode == "observe":
        if inner is None:
            would, why = "executed", "every guard would let it act"
        else:
            would, why = inner.outcome, f"{inner.outcome}: {inner.detail}"
        return Verdict(
            "dry_run",
            "mode",
            f"observe mode: nothing was done; enforce would have: {why}",
            would_be=would,
        )
    if inner is not None:
        return inner
    if decision.mode == "approve":
        approval = ctx.control.approval(decision.id)
        if approval is None or approval.status == "pending":
            return Verdict(
                "awaiting_approval",
                "approval",
                f"approve mode: waiting for `offsetd approve {decision.id}` "
                f"(or `offsetd reject {decision.id}`)",
            )
        if approval.status == "rejected":
            return Verdict("rejected", "approval", f"rejected by {approval.by}")
        return Verdict(
            PROCEED,
            "approval",
            f"approved by {approval.by}",
            permit=WritePermit(decision.id, _TOKEN),
        )
    return Verdict(PROCEED, "none", "every guard passed", permit=WritePermit(decision.id, _TOKEN))


def _protective(decision: Decision, ctx: GuardContext) -> Verdict | None:
    """Guards 3-9: the first one that holds the decision back, or None."""
    effects = decision.effects  # what the actions do, as each declares (offsetd.rules.actions)
    if not effects.writes:
        return None
    settings, state = ctx.settings, ctx.control
    cluster, connector = decision.connect_cluster, decision.connector
    refused = ctx.offsets_refusal
    if refused is not None:
        # the backend names its guard (Strimzi's: "strimzi", one of `Guard`)
        return Verdict(refused.outcome, cast(Guard, refused.guard), refused.detail)
    pause = state.paused
    if pause is not None:
        reason = f": {pause.reason}" if pause.reason else ""
        return Verdict(
            "suppressed_paused",
            "pause",
            f"automation paused by {pause.by}{reason} (`offsetd resume-automation` lifts it)",
        )
    glob = next((g for g in settings.opt_out if fnmatchcase(connector, g)), None)
    if glob is not None:
        return Verdict(
            "suppressed_opt_out",
            "opt_out",
            f"connector {connector} matches remediation.opt_out {glob!r}",
        )
    opt_out = state.opt_out(cluster, connector)
    if opt_out is not None:
        return Verdict(
            "suppressed_opt_out",
            "opt_out",
            f"connector {connector} opted out by {opt_out.by} (`offsetd opt-in` lifts it)",
        )
    breaker = state.open_breaker(cluster, connector)
    if breaker is not None:
        return Verdict(
            "breaker_open",
            "breaker",
            f"breaker open for {connector}: {breaker.why} "
            f"(`offsetd breaker reset {connector}` closes it)",
        )
    moving = [a.type for a in decision.actions if a.effects.moves_offsets]
    if moving and not class_allowed(settings, ctx.connector_class, ctx.connector_type):
        shown = ctx.connector_class or "an unknown class"
        return Verdict(
            "refused_not_allowed",
            "allowlist",
            f"{', '.join(moving)} refused: {shown} ({ctx.connector_type or 'unknown'} type) "
            "is not on remediation.skip_allowlist",
        )
    limit = settings.blast_radius.max_failing_connectors
    if ctx.failing_connectors is None:
        return Verdict(
            "suppressed_blast_radius",
            "blast_radius",
            f"could not count failing connectors on {cluster}: acting on none",
        )
    if ctx.failing_connectors > limit:
        names = ctx.failing_names
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        within = settings.blast_radius.within // 1000
        return Verdict(
            "suppressed_blast_radius",
            "blast_radius",
            f"{ctx.failing_connectors} connectors failing on {cluster} now or within the last "
            f"{within} s (limit {limit}){': ' + shown if shown else ''}: an outage, not a poison "
            "record; acting on none",
        )
    if effects.skips_record:
        budget = settings.skip_budget
        used = state.skips_within(cluster, connector, ctx.now_ms, budget.per)
        if used >= budget.max:
            return Verdict(
                "suppressed_budget",
                "skip_budget",
                f"{used} skips of {connector} within {budget.per // 1000} s "
                f"(skip_budget.max {budget.max})",
            )
    return None


def count_failing(expanded: Mapping[str, Any]) -> int:
    """Connectors with the connector or any task FAILED, from `GET /connectors?expand=status`."""
    return len(failing_now(expanded))


def failing_now(expanded: Mapping[str, Any]) -> set[str]:
    """The connectors with the connector or any task FAILED in `GET /connectors?expand=status`."""
    names: set[str] = set()
    for name, entry in expanded.items():
        status = entry.get("status") or {}
        states = [status.get("connector", {}).get("state")]
        states += [t.get("state") for t in status.get("tasks", [])]
        if "FAILED" in states:
            names.add(str(name))
    return names


@dataclass(frozen=True)
class StatusSample:
    """One connector or task status record: whose, which state (None: a tombstone), when."""

    connector: str
    state: str | None
    time_ms: int


def failing_within(
    samples: Iterable[StatusSample],
    now_ms: int,
    within_ms: int,
    *,
    existing: Collection[str],
    failing: Iterable[str] = (),
) -> set[str]:
    """The connectors the blast radius counts: failing now (`failing`, from REST), or with a
    FAILED status record in the last `within_ms` — among the connectors that still exist
    (`existing`: a deleted connector's old failures are no outage of this cluster).

    A connector counts once however often it failed: one connector failing in a loop is a
    poison record, many connectors failing are an outage.
    """
    since = now_ms - within_ms
    names = {name for name in failing if name in existing}
    for sample in samples:
        if sample.state == "FAILED" and sample.time_ms >= since and sample.connector in existing:
            names.add(sample.connector)
    return names


def class_allowed(
    settings: RemediationSettings, connector_class: str | None, connector_type: str | None
) -> bool:
    """May this connector's offsets be moved: a class glob matches, or `sink` for a sink."""
    for pattern in settings.skip_allowlist:
        if pattern == "sink":
            if connector_type == "sink":
                return True
        elif connector_class is not None and fnmatchcase(connector_class, pattern):
            return True
    return False


def open_breaker_if_recent_skip(
    state: ControlState,
    settings: RemediationSettings,
    connect_cluster: str,
    connector: str,
    failure_at_ms: int,
    *,
    record: str | None = None,
    decision_id: str | None = None,
    by: str = "offsetd",
) -> ControlRecord | None:
    """The breaker record to write if this failure came within `breaker_window` after a skip
    and did not move: it names (`record`, `topic-partition@offset`, from a DLQ record) the
    record the last skip moved past, or one before it on that partition.

    A failure at or before the last skip is the one that was skipped (or older): it does not
    count. A failure at a later record is a new poison record, not proof that the skip failed
    (a run of bad records is handled by the skip itself, `offsetd.remediation.poison_run`);
    a failure that names no record is judged where it is located (a skip of a record already
    skipped opens the breaker there). None if the breaker is already open, no skip is recent
    enough, or the failure moved.
    """
    if state.open_breaker(connect_cluster, connector) is not None:
        return None
    last = state.last_skip(connect_cluster, connector)
    if last is None or failure_at_ms <= last:
        return None
    since = failure_at_ms - last
    if since > settings.breaker_window:
        return None
    skipped = state.last_skipped.get((connect_cluster, connector))
    if not _at_or_before(record, skipped):
        return None
    return breaker_record(
        connect_cluster,
        connector,
        open=True,
        by=by,
        at_ms=failure_at_ms,
        why=f"failed again {since / 1000:.1f} s after a skip, at {record} (the skip moved past "
        f"{skipped}; breaker_window {settings.breaker_window // 1000} s): the failure did not "
        "move, the skip did not help",
        decision_id=decision_id,
    )


def _at_or_before(failure: str | None, skipped: str | None) -> bool:
    """Whether `failure` (`topic-partition@offset`) is on the partition of `skipped` and not
    after it. Unknown either way: False (the failure is judged where it is located)."""
    if failure is None or skipped is None:
        return False
    failed_tp, _, failed_offset = failure.rpartition("@")
    skipped_tp, _, skipped_offset = skipped.rpartition("@")
    try:
        return failed_tp == skipped_tp and int(failed_offset) <= int(skipped_offset)
    except ValueError:
        return False
