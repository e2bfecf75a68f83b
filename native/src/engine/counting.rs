//! `offsetd.engine.counting`: windows, budgets, cooldowns and backoff over the state's records.
//!
//! All times are event times in ms; windows are inclusive and anchored on their newest entry.

use std::cmp::Ordering;

use super::state::{BackoffState, RuleState, WindowEntry};
use super::BackoffSpec;

/// Drop entries older than the newest one minus `within_ms` (entries sorted by time).
pub fn prune_window(entries: &mut Vec<WindowEntry>, within_ms: i64) {
    let Some(last) = entries.last() else { return };
    let cutoff = last.0 - within_ms;
    if entries[0].0 < cutoff {
        let drop = entries.iter().take_while(|e| e.0 < cutoff).count();
        entries.drain(..drop);
    }
}

/// Python's tuple order of two window entries; None where Python would compare None with a
/// str (a TypeError there: two entries of the same source coordinates, which idempotency
/// rules out).
fn compare(a: &WindowEntry, b: &WindowEntry) -> Option<Ordering> {
    let head =
        a.0.cmp(&b.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
            .then_with(|| a.2.cmp(&b.2))
            .then_with(|| a.3.cmp(&b.3));
    if head != Ordering::Equal {
        return Some(head);
    }
    match (&a.4, &b.4) {
        (None, None) => Some(Ordering::Equal),
        (Some(x), Some(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

/// Add a matching event and prune; Some(false) if the event itself fell out of the window,
/// None where Python's `insort` would raise.
pub fn add_to_window(
    entries: &mut Vec<WindowEntry>,
    entry: WindowEntry,
    within_ms: i64,
) -> Option<bool> {
    let time = entry.0;
    match entries.last() {
        Some(last) if time < last.0 => {
            // insort (bisect_right): after every entry that is <= the new one
            let mut at = entries.len();
            for (i, e) in entries.iter().enumerate() {
                if compare(&entry, e)? == Ordering::Less {
                    at = i;
                    break;
                }
            }
            entries.insert(at, entry);
        }
        _ => entries.push(entry),
    }
    prune_window(entries, within_ms);
    let newest = entries.last().map_or(time, |e| e.0);
    Some(time >= newest - within_ms)
}

/// Keep `keep` keys: those with the most events, then the most recent; drop the others (ties
/// keep the keys' order).
pub fn evict_stalest(
    windows: &mut crate::engine::state::FastMap<String, Vec<WindowEntry>>,
    keep: usize,
) {
    if windows.len() <= keep {
        return;
    }
    let mut ranked: Vec<(usize, i64, usize)> = windows
        .values()
        .enumerate()
        .map(|(i, entries)| (entries.len(), entries.last().map_or(-1, |e| e.0), i))
        .collect();
    ranked.sort_unstable();
    let mut dropped = vec![false; windows.len()];
    for &(_, _, i) in &ranked[..windows.len() - keep] {
        dropped[i] = true;
    }
    let mut index = 0;
    windows.retain(|_, _| {
        let keep = !dropped[index];
        index += 1;
        keep
    });
}

/// Drop times before `cutoff` from a sorted list.
pub fn prune_times(times: &mut Vec<i64>, cutoff: i64) {
    if times.first().is_some_and(|&t| t < cutoff) {
        let drop = times.partition_point(|&t| t < cutoff);
        times.drain(..drop);
    }
}

/// Executed decisions in the budget window `(time - per, time]`.
pub fn budget_used(rule_state: &mut RuleState, time_ms: i64, per_ms: i64) -> i64 {
    prune_times(&mut rule_state.executed, time_ms - per_ms + 1);
    rule_state
        .executed
        .iter()
        .filter(|&&t| t <= time_ms)
        .count() as i64
}

pub fn record_executed(rule_state: &mut RuleState, time_ms: i64) {
    let at = rule_state.executed.partition_point(|&t| t <= time_ms);
    rule_state.executed.insert(at, time_ms);
    rule_state.last_executed_ms = Some(match rule_state.last_executed_ms {
        None => time_ms,
        Some(last) => last.max(time_ms),
    });
}

/// (delay in ms, attempt number from 0) for a restart decided at `time_ms`.
///
/// Python computes `int(min(initial * factor ** min(attempt, 64), max))` in floats: the power
/// is libm's `pow` in both, and for a delay >= 0, `int(min(d, max))` is `min(trunc(d), max)`.
pub fn backoff_delay(state: Option<&BackoffState>, time_ms: i64, spec: &BackoffSpec) -> (i64, i64) {
    let mut attempt = 0;
    if let Some(s) = state {
        if time_ms - s.last_ms <= spec.reset_after {
            attempt = s.attempts;
        }
    }
    let delay = spec.initial as f64 * spec.factor.powf(attempt.min(64) as f64);
    ((delay as i64).min(spec.max), attempt)
}

/// The backoff state after a restart decision at `time_ms`.
pub fn next_backoff(
    state: Option<&BackoffState>,
    time_ms: i64,
    spec: &BackoffSpec,
) -> BackoffState {
    let (_, attempt) = backoff_delay(state, time_ms, spec);
    let last = match state {
        Some(s) if attempt != 0 => s.last_ms.max(time_ms),
        _ => time_ms,
    };
    BackoffState {
        attempts: attempt + 1,
        last_ms: last,
    }
}
