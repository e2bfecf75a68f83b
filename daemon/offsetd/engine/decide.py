"""`decide`: one event, one connector's state, the rules -> the new state and decisions.

Pure and deterministic: time comes in as `now_ms`, event time from the event's source record,
and nothing here does I/O. The steps, for each event:

1. idempotency: an event at or below the highest offset already processed for its source
   partition is ignored completely (a replay after a crash is never counted twice);
2. status: connector and task status records update the current status (tombstones remove);
3. matching: the rules indexed for the event's kind (and state) run their conditions;
4. staleness: an event older than a rule's window when it arrives (now - event time >
   within) never fires that rule; it is not counted either;
5. counting: the event joins the rule's window for its count key; the `count`-th event
   within the window fires, and the firing consumes the window;
6. limits: a firing becomes a decision, `planned` or `suppressed` (disabled, inhibited,
   cooldown, budget, checked in that order). Only planned decisions use up cooldown and
   budget, advance the restart backoff, and inhibit other rules; one whose action then did
   not run gives them back (`offsetd.engine.later.release`), and the decision it inhibited
   meanwhile is decided again. `mode` never suppresses: observe-mode decisions are planned
   and flagged, so observe shows exactly what enforce would do.

Rules that read the connector's class or type (in a condition or an `unless`) cannot see an
event while the metadata is unknown: such an event is kept (`defer`) and decided by those rules
once it is known (`offsetd.engine.later.redecide_deferred`), never dropped in silence.

Why one module of ~600 lines: the steps above work on one connector's state within one event,
and their order is the semantics (idempotency before counting, staleness before the window,
limits before taking); they are kept in reading order so that a step is read next to the ones it
depends on. What stands alone lives beside it: `counting`, `later`, `tally`, `decision`,
`state`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from offsetd.engine.counting import (
    add_to_window,
    backoff_delay,
    budget_used,
    evict_stalest,
    new_rule_state,
    next_backoff,
    prune_times,
    prune_window,
    record_executed,
)
from offsetd.engine.decision import (
    Decision,
    EventSummary,
    Firing,
    Reason,
    Suppression,
    decision_id,
)
from offsetd.engine.state import ConnectorState, RuleState, WindowEntry
from offsetd.events.models import EventKind, RecordRef
from offsetd.rules.matching import AnyEvent, CompiledAction, CompiledRule, RuleSet
from offsetd.rules.models import ConnectorMeta
from offsetd.rules.ruleset import task_id_of as _task_id_of

__all__ = ["decide", "decide_firings", "defer", "new_episode", "note_acted", "prune"]

SWEEP_EVERY_MS = 60_000  # event time between two pruning sweeps of a connector's state
# Count keys kept per rule and connector. A DLQ flood of distinct records must not grow the
# state (one faust Table value) without bound: beyond this, keys seen once and longest ago
# are dropped first (see counting.evict_stalest).
MAX_KEYS = 128
# Bounds of the lists that make decisions wait (state.py): a few entries each in practice.
MAX_HELD = 16
MAX_DEFERRED = 32
MAX_RELEASED = 64


# -- decide -------------------------------------------------------------------------------------


def decide(
    state: ConnectorState,
    event: AnyEvent,
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Callable[[str], None] | None = None,
) -> tuple[ConnectorState, list[Decision]]:
    """Apply one event of this connector; returns the (updated in place) state and decisions.

    `on_match(rule_name)` is told of every rule whose conditions hold for a live event (metrics).
    """
    made = _decide(state, event, rules, meta, now_ms, on_match, light=False)
    return state, made  # type: ignore[return-value]  # light=False: Decisions only


def decide_firings(
    state: ConnectorState,
    event: AnyEvent,
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Callable[[str], None] | None = None,
) -> list[Firing]:
    """`decide` as the daemon runs it: the same state and firings, but those suppressed by
    cooldown, budget or `enabled: false` come as a light `Suppression` (what their tally
    reads) instead of a `Decision`."""
    return _decide(state, event, rules, meta, now_ms, on_match, light=True)


def _decide(
    state: ConnectorState,
    event: Any,  # AnyEvent; read by kind
    rules: RuleSet,
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Callable[[str], None] | None,
    *,
    light: bool,
) -> list[Firing]:
    source = event.source
    partition_key = f"{source.topic}:{source.partition}"
    offsets = state.offsets
    seen = offsets.get(partition_key)
    offset = source.offset
    if seen is not None and offset <= seen:
        return []
    offsets[partition_key] = offset
    time_ms = source.timestamp_ms
    # The fields' own dict: pydantic's __setattr__ costs ~1 us, and these are plain ints/strs
    # of a model without validate_assignment.
    fields = state.__dict__
    watermark = fields["watermark_ms"]
    if watermark is None or time_ms > watermark:
        fields["watermark_ms"] = time_ms
    if not fields["connector"]:
        state.connect_cluster, state.connector = event.connect_cluster, event.connector

    kind = event.kind
    if kind is _TASK:  # step 2, inline for the most frequent kind (see _update_status)
        status = event.state
        if status is None:
            state.tasks.pop(event.task_id, None)
        else:
            state.tasks[event.task_id] = {
                "state": status,
                "generation": event.generation,
                "worker_id": event.worker_id,
                "time_ms": time_ms,
            }
    elif kind is _CONNECTOR:
        _update_status(state, event, time_ms)
    elif kind is _PROGRESS and not new_episode(state, event):
        return []

    if time_ms >= fields["next_sweep_ms"]:
        prune(state, rules)
        fields["next_sweep_ms"] = time_ms + SWEEP_EVERY_MS

    matched = rules.matched(event, meta)
    if matched:
        decisions = _match_rules(state, event, matched, meta, now_ms, on_match, light=light)
        if decisions and kind is _PROGRESS:
            note_acted(state, event, decisions)
    else:
        decisions = []
    if meta is None and rules.meta_rules:
        defer(state, event, rules, now_ms)
    return decisions


def _match_rules(
    state: ConnectorState,
    event: Any,
    matched: tuple[CompiledRule, ...],
    meta: ConnectorMeta | None,
    now_ms: int,
    on_match: Callable[[str], None] | None,
    *,
    light: bool = False,
) -> list[Firing]:
    """Steps 3 to 6 for `matched` (the event's rules whose conditions hold, in load order:
    `RuleSet.live`): staleness, count, fire.

    What every rule of the event shares (its window entry, its age, the rules' states) is read
    once; the common case of the window, an event at or after its newest entry, is inline.
    """
    decisions: list[Firing] = []
    source = event.source
    time_ms = source.timestamp_ms
    age = now_ms - time_ms
    record = _record_text(event) if event.kind is _DLQ else None
    entry: WindowEntry = (time_ms, source.topic, source.partition, source.offset, record)
    rule_states = state.rules
    trigger: list[EventSummary] = []  # built by the first firing, shared by the others
    for rule in matched:
        within = rule.within_ms
        if age > within:
            continue  # stale: a replayed or late record never fires (nor counts)
        name = rule.name
        if on_match is not None:
            on_match(name)
        if record is None and rule.keys_record:
            continue  # counted per record, and this event names none (DLQ without headers)
        rule_state = rule_states.get(name)
        if rule_state is None:
            rule_state = rule_states[name] = new_rule_state()
        key = rule.keyer(event, record)
        windows = rule_state["windows"]
        entries = windows.get(key)
        if entries is None:
            if len(windows) >= MAX_KEYS:  # room first: a new key, still empty, ranks stalest
                evict_stalest(windows, MAX_KEYS // 2)
            entries = windows[key] = []
        if not entries or time_ms >= entries[-1][0]:  # in order: add_to_window, nothing to sort
            entries.append(entry)
            if entries[0][0] < time_ms - within:
                prune_window(entries, within)
        elif not add_to_window(entries, entry, within):
            continue
        if len(entries) < rule.count:
            continue
        counted = list(entries)
        del windows[key]  # the firing consumes the window
        decisions.append(
            _fire(state, rule, rule_state, event, key, counted, now_ms, trigger, light)
        )
    return decisions


def defer(state: ConnectorState, event: Any, rules: RuleSet, now_ms: int) -> bool:
    """Keep `event` for later if a rule that needs the (unknown) metadata could match it.

    Only while that rule's window still holds the event (a replayed old event is not kept),
    and at most `MAX_DEFERRED` per connector (the oldest go first). `redecide_deferred` runs
    those rules, and only those: the others counted the event already. True if kept.
    """
    time_ms = event.source.timestamp_ms
    if not any(now_ms - time_ms <= r.within_ms for r in rules.waiting_for_meta(event)):
        return False
    # A DLQ event without its headers: no rule reads them, and the stack trace is large.
    data = event.model_dump(mode="json", exclude={"headers"} if event.kind is _DLQ else None)
    deferred = state.deferred
    if len(deferred) >= MAX_DEFERRED:
        del deferred[: len(deferred) - MAX_DEFERRED + 1]
    deferred.append({"time_ms": time_ms, "deferred_ms": now_ms, "event": data})
    return True


def new_episode(state: ConnectorState, event: Any) -> bool:
    """Whether the rules should see this progress event (and, if so, it is recorded).

    The collector sends a state that is not `ok` every cycle while it holds, and after a daemon
    restart it finds the same stall again. The rules see an *episode* once: a state under one
    status record of the task (else of the connector). A restart, a rebalance or a resume
    writes a new status record, so a stall after it is a new episode — once that status has
    held for the event's `grace_ms` (the first interval after a restart, a rebalance or a
    creation is never stuck). A task that hangs before it writes any status never gets a new
    record, so a restart offsetd planned in the episode also ends it, `grace_ms` after the
    restart's time (`note_acted`): still stuck after a restart is news, and the rules' budgets
    must be able to run out. The episodes live in the connector's state, which survives a
    daemon restart. `ok` ends an episode.
    """
    task_key = _task_key(event)
    status_ms = _status_ms(state, event)
    if event.progress == "ok":
        return state.progress.pop(task_key, None) is not None
    time_ms = event.source.timestamp_ms
    if time_ms - status_ms < event.grace_ms:
        return False  # the status is too fresh to judge: the collector says it again
    episode = f"{event.progress}@{status_ms}"
    previous = state.progress.get(task_key)
    if previous is not None:
        seen, _, acted = previous.rpartition("@")
        if seen == episode and (not acted or time_ms - int(acted) < event.grace_ms):
            return False
    state.progress[task_key] = f"{episode}@"
    return True


def note_acted(state: ConnectorState, event: Any, made: list[Firing]) -> None:
    """A restart planned for this episode: it ends `grace_ms` after the restart's time."""
    for decision in made:
        if not isinstance(decision, Decision) or decision.outcome != "planned":
            continue
        for action in decision.actions:
            if action.effects.backoff:
                task_key = _task_key(event)
                episode = f"{event.progress}@{_status_ms(state, event)}"
                when = int(action.params.get("not_before_ms") or event.source.timestamp_ms)
                state.progress[task_key] = f"{episode}@{when}"
                return


def _task_key(event: Any) -> str:
    return "" if event.task_id is None else str(event.task_id)


def _status_ms(state: ConnectorState, event: Any) -> int:
    status = state.tasks.get(event.task_id) if event.task_id is not None else None
    if status is None:
        status = state.connector_status
    return status["time_ms"] if status is not None else 0


def _update_status(state: ConnectorState, event: Any, time_ms: int) -> None:
    status = event.state
    entry = None
    if status is not None:
        entry = {
            "state": status,
            "generation": event.generation,
            "worker_id": event.worker_id,
            "time_ms": time_ms,
        }
    if event.kind is _TASK:
        if entry is None:
            state.tasks.pop(event.task_id, None)
        else:
            state.tasks[event.task_id] = entry  # type: ignore[assignment]
        return
    state.__dict__["connector_status"] = entry  # as pydantic's __setattr__ does, ~2 us less
    state.__pydantic_fields_set__.add("connector_status")
    inhibitions = state.inhibitions
    if not inhibitions:
        return
    # A remediation that went through (STOPPED, then RUNNING) ends the inhibitions it set.
    for name, inhibition in list(inhibitions.items()):
        if time_ms < inhibition["since_ms"]:
            continue
        if status == "STOPPED":
            inhibition["stopped"] = True
        elif status == "RUNNING" and inhibition["stopped"]:
            del inhibitions[name]


def _record_text(event: Any) -> str | None:
    record = getattr(event, "record", None)
    if record is None or not isinstance(record, RecordRef):
        return None
    return f"{record.topic}-{record.partition}@{record.offset}"


def _record_dict(text: str) -> dict[str, Any]:
    rest, _, offset = text.rpartition("@")
    topic, _, partition = rest.rpartition("-")
    return {"topic": topic, "partition": int(partition), "offset": int(offset)}


def _fire(
    state: ConnectorState,
    rule: CompiledRule,
    rule_state: RuleState,
    event: Any,
    key: str,
    counted: list[WindowEntry],
    now_ms: int,
    trigger: list[EventSummary],
    light: bool = False,
) -> Firing:
    time_ms = event.source.timestamp_ms
    reason, detail = limits(state, rule, rule_state, time_ms)
    planned = reason is None

    if len(counted) == 1:  # count: 1, the most frequent
        record_text = counted[0][4]
    else:
        records = {entry[4] for entry in counted}
        record_text = records.pop() if len(records) == 1 else None
    if light and reason is not None and reason != "inhibited":
        kind = event.kind
        return Suppression(
            rule=rule.name,
            mode=rule.mode,
            connect_cluster=event.connect_cluster,
            connector=event.connector,
            task_id=_task_id_of(event),
            key=key,
            action_types=list(rule.action_types),
            reason=reason,
            detail=detail,
            event_time_ms=time_ms,
            decided_at_ms=now_ms,
            trigger_source=event.source,
            record_text=record_text,
            from_failure=kind is _DLQ
            or ((kind is _TASK or kind is _CONNECTOR) and event.state == "FAILED"),
        )
    record = _record_dict(record_text) if record_text is not None else None
    record_status: Literal["exact", "to_locate"] | None = None
    if rule.has_skip:
        record_status = "exact" if record is not None else "to_locate"

    actions = [_plan_action(state, action, time_ms, record, planned) for action in rule.actions]
    if planned:
        take(state, rule, rule_state, time_ms)

    # One validated construction: pydantic-core builds the nested models faster than
    # model_construct does in Python, and the decision is checked on the way. Models given as
    # instances (the trigger, shared by every decision of this event, and the trigger's own
    # source) are taken as they are.
    if not trigger:
        trigger.append(_summary(event))
    source = event.source
    decision = Decision.model_validate(
        {
            "id": decision_id(rule.name, event.connect_cluster, event.connector, key, source),
            "rule": rule.name,
            "mode": rule.mode,
            "connect_cluster": event.connect_cluster,
            "connector": event.connector,
            "task_id": _task_id_of(event),
            "key": key,
            "actions": actions,
            "record": record,
            "record_status": record_status,
            "outcome": "planned" if planned else "suppressed",
            "reason": reason,
            "detail": detail,
            "inhibited_by": state.inhibitions[rule.name]["by"] if reason == "inhibited" else None,
            "event_time_ms": time_ms,
            "decided_at_ms": now_ms,
            "inputs": {
                "events": [
                    source
                    if o == source.offset and p == source.partition and t == source.topic
                    else {"topic": t, "partition": p, "offset": o, "timestamp_ms": ts}
                    for ts, t, p, o, _ in counted
                ],
                "trigger": trigger[0],
            },
        }
    )
    if reason == "inhibited":  # the inhibiting decision may yet not run: keep this one at hand
        hold(state, rule.name, decision)
    return decision


def limits(
    state: ConnectorState, rule: CompiledRule, rule_state: RuleState, time_ms: int
) -> tuple[Reason | None, str | None]:
    """Step 6: (reason, detail) if a firing at `time_ms` is suppressed, else (None, None)."""
    inhibition = state.inhibitions.get(rule.name)
    if not rule.enabled:
        return "disabled", "the rule is disabled (enabled: false)"
    if inhibition is not None and inhibition["since_ms"] <= time_ms <= inhibition["until_ms"]:
        return (
            "inhibited",
            f"inhibited by {inhibition['by']} (fired at {inhibition['since_ms']} ms)",
        )
    cooldown, last = rule.cooldown_ms, rule_state["last_executed_ms"]
    if cooldown > 0 and last is not None and time_ms - last < cooldown:  # counting.in_cooldown
        return "cooldown", f"last executed at {last} ms; cooldown {cooldown} ms"
    used = budget_used(rule_state, time_ms, rule.budget_per_ms)
    if used >= rule.budget_max:
        detail = f"{used} of {rule.budget_max} executions used within {rule.budget_per_ms} ms"
        return "budget", detail
    return None, None


def take(state: ConnectorState, rule: CompiledRule, rule_state: RuleState, time_ms: int) -> None:
    """A planned decision uses up its budget entry and cooldown and sets its inhibitions (its
    backoff step was taken by `_plan_action`). `later.release` gives them back."""
    record_executed(rule_state, time_ms)
    if rule.inhibits is not None:
        until = time_ms + rule.inhibits.for_
        for target in rule.inhibits.rules:
            state.inhibitions[target] = {
                "by": rule.name,
                "since_ms": time_ms,
                "until_ms": until,
                "stopped": False,
            }


def hold(state: ConnectorState, rule: str, decision: Decision) -> None:
    """Keep the decision an inhibition suppressed (the latest one per rule: one restart restarts
    every failed task), for `later.release` to decide again if the inhibitor did not run."""
    inhibition = state.inhibitions[rule]
    held = [h for h in state.held if h["decision"].get("rule") != rule]
    if len(held) >= MAX_HELD:
        del held[: len(held) - MAX_HELD + 1]
    held.append(
        {
            "by": inhibition["by"],
            "since_ms": inhibition["since_ms"],
            "decision": decision.model_dump(mode="json", exclude={"actions"}),  # planned again
        }
    )
    state.held = held


def _summary(event: Any) -> EventSummary:
    kind = event.kind
    error = getattr(event, "error", None)
    progress = kind is _PROGRESS
    return EventSummary.model_validate(
        {
            "kind": str(kind),
            "state": event.state if kind in _STATUS_KINDS else None,
            "task_id": _task_id_of(event),
            "exception_class": error.exception_class if error is not None else None,
            "root_cause_class": error.root_cause_class if error is not None else None,
            "stage": error.stage if error is not None else None,
            "record": event.record if kind is _DLQ else None,
            "progress": event.progress if progress else None,
            "held_ms": event.held_ms if progress else None,
            "detail": (event.detail or None) if progress else None,
            "stuck_with": event.stuck_in_cluster if progress else (),
        }
    )


# The kinds with a `state`: read by kind, not by getattr, because a pydantic model misses an
# attribute slowly (~4 us: its __getattr__ raises).
_STATUS_KINDS = frozenset({EventKind.TASK_STATUS, EventKind.CONNECTOR_STATUS})
# the members as module constants: the hot path compares kinds by identity (`EventKind.X`
# costs ~0.25 us a read: a lookup through the enum's metaclass)
_TASK = EventKind.TASK_STATUS
_CONNECTOR = EventKind.CONNECTOR_STATUS
_DLQ = EventKind.DLQ_RECORD
_PROGRESS = EventKind.PROGRESS


def _plan_action(
    state: ConnectorState,
    action: CompiledAction,
    time_ms: int,
    record: dict[str, Any] | None,
    planned: bool,
) -> dict[str, Any]:
    params = action.params
    if action.backoff is not None:  # the actions whose effects say backoff
        delay, attempt = backoff_delay(state.restart_backoff, time_ms, action.backoff)
        params = {**params, "attempt": attempt, "delay_ms": delay, "not_before_ms": time_ms + delay}
        if planned:
            state.restart_backoff = next_backoff(state.restart_backoff, time_ms, action.backoff)
    elif action.effects.skips_record:
        params = {
            **params,
            "record": record,
            "record_status": "exact" if record is not None else "to_locate",
            "next_offset": record["offset"] + 1 if record is not None else None,
        }
    else:
        params = dict(params)
    return {"type": action.type, "params": params}


# -- pruning ------------------------------------------------------------------------------------


def prune(state: ConnectorState, rules: RuleSet) -> None:
    """Drop what can no longer matter, relative to the newest event time seen.

    Windows older than their rule's `within`, executions older than the budget window and
    the cooldown, expired inhibitions and backoff, and the state of rules that are gone.
    """
    now = state.watermark_ms
    if now is None:
        return
    rule_states, by_name = state.rules, rules.by_name
    for name, rule_state in list(rule_states.items()):
        rule = by_name.get(name)
        if rule is None:
            del rule_states[name]
            continue
        within = rule.within_ms
        cutoff = now - within
        windows = rule_state["windows"]
        for key, entries in list(windows.items()):
            if not entries or entries[-1][0] < cutoff:
                del windows[key]  # all of it too old (pruning keeps the newest entry)
            elif entries[0][0] < entries[-1][0] - within:
                prune_window(entries, within)
        executed = rule_state["executed"]
        oldest = now - rule.budget_per_ms + 1
        if executed and executed[0] < oldest:
            prune_times(executed, oldest)
        last = rule_state["last_executed_ms"]
        if last is not None and now - last >= rule.cooldown_ms and not executed:
            rule_state["last_executed_ms"] = last = None
        if not windows and not executed and last is None:
            del rule_states[name]
    inhibitions = state.inhibitions
    if inhibitions:
        for name in [n for n, i in inhibitions.items() if i["until_ms"] < now]:
            del inhibitions[name]
    _prune_waiting(state, rules, now)
    backoff = state.restart_backoff
    if backoff is not None and now - backoff["last_ms"] > rules.restart_reset_ms:
        state.restart_backoff = None


def _prune_waiting(state: ConnectorState, rules: RuleSet, now: int) -> None:
    """Held decisions whose inhibition has ended (or whose window has passed), deferred events
    past every window, released ids past every limit they could have given back."""
    if state.held:
        kept = []
        for held in state.held:
            inhibition = state.inhibitions.get(str(held["decision"].get("rule")))
            rule = rules.by_name.get(str(held["decision"].get("rule")))
            time_ms = int(held["decision"].get("event_time_ms", 0))
            if (
                rule is not None
                and inhibition is not None
                and (inhibition["by"], inhibition["since_ms"]) == (held["by"], held["since_ms"])
                and time_ms >= now - rule.within_ms
            ):
                kept.append(held)
        state.held = kept
    if state.deferred:
        state.deferred = [d for d in state.deferred if d["time_ms"] >= now - rules.meta_within_ms]
    if state.released:
        horizon = now - rules.limits_horizon_ms
        state.released = {i: t for i, t in state.released.items() if t >= horizon}
