"""Deciding later what could not be decided right away. Pure: no I/O, time comes in as `now_ms`.

Two things make the engine's answer depend on something it learns after the event:

- **Did the action run?** `decide` applies a planned decision's limits at once (its budget entry,
  cooldown, restart backoff step and `inhibits`), but the executor may then not run it: a guard
  held it (blast radius, pause, opt-out, breaker, allowlist, skip budget), a person rejected it,
  the record could not be located, the saga aborted before changing anything. A decision that did
  not run must not hold other decisions back as if it had. The executor reports each outcome
  (through the events topic, so the connector's owner applies it: one writer), and `settle`
  keeps what the decision took or gives it back (`release`). The decision the released one
  inhibited (`state.held`) is decided again: planned if no other limit holds it now and its
  rule's window still holds its event.
- **What is this connector?** A rule on `connector_type` / `connector_class` cannot match (nor an
  `unless` on them exclude) before the connector's metadata is known, and a failed task sends
  no further status. `decide` keeps such events (`state.deferred`, see `decide.defer`) and
  `redecide_deferred` runs the rules that needed the metadata once it is known, and only those
  (the others counted the event already). An event older than the rule's window by then does not
  fire it, like any late event.

Both are idempotent: a released decision is remembered (`state.released`: a second report
changes nothing), deferred and held entries leave the state when decided, and re-decided
decisions have deterministic ids (the audit keeps each once). The state stays as small as before
when nothing waits: only a decision an inhibition suppressed (the latest per rule, while the
inhibition holds), deferred events and released ids are kept, each list bounded.
"""

from __future__ import annotations

import hashlib
from typing import Any, cast

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from offsetd.engine.counting import new_rule_state
from offsetd.engine.decide import MAX_RELEASED, _match_rules, _plan_action, limits, take
from offsetd.engine.decision import Decision
from offsetd.engine.state import ConnectorState, Held
from offsetd.events.models import Event
from offsetd.rules.matching import RuleSet
from offsetd.rules.models import ConnectorMeta

__all__ = [
    "NOT_RUN_OUTCOMES",
    "PENDING_OUTCOMES",
    "OutcomeNews",
    "did_not_run",
    "outcome_news",
    "redecide_deferred",
    "release",
    "settle",
]

#: Executor outcomes after which nothing was done to the connector: the decision's limits are
#: given back. `failed` is not one (an action was attempted and may have had effects), nor
#: `executed`; `not_needed` is (a restart that found nothing FAILED restarted nothing).
NOT_RUN_OUTCOMES = frozenset(
    {
        "not_located",
        "aborted",
        "suppressed_blast_radius",
        "suppressed_opt_out",
        "suppressed_budget",
        "suppressed_skip_pending",
        "suppressed_auto_restart",
        "breaker_open",
        "refused_not_allowed",
        "refused_strimzi",
        "rejected",
        "not_needed",
    }
)
#: Not an end: the decision may still run (an approval outlives a restart; a paused decision
#: runs after `offsetd resume-automation` if its failure still holds, else `not_needed` gives
#: its limits back then).
PENDING_OUTCOMES = frozenset({"awaiting_approval", "suppressed_paused"})

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def did_not_run(outcome: str, would_be: str | None = None) -> bool:
    """Whether a decision ending with `outcome` left the connector untouched, as enforce mode
    would have: a dry run (observe) is released only when enforce would not have run it either,
    so observe keeps showing exactly what enforce would do."""
    if outcome == "dry_run":
        return would_be in NOT_RUN_OUTCOMES
    return outcome in NOT_RUN_OUTCOMES


class OutcomeNews(TypedDict):
    """The executor's outcome of a planned decision, as the engine needs it (a nudge's body)."""

    decision: str  # its id
    rule: str
    time_ms: int  # its event time: where its budget entry, cooldown and inhibitions start
    attempt: int | None  # the restart backoff attempt it planned (restart-failed-tasks only)
    outcome: str
    would_be: str | None  # observe mode: what enforce would have done


def outcome_news(decision: Decision, outcome: str, would_be: str | None = None) -> OutcomeNews:
    attempt = next(
        (a.params.get("attempt") for a in decision.actions if a.effects.backoff),
        None,
    )
    return {
        "decision": decision.id,
        "rule": decision.rule,
        "time_ms": decision.event_time_ms,
        "attempt": attempt if isinstance(attempt, int) else None,
        "outcome": outcome,
        "would_be": would_be,
    }


def settle(state: ConnectorState, news: OutcomeNews, rules: RuleSet, now_ms: int) -> list[Decision]:
    """Apply the executor's outcome of a planned decision; returns the decisions re-decided.

    Ran: its limits stay, and the decision it inhibited stays suppressed (no longer held).
    Did not run: `release`. Pending (awaiting approval): nothing yet.
    """
    if news["outcome"] in PENDING_OUTCOMES:
        return []
    if not did_not_run(news["outcome"], news["would_be"]):
        if state.held:
            mark = (news["rule"], news["time_ms"])
            state.held = [h for h in state.held if (h["by"], h["since_ms"]) != mark]
        return []
    return release(state, news, rules, now_ms)


def release(
    state: ConnectorState, news: OutcomeNews, rules: RuleSet, now_ms: int
) -> list[Decision]:
    """Give back what the planned decision took, and re-decide the decision it held back.

    Its budget entry and cooldown, its restart backoff step and the inhibitions it set, as far
    as they are still what it left: a later decision's own limits are not touched. Once per
    decision (`state.released`): the nudge read again after a crash changes nothing.

    Approximations, all on the side of the limits the other decisions left: the cooldown goes
    back to the rule's latest remaining execution in its budget window; an inhibition by another
    rule that this one replaced is not restored; a backoff stepped on by later restarts loses
    one step.
    """
    ident = news["decision"]
    if ident in state.released:
        return []
    released = state.released
    if len(released) >= MAX_RELEASED:
        for old in sorted(released, key=released.__getitem__)[: len(released) - MAX_RELEASED + 1]:
            del released[old]
    released[ident] = news["time_ms"]
    _give_back(state, news, rules)
    mark = (news["rule"], news["time_ms"])
    redo = [h for h in state.held if (h["by"], h["since_ms"]) == mark]
    if not redo:
        return []
    state.held = [h for h in state.held if (h["by"], h["since_ms"]) != mark]
    made: list[Decision] = []
    for held in redo:
        decision = _replan(state, held, news, rules, now_ms)
        if decision is not None:
            made.append(decision)
    return made


def _give_back(state: ConnectorState, news: OutcomeNews, rules: RuleSet) -> None:
    name, time_ms = news["rule"], news["time_ms"]
    rule_state = state.rules.get(name)
    if rule_state is not None:
        executed = rule_state["executed"]
        if time_ms in executed:
            executed.remove(time_ms)
        if rule_state["last_executed_ms"] == time_ms and time_ms not in executed:
            rule_state["last_executed_ms"] = max(executed, default=None)
    rule = rules.by_name.get(name)
    if rule is not None and rule.inhibits is not None:
        for target in rule.inhibits.rules:
            current = state.inhibitions.get(target)
            if current is not None and current["by"] == name and current["since_ms"] == time_ms:
                del state.inhibitions[target]  # else set again since by a later decision: kept
    attempt, backoff = news["attempt"], state.restart_backoff
    if attempt is None or backoff is None:
        return
    if backoff["attempts"] == attempt + 1 and backoff["last_ms"] == time_ms:
        # its own step, the latest: back to the attempt it planned (None: to the start)
        state.restart_backoff = {"attempts": attempt, "last_ms": time_ms} if attempt else None
    elif backoff["attempts"] > attempt + 1 and backoff["last_ms"] >= time_ms:
        # later restart decisions stepped on: one step fewer (approximate if it reset since)
        state.restart_backoff = {"attempts": backoff["attempts"] - 1, "last_ms": backoff["last_ms"]}


def _replan(
    state: ConnectorState, held: Held, news: OutcomeNews, rules: RuleSet, now_ms: int
) -> Decision | None:
    """A held decision again, now that its inhibitor is gone: planned, held again (another
    inhibition holds it now), or dropped (its window has passed, or another limit holds it:
    it was audited as suppressed already)."""
    data = held["decision"]
    rule = rules.by_name.get(str(data.get("rule")))
    if rule is None:
        return None
    time_ms = int(data["event_time_ms"])
    if now_ms - time_ms > rule.within_ms:
        return None
    rule_state = state.rules.get(rule.name)
    if rule_state is None:
        rule_state = state.rules[rule.name] = new_rule_state()
    reason, _detail = limits(state, rule, rule_state, time_ms)
    if reason == "inhibited":
        inhibition = state.inhibitions[rule.name]
        state.held.append(
            {"by": inhibition["by"], "since_ms": inhibition["since_ms"], "decision": data}
        )
        return None
    if reason is not None:
        return None
    ident = hashlib.sha256(f"{data['id']}\x1f{news['decision']}".encode()).hexdigest()[:32]
    record = data.get("record")
    actions = [_plan_action(state, action, time_ms, record, True) for action in rule.actions]
    take(state, rule, rule_state, time_ms)
    return Decision.model_validate(
        {
            **data,
            "id": ident,
            "mode": rule.mode,
            "actions": actions,
            "outcome": "planned",
            "reason": None,
            "detail": f"decided again: {news['rule']} decision {news['decision']}, which "
            f"inhibited decision {data['id']}, did not run ({news['outcome']})",
            "decided_at_ms": now_ms,
        }
    )


def redecide_deferred(
    state: ConnectorState,
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Any = None,
) -> tuple[list[Decision], int]:
    """Decide the deferred events now that the connector's metadata is `meta` (None: still
    unknown, nothing happens). Returns the decisions and how many events expired undecided
    (every rule they waited for has its window past them)."""
    if meta is None or not state.deferred:
        return [], 0
    entries, state.deferred = state.deferred, []
    decisions: list[Decision] = []
    expired = 0
    for entry in entries:
        event = _EVENT.validate_python(entry["event"])
        waiting = rules.waiting_for_meta(event)
        if not any(now_ms - entry["time_ms"] <= r.within_ms for r in waiting):
            expired += 1
            continue
        needing = tuple(
            r
            for r in rules.candidates(event, meta)
            if r.needs_meta and (r.dynamic is None or r.dynamic(event, meta))
        )
        if needing:
            made = _match_rules(state, event, needing, meta, now_ms, on_match)
            decisions.extend(cast(list[Decision], made))  # not light: Decisions only
    return decisions, expired
