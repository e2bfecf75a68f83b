//! `offsetd.engine.tally`: suppressed firings counted into the state's tallies instead of
//! listed (`fold_suppressed`), and a tally's audit record (`tally_record`, as `json.dumps`
//! writes it).

use std::fmt::Write as _;
use std::sync::Arc;

use super::state::FastMap;
use sha2::{Digest, Sha256};

use super::firing::{hex32, Decision, Firing};
use super::pyjson::{push_key, push_opt_str, push_str};
use super::state::{State, Tally, TallyMark};

/// `offsetd.outcomes.SUPPRESSED_KIND`.
pub const SUPPRESSED_KIND: &str = "suppressed";

/// Where a changed tally is: still the current one of its slot, or displaced by a newer tally
/// of the same slot within this fold (then it is kept here, as Python keeps the object).
enum Changed {
    InState(String),
    Displaced(Box<Tally>),
}

/// What a fold returns: the planned decisions, as they are, and the tallies it changed (in the
/// order they were first changed).
pub struct Folded {
    pub planned: Vec<Arc<Decision>>,
    pub tallies: Vec<Tally>,
}

/// `fold_suppressed(state, firings, window_ms)`. `window_ms` must be positive.
pub fn fold_suppressed(state: &mut State, firings: &[Firing], window_ms: i64) -> Folded {
    let mut planned = Vec::new();
    let mut changed: FastMap<String, Changed> = FastMap::default();
    let mut lasts: FastMap<String, &Firing> = FastMap::default();
    for firing in firings {
        if let Firing::Decision(d) = firing {
            if d.outcome == "planned" {
                state.incidents.insert(d.rule.to_string(), d.id.clone());
                planned.push(d.clone());
                continue;
            }
        }
        let (rule, mode, reason, detail, time_ms, inhibited_by) = match firing {
            Firing::Decision(d) => (
                &d.rule,
                &d.mode,
                d.reason.unwrap_or("disabled"),
                d.detail.as_deref(),
                d.event_time_ms,
                d.inhibited_by.as_deref(),
            ),
            Firing::Suppression(s) => (
                &s.rule,
                &s.mode,
                s.reason,
                Some(s.detail.as_str()),
                s.event_time_ms,
                None,
            ),
        };
        let slot = format!("{rule}\x1f{reason}");
        let incident = match inhibited_by {
            Some(by) if reason == "inhibited" && state.incidents.contains_key(by) => {
                state.incidents.get(by).cloned()
            }
            _ => state.incidents.get(&**rule).cloned(),
        };
        let mut start = time_ms - time_ms.rem_euclid(window_ms);
        let current = state.suppressed.get(&slot);
        if let Some(t) = current {
            if t.incident == incident {
                start = start.max(t.window_start_ms);
            }
        }
        let renew = current.is_none_or(|t| t.incident != incident || t.window_start_ms != start);
        if renew {
            let mark = mark(firing);
            let tally = Tally {
                id: tally_id(firing.id()),
                rule: rule.clone(),
                mode: mode.clone(),
                reason: reason.to_string(),
                incident,
                window_start_ms: start,
                count: 0,
                actions: action_types(firing),
                detail: detail.map(str::to_string),
                first: mark.clone(),
                last: mark,
            };
            if let Some(old) = state.suppressed.insert(slot.clone(), tally) {
                if let Some(entry) = changed.get_mut(&old.id) {
                    if matches!(entry, Changed::InState(s) if *s == slot) {
                        *entry = Changed::Displaced(Box::new(old));
                    }
                }
            }
        }
        let tally = state.suppressed.get_mut(&slot).expect("the slot's tally");
        tally.count += 1;
        tally.detail = detail.map(str::to_string);
        changed.insert(tally.id.clone(), Changed::InState(slot));
        lasts.insert(tally.id.clone(), firing);
    }
    for (id, last) in &lasts {
        let mark = mark(last);
        match changed.get_mut(id) {
            Some(Changed::InState(slot)) => {
                if let Some(t) = state.suppressed.get_mut(slot) {
                    t.last = mark;
                }
            }
            Some(Changed::Displaced(t)) => t.last = mark,
            None => {}
        }
    }
    let tallies = changed
        .into_values()
        .filter_map(|c| match c {
            Changed::InState(slot) => state.suppressed.get(&slot).cloned(),
            Changed::Displaced(t) => Some(*t),
        })
        .collect();
    Folded { planned, tallies }
}

fn action_types(firing: &Firing) -> Vec<Arc<str>> {
    match firing {
        Firing::Decision(d) => d.actions.iter().map(|a| a.type_.clone()).collect(),
        Firing::Suppression(s) => s.action_types.to_vec(),
    }
}

/// `_mark`: the firing's trigger, as a tally remembers it.
fn mark(firing: &Firing) -> TallyMark {
    let (time_ms, decided_ms, source, record) = match firing {
        Firing::Decision(d) => (
            d.event_time_ms,
            d.decided_at_ms,
            d.trigger_source(),
            d.record_text(),
        ),
        Firing::Suppression(s) => (
            s.event_time_ms,
            s.decided_at_ms,
            &s.trigger_source,
            s.record_text.as_deref().map(str::to_string),
        ),
    };
    TallyMark {
        decision_id: firing.id().to_string(),
        event_time_ms: time_ms,
        decided_at_ms: decided_ms,
        topic: source.topic.clone(),
        partition: source.partition,
        offset: source.offset,
        record,
    }
}

/// `_tally_id`: sha256 of `suppressed\x1f<first decision id>`, its first 32 hex digits.
fn tally_id(first_decision_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(SUPPRESSED_KIND.as_bytes());
    hasher.update(b"\x1f");
    hasher.update(first_decision_id.as_bytes());
    hex32(&hasher.finalize())
}

/// `tally_record(state, tally, window_ms)` as `json.dumps` writes it (the audit's bytes).
pub fn tally_record_json(state: &State, tally: &Tally, window_ms: i64) -> String {
    let mut out = String::with_capacity(768);
    out.push('{');
    push_key(&mut out, "id");
    push_str(&mut out, &tally.id);
    out.push_str(", ");
    push_key(&mut out, "kind");
    push_str(&mut out, SUPPRESSED_KIND);
    out.push_str(", ");
    push_key(&mut out, "rule");
    push_str(&mut out, &tally.rule);
    out.push_str(", ");
    push_key(&mut out, "mode");
    push_str(&mut out, &tally.mode);
    out.push_str(", ");
    push_key(&mut out, "connect_cluster");
    push_str(&mut out, &state.connect_cluster);
    out.push_str(", ");
    push_key(&mut out, "connector");
    push_str(&mut out, &state.connector);
    out.push_str(", ");
    push_key(&mut out, "outcome");
    push_str(&mut out, &format!("suppressed_{}", tally.reason));
    out.push_str(", ");
    push_key(&mut out, "reason");
    push_str(&mut out, &tally.reason);
    out.push_str(", ");
    push_key(&mut out, "detail");
    push_opt_str(&mut out, tally.detail.as_deref());
    out.push_str(", ");
    push_key(&mut out, "count");
    let _ = write!(out, "{}, ", tally.count);
    push_key(&mut out, "incident");
    push_opt_str(&mut out, tally.incident.as_deref());
    out.push_str(", ");
    push_key(&mut out, "window_start_ms");
    let _ = write!(out, "{}, ", tally.window_start_ms);
    push_key(&mut out, "window_ms");
    let _ = write!(out, "{window_ms}, ");
    push_key(&mut out, "actions");
    out.push('[');
    for (i, t) in tally.actions.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('{');
        push_key(&mut out, "type");
        push_str(&mut out, t);
        out.push('}');
    }
    out.push_str("], ");
    push_key(&mut out, "first");
    push_mark(&mut out, &tally.first);
    out.push_str(", ");
    push_key(&mut out, "last");
    push_mark(&mut out, &tally.last);
    out.push_str(", ");
    push_key(&mut out, "event_time_ms");
    let _ = write!(out, "{}, ", tally.last.event_time_ms);
    push_key(&mut out, "decided_at_ms");
    let _ = write!(out, "{}", tally.last.decided_at_ms);
    out.push('}');
    out
}

fn push_mark(out: &mut String, mark: &TallyMark) {
    out.push('{');
    push_key(out, "decision_id");
    push_str(out, &mark.decision_id);
    out.push_str(", ");
    push_key(out, "event_time_ms");
    let _ = write!(out, "{}, ", mark.event_time_ms);
    push_key(out, "decided_at_ms");
    let _ = write!(out, "{}, ", mark.decided_at_ms);
    push_key(out, "topic");
    push_str(out, &mark.topic);
    out.push_str(", ");
    push_key(out, "partition");
    let _ = write!(out, "{}, ", mark.partition);
    push_key(out, "offset");
    let _ = write!(out, "{}, ", mark.offset);
    push_key(out, "record");
    push_opt_str(out, mark.record.as_deref());
    out.push('}');
}
