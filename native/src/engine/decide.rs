//! `offsetd.engine.decide._decide` with `light=True` (`decide_firings`), for the kinds of
//! `crate::event`: idempotency, status, the sweep, counting, limits and firings, deferral.
//!
//! The steps keep the Python's order, which is the semantics (idempotency before counting,
//! staleness before the window, limits before taking). Matching is not here: the caller passes
//! the rules `RuleSet.matched` would return (and, while the metadata is unknown, those
//! `RuleSet.waiting_for_meta` would), by index in load order.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::counting::{
    add_to_window, backoff_delay, budget_used, evict_stalest, next_backoff, prune_times,
    prune_window, record_executed,
};
use super::firing::{
    decision_id, Decision, DecisionInputs, EventSummary, Firing, PlannedAction, Suppression,
};
use super::state::{
    parse_record, Deferred, Held, Inhibition, RuleState, State, StatusEntry, WindowEntry,
};
use super::{Engine, EngineAction, KeyField, Rule};
use crate::event::{Event, Kind, RecordRef, SourceRecord};

/// `SWEEP_EVERY_MS`: event time between two pruning sweeps of a connector's state.
pub const SWEEP_EVERY_MS: i64 = 60_000;
pub const MAX_HELD: usize = 16;
pub const MAX_DEFERRED: usize = 32;
/// Event times and "now" the compiled engine takes: within ±2^62 ms, so that no sum or
/// difference with a duration (< 2^53, `DURATION_LIMIT`) overflows an i64 where Python's ints
/// would not.
pub const TIME_LIMIT: i64 = 1 << 62;

/// An event the compiled engine leaves to Python, with why. Checked before the state is
/// touched, except `Unordered` (a window Python's `insort` would raise on: not reachable from a
/// state the engine made), after which the state must be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    TimeOutOfRange,
    RecordOutOfRange,
    UnknownRule(usize),
    Unordered,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TimeOutOfRange => write!(f, "an event or decision time beyond ±2^62 ms"),
            Refusal::RecordOutOfRange => {
                write!(
                    f,
                    "a failing record whose text Python would not read back as it was"
                )
            }
            Refusal::UnknownRule(i) => write!(f, "no rule at index {i}"),
            Refusal::Unordered => write!(f, "window entries Python cannot order"),
        }
    }
}

impl Engine {
    /// Apply one event of this connector to `state`; returns the firings.
    ///
    /// `matched`: `RuleSet.matched(event, meta)`'s rules; `waiting`: while the metadata is
    /// unknown (`meta_known` false), `RuleSet.waiting_for_meta(event)`'s (read only then, and
    /// only if some rule needs metadata).
    pub fn decide(
        &self,
        state: &mut State,
        event: &Event,
        matched: &[usize],
        waiting: &[usize],
        meta_known: bool,
        now_ms: i64,
    ) -> Result<Vec<Firing>, Refusal> {
        self.decide_counted(state, event, matched, waiting, meta_known, now_ms, &mut [])
    }

    /// Whether `decide` would leave this event to Python before touching the state (the
    /// owner asks for a whole frame first: a frame is decided wholly here or wholly there).
    pub fn refusal(&self, event: &Event, now_ms: i64) -> Option<Refusal> {
        times_in_range(event, now_ms)
            .and_then(|()| checked_record(event))
            .err()
    }

    /// `decide`, also counting in `matches[rule]` every rule that sees the event (matched and
    /// not stale: what `on_match` is told in Python); an empty `matches` counts nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn decide_counted(
        &self,
        state: &mut State,
        event: &Event,
        matched: &[usize],
        waiting: &[usize],
        meta_known: bool,
        now_ms: i64,
        matches: &mut [u64],
    ) -> Result<Vec<Firing>, Refusal> {
        let source = event.source();
        let time_ms = source.timestamp_ms;
        times_in_range(event, now_ms)?;
        if let Some(&i) = matched
            .iter()
            .chain(waiting)
            .find(|&&i| i >= self.rules.len())
        {
            return Err(Refusal::UnknownRule(i));
        }
        let record = checked_record(event)?;

        // 1. idempotency
        let mut partition_key = String::with_capacity(source.topic.len() + 8);
        let _ = write!(partition_key, "{}:{}", source.topic, source.partition);
        match state.offsets.get_mut(&partition_key) {
            Some(seen) if source.offset <= *seen => return Ok(Vec::new()),
            Some(seen) => *seen = source.offset,
            None => {
                state.offsets.insert(partition_key, source.offset);
            }
        }
        if state.watermark_ms.is_none_or(|w| time_ms > w) {
            state.watermark_ms = Some(time_ms);
        }
        if state.connector.is_empty() {
            state.connect_cluster = event.connect_cluster().to_string();
            state.connector = event.connector().to_string();
        }

        // 2. status
        match event {
            Event::Task(e) => match &e.state {
                None => {
                    state.tasks.shift_remove(&e.task_id);
                }
                Some(status) => {
                    let entry = StatusEntry {
                        state: Arc::from(status.as_str()),
                        generation: e.generation,
                        worker_id: e.worker_id.as_deref().map(Arc::from),
                        time_ms,
                    };
                    state.tasks.insert(e.task_id, entry);
                }
            },
            Event::Connector(e) => update_connector_status(state, e.state.as_deref(), e, time_ms),
            _ => {}
        }

        if time_ms >= state.next_sweep_ms {
            self.prune(state);
            state.next_sweep_ms = time_ms + SWEEP_EVERY_MS;
        }

        let firings = if matched.is_empty() {
            Vec::new()
        } else {
            self.match_rules(state, event, matched, record, now_ms, matches)?
        };
        if !meta_known && !self.set.meta_rules.is_empty() {
            self.defer(state, event, waiting, now_ms);
        }
        Ok(firings)
    }

    /// Steps 3 to 6 for `matched`: staleness, count, fire.
    fn match_rules(
        &self,
        state: &mut State,
        event: &Event,
        matched: &[usize],
        record: Option<Arc<str>>,
        now_ms: i64,
        matches: &mut [u64],
    ) -> Result<Vec<Firing>, Refusal> {
        let source = event.source();
        let time_ms = source.timestamp_ms;
        let age = now_ms - time_ms;
        let mut firings = Vec::new();
        let mut topic: Option<Arc<str>> = None;
        let mut trigger: Option<Arc<EventSummary>> = None;
        for &index in matched {
            let rule = &self.rules[index];
            let part = &rule.part;
            let within = part.within_ms;
            if age > within {
                continue; // stale: a replayed or late record never fires (nor counts)
            }
            if let Some(count) = matches.get_mut(index) {
                *count += 1; // on_match
            }
            if record.is_none() && part.keys_record {
                continue; // counted per record, and this event names none
            }
            let key = count_key(&part.key, event, record.as_deref());
            let topic = topic
                .get_or_insert_with(|| Arc::from(source.topic.as_str()))
                .clone();
            let entry: WindowEntry = (
                time_ms,
                topic,
                source.partition,
                source.offset,
                record.clone(),
            );
            let rule_states = &mut state.rules;
            let rule_state = match rule_states.get_index_of(&*rule.name) {
                Some(i) => &mut rule_states[i],
                None => {
                    rule_states.insert(rule.name.to_string(), RuleState::default());
                    rule_states
                        .last_mut()
                        .map(|(_, v)| v)
                        .expect("just inserted")
                }
            };
            let windows = &mut rule_state.windows;
            let slot = match windows.get_index_of(&key) {
                Some(i) => i,
                None => {
                    if windows.len() >= self.max_keys {
                        evict_stalest(windows, self.max_keys / 2);
                    }
                    windows.insert(key.clone(), Vec::new());
                    windows.len() - 1
                }
            };
            let entries = &mut windows[slot];
            if entries.last().is_none_or(|last| time_ms >= last.0) {
                entries.push(entry);
                if entries[0].0 < time_ms - within {
                    prune_window(entries, within);
                }
            } else if !add_to_window(entries, entry, within).ok_or(Refusal::Unordered)? {
                continue;
            }
            if (entries.len() as i64) < part.count {
                continue;
            }
            let counted = windows
                .shift_remove_index(slot)
                .map(|(_, v)| v)
                .unwrap_or_default(); // the firing consumes the window
            firings.push(self.fire(state, rule, event, key, counted, now_ms, &mut trigger));
        }
        Ok(firings)
    }

    #[allow(clippy::too_many_arguments)]
    fn fire(
        &self,
        state: &mut State,
        rule: &Rule,
        event: &Event,
        key: String,
        counted: Vec<WindowEntry>,
        now_ms: i64,
        trigger: &mut Option<Arc<EventSummary>>,
    ) -> Firing {
        let part = &rule.part;
        let source = event.source();
        let time_ms = source.timestamp_ms;
        let (reason, detail) = limits(state, rule, time_ms);
        let planned = reason.is_none();

        let record_text: Option<Arc<str>> = if counted.len() == 1 {
            counted[0].4.clone()
        } else {
            let first = &counted[0].4;
            if counted.iter().all(|e| e.4 == *first) {
                first.clone()
            } else {
                None
            }
        };
        let from_failure = match event {
            Event::Dlq(_) => true,
            Event::Task(_) | Event::Connector(_) => event.state() == Some("FAILED"),
            Event::Topic(_) => false,
        };
        if let Some(reason) = reason.filter(|r| *r != "inhibited") {
            return Firing::Suppression(Arc::new(Suppression::new(
                rule.name.clone(),
                part.mode.clone(),
                event.connect_cluster().to_string(),
                event.connector().to_string(),
                event.task_id(),
                key,
                part.action_types.clone(),
                reason,
                detail.unwrap_or_default(),
                time_ms,
                now_ms,
                source.clone(),
                record_text,
                from_failure,
            )));
        }
        let record = record_text.as_deref().map(|text| {
            let (topic, partition, offset) =
                parse_record(text).expect("record texts are checked when they enter the state");
            RecordRef {
                topic: topic.to_string(),
                partition,
                offset,
            }
        });
        let record_status = if part.has_skip {
            Some(if record.is_some() {
                "exact"
            } else {
                "to_locate"
            })
        } else {
            None
        };
        let actions = part
            .actions
            .iter()
            .map(|a| plan_action(state, a, time_ms, record.as_ref(), planned))
            .collect();
        if planned {
            take(state, rule, time_ms);
        }
        let trigger = trigger
            .get_or_insert_with(|| Arc::new(summary(event)))
            .clone();
        let events = counted
            .iter()
            .map(|(ts, t, p, o, _)| {
                if *o == source.offset && *p == source.partition && **t == *source.topic {
                    source.clone()
                } else {
                    SourceRecord {
                        topic: t.to_string(),
                        partition: *p,
                        offset: *o,
                        timestamp_ms: *ts,
                    }
                }
            })
            .collect();
        let inhibited_by = if reason == Some("inhibited") {
            state.inhibitions.get(&*rule.name).map(|i| i.by.clone())
        } else {
            None
        };
        let decision = Decision {
            id: decision_id(
                &rule.name,
                event.connect_cluster(),
                event.connector(),
                &key,
                source,
            ),
            rule: rule.name.clone(),
            mode: part.mode.clone(),
            connect_cluster: event.connect_cluster().to_string(),
            connector: event.connector().to_string(),
            task_id: event.task_id(),
            key,
            actions,
            record,
            record_status,
            outcome: if planned { "planned" } else { "suppressed" },
            reason,
            detail,
            inhibited_by,
            event_time_ms: time_ms,
            decided_at_ms: now_ms,
            inputs: DecisionInputs { events, trigger },
        };
        if reason == Some("inhibited") {
            hold(state, &rule.name, &decision);
        }
        Firing::Decision(Arc::new(decision))
    }

    /// Keep `event` for later if a rule that needs the (unknown) metadata could match it, while
    /// that rule's window still holds it; at most `MAX_DEFERRED`, the oldest go first.
    fn defer(&self, state: &mut State, event: &Event, waiting: &[usize], now_ms: i64) -> bool {
        let time_ms = event.source().timestamp_ms;
        if !waiting
            .iter()
            .any(|&i| now_ms - time_ms <= self.rules[i].part.within_ms)
        {
            return false;
        }
        let mut data = match serde_json::to_value(event) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        if let Event::Dlq(_) = event {
            data.shift_remove("headers"); // no rule reads them, and the trace is large
        }
        let deferred = &mut state.deferred;
        if deferred.len() >= MAX_DEFERRED {
            deferred.drain(..deferred.len() - MAX_DEFERRED + 1);
        }
        deferred.push(Deferred {
            time_ms,
            deferred_ms: now_ms,
            event: data,
        });
        true
    }

    /// `prune`: drop what can no longer matter, relative to the newest event time seen.
    pub fn prune(&self, state: &mut State) {
        let Some(now) = state.watermark_ms else {
            return;
        };
        state.rules.retain(|name, rule_state| {
            let Some(&index) = self.by_name.get(name.as_str()) else {
                return false;
            };
            let part = &self.rules[index].part;
            let within = part.within_ms;
            let cutoff = now - within;
            rule_state
                .windows
                .retain(|_, entries| match entries.last() {
                    None => false,
                    Some(last) if last.0 < cutoff => false,
                    Some(last) => {
                        if entries[0].0 < last.0 - within {
                            prune_window(entries, within);
                        }
                        true
                    }
                });
            let executed = &mut rule_state.executed;
            let oldest = now - part.budget_per_ms + 1;
            if executed.first().is_some_and(|&t| t < oldest) {
                prune_times(executed, oldest);
            }
            if let Some(last) = rule_state.last_executed_ms {
                if now - last >= part.cooldown_ms && executed.is_empty() {
                    rule_state.last_executed_ms = None;
                }
            }
            !(rule_state.windows.is_empty()
                && rule_state.executed.is_empty()
                && rule_state.last_executed_ms.is_none())
        });
        state.inhibitions.retain(|_, i| i.until_ms >= now);
        self.prune_waiting(state, now);
        if let Some(b) = state.restart_backoff {
            if now - b.last_ms > self.set.restart_reset_ms {
                state.restart_backoff = None;
            }
        }
    }

    /// `_prune_waiting`: held decisions whose inhibition has ended (or whose window has passed),
    /// deferred events past every window, released ids past every limit.
    fn prune_waiting(&self, state: &mut State, now: i64) {
        if !state.held.is_empty() {
            let inhibitions = &state.inhibitions;
            state.held.retain(|held| {
                let rule = held
                    .decision
                    .get("rule")
                    .and_then(Value::as_str)
                    .unwrap_or("None");
                let time_ms = held
                    .decision
                    .get("event_time_ms")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let Some(&index) = self.by_name.get(rule) else {
                    return false;
                };
                let Some(inhibition) = inhibitions.get(rule) else {
                    return false;
                };
                *inhibition.by == *held.by
                    && inhibition.since_ms == held.since_ms
                    && time_ms >= now - self.rules[index].part.within_ms
            });
        }
        if !state.deferred.is_empty() {
            let cutoff = now - self.set.meta_within_ms;
            state.deferred.retain(|d| d.time_ms >= cutoff);
        }
        if !state.released.is_empty() {
            let horizon = now - self.set.limits_horizon_ms;
            state.released.retain(|_, t| *t >= horizon);
        }
    }
}

/// `_update_status` for a connector status: the status, and the inhibitions a remediation
/// that went through (STOPPED, then RUNNING) ends.
fn update_connector_status(
    state: &mut State,
    status: Option<&str>,
    event: &crate::event::ConnectorStatusEvent,
    time_ms: i64,
) {
    state.connector_status = status.map(|s| StatusEntry {
        state: Arc::from(s),
        generation: event.generation,
        worker_id: event.worker_id.as_deref().map(Arc::from),
        time_ms,
    });
    if state.inhibitions.is_empty() {
        return;
    }
    state.inhibitions.retain(|_, inhibition| {
        if time_ms < inhibition.since_ms {
            return true;
        }
        match status {
            Some("STOPPED") => {
                inhibition.stopped = true;
                true
            }
            Some("RUNNING") => !inhibition.stopped,
            _ => true,
        }
    });
}

/// `_record_text`: a DLQ event's failing record as `topic-partition@offset`.
/// The event's time and `now` within what the engine takes (`TIME_LIMIT`).
fn times_in_range(event: &Event, now_ms: i64) -> Result<(), Refusal> {
    let limit = -TIME_LIMIT..=TIME_LIMIT;
    if limit.contains(&event.source().timestamp_ms) && limit.contains(&now_ms) {
        Ok(())
    } else {
        Err(Refusal::TimeOutOfRange)
    }
}

/// The failing record's text, when the event names one that Python would read back as it was.
fn checked_record(event: &Event) -> Result<Option<Arc<str>>, Refusal> {
    match record_text(event) {
        Some(text) if parse_record(&text).is_none() => Err(Refusal::RecordOutOfRange),
        record => Ok(record),
    }
}

fn record_text(event: &Event) -> Option<Arc<str>> {
    match event {
        Event::Dlq(e) => e
            .record
            .as_ref()
            .map(|r| Arc::from(format!("{}-{}@{}", r.topic, r.partition, r.offset))),
        _ => None,
    }
}

/// The event's count key for a rule's `when.key`, as `count_keyer` builds it.
fn count_key(names: &[KeyField], event: &Event, record: Option<&str>) -> String {
    let mut key = String::with_capacity(64);
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push_str(name.name());
        key.push('=');
        match name {
            KeyField::Connector => key.push_str(event.connector()),
            KeyField::TaskId => {
                if let Some(id) = event.task_id() {
                    let _ = write!(key, "{id}");
                }
            }
            KeyField::Record => key.push_str(record.unwrap_or("")),
            KeyField::ExceptionClass => key.push_str(
                event
                    .error()
                    .and_then(|e| e.exception_class.as_deref())
                    .unwrap_or(""),
            ),
            KeyField::RootCauseClass => key.push_str(
                event
                    .error()
                    .and_then(|e| e.root_cause_class.as_deref())
                    .unwrap_or(""),
            ),
        }
    }
    key
}

/// Step 6: (reason, detail) if a firing at `time_ms` is suppressed, else (None, None).
fn limits(state: &mut State, rule: &Rule, time_ms: i64) -> (Option<&'static str>, Option<String>) {
    let part = &rule.part;
    if !part.enabled {
        return (
            Some("disabled"),
            Some("the rule is disabled (enabled: false)".to_string()),
        );
    }
    if let Some(i) = state.inhibitions.get(&*rule.name) {
        if i.since_ms <= time_ms && time_ms <= i.until_ms {
            let detail = format!("inhibited by {} (fired at {} ms)", i.by, i.since_ms);
            return (Some("inhibited"), Some(detail));
        }
    }
    let Some(rule_state) = state.rules.get_mut(&*rule.name) else {
        return (None, None); // unreachable: the window just fired lives in it
    };
    let cooldown = part.cooldown_ms;
    if let Some(last) = rule_state.last_executed_ms {
        if cooldown > 0 && time_ms - last < cooldown {
            let detail = format!("last executed at {last} ms; cooldown {cooldown} ms");
            return (Some("cooldown"), Some(detail));
        }
    }
    let used = budget_used(rule_state, time_ms, part.budget_per_ms);
    if used >= part.budget_max {
        let detail = format!(
            "{used} of {} executions used within {} ms",
            part.budget_max, part.budget_per_ms
        );
        return (Some("budget"), Some(detail));
    }
    (None, None)
}

/// A planned decision uses up its budget entry and cooldown and sets its inhibitions.
fn take(state: &mut State, rule: &Rule, time_ms: i64) {
    if let Some(rule_state) = state.rules.get_mut(&*rule.name) {
        record_executed(rule_state, time_ms);
    }
    if let Some(inhibits) = &rule.part.inhibits {
        let until = time_ms + inhibits.for_ms;
        for target in &inhibits.rules {
            state.inhibitions.insert(
                target.clone(),
                Inhibition {
                    by: rule.name.clone(),
                    since_ms: time_ms,
                    until_ms: until,
                    stopped: false,
                },
            );
        }
    }
}

/// Keep the decision an inhibition suppressed (the latest per rule), without its actions.
fn hold(state: &mut State, rule: &str, decision: &Decision) {
    let Some(inhibition) = state.inhibitions.get(rule) else {
        return;
    };
    let (by, since_ms) = (inhibition.by.clone(), inhibition.since_ms);
    let held = &mut state.held;
    held.retain(|h| h.decision.get("rule").and_then(Value::as_str) != Some(rule));
    if held.len() >= MAX_HELD {
        held.drain(..held.len() - MAX_HELD + 1);
    }
    let mut data = match serde_json::to_value(decision) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    data.shift_remove("actions"); // planned again
    held.push(Held {
        by,
        since_ms,
        decision: data,
    });
}

/// `_summary`: the triggering event, compactly.
fn summary(event: &Event) -> EventSummary {
    let error = event.error();
    let kind = match event.kind() {
        Kind::ConnectorStatus => "connector_status",
        Kind::TaskStatus => "task_status",
        Kind::TopicStatus => "topic_status",
        Kind::DlqRecord => "dlq_record",
        Kind::SourceOffset => "source_offset",
        Kind::Progress => "progress",
    };
    EventSummary {
        kind,
        state: event.state().map(str::to_string),
        task_id: event.task_id(),
        exception_class: error.and_then(|e| e.exception_class.clone()),
        root_cause_class: error.and_then(|e| e.root_cause_class.clone()),
        stage: error.and_then(|e| e.stage.clone()),
        record: match event {
            Event::Dlq(e) => e.record.clone(),
            _ => None,
        },
        progress: None,
        held_ms: None,
        detail: None,
        stuck_with: [],
    }
}

/// `_plan_action`: the action's parameters and the ones the engine computes (restart backoff,
/// the record to skip).
fn plan_action(
    state: &mut State,
    action: &EngineAction,
    time_ms: i64,
    record: Option<&RecordRef>,
    planned: bool,
) -> PlannedAction {
    let mut params = action.params.clone();
    if let Some(spec) = &action.backoff {
        let (delay, attempt) = backoff_delay(state.restart_backoff.as_ref(), time_ms, spec);
        params.insert("attempt".into(), attempt.into());
        params.insert("delay_ms".into(), delay.into());
        params.insert("not_before_ms".into(), (time_ms + delay).into());
        if planned {
            state.restart_backoff =
                Some(next_backoff(state.restart_backoff.as_ref(), time_ms, spec));
        }
    } else if action.skips_record {
        let value = record.map_or(
            Value::Null,
            |r| serde_json::json!({"topic": r.topic, "partition": r.partition, "offset": r.offset}),
        );
        params.insert("record".into(), value);
        let status = if record.is_some() {
            "exact"
        } else {
            "to_locate"
        };
        params.insert("record_status".into(), status.into());
        params.insert(
            "next_offset".into(),
            record.map_or(Value::Null, |r| (r.offset + 1).into()),
        );
    }
    PlannedAction {
        type_: action.type_.clone(),
        params,
    }
}
