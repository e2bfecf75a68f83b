//! `offsetd.engine.state.ConnectorState` as a struct: its JSON is `model_dump_json()`'s text.
//!
//! Field order is the model's; TypedDicts are structs in their declared order (the engine
//! builds them in that order, and pydantic reads them back in it); maps are `IndexMap`s, so
//! insertion order survives as in a Python dict (removals are `shift_remove`: order kept);
//! `held` and `deferred` payloads are order-preserving JSON values (`dict[str, Any]`).

use std::sync::Arc;

/// The state's maps: insertion-ordered as Python's dicts, hashed with foldhash (seeded per
/// process) rather than SipHash: the keys are the connector's own names and offsets, and the
/// sweep bounds them (MAX_KEYS), so DoS resistance buys nothing here.
pub type FastMap<K, V> = indexmap::IndexMap<K, V, foldhash::fast::RandomState>;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::check_floats;
use super::decide::TIME_LIMIT;

/// The latest status record of the connector or one task.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StatusEntry {
    pub state: Arc<str>,
    pub generation: Option<i64>,
    pub worker_id: Option<Arc<str>>,
    pub time_ms: i64,
}

/// (event time, source topic, source partition, source offset, failing record `topic-p@o`).
pub type WindowEntry = (i64, Arc<str>, i64, i64, Option<Arc<str>>);

/// One rule's counting and limits for this connector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct RuleState {
    pub windows: FastMap<String, Vec<WindowEntry>>,
    pub executed: Vec<i64>,
    pub last_executed_ms: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackoffState {
    pub attempts: i64,
    pub last_ms: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Inhibition {
    pub by: Arc<str>,
    pub since_ms: i64,
    pub until_ms: i64,
    pub stopped: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Held {
    pub by: Arc<str>,
    pub since_ms: i64,
    pub decision: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Deferred {
    pub time_ms: i64,
    pub deferred_ms: i64,
    pub event: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TallyMark {
    pub decision_id: String,
    pub event_time_ms: i64,
    pub decided_at_ms: i64,
    pub topic: String,
    pub partition: i64,
    pub offset: i64,
    pub record: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tally {
    pub id: String,
    pub rule: Arc<str>,
    pub mode: Arc<str>,
    pub reason: String,
    pub incident: Option<String>,
    pub window_start_ms: i64,
    pub count: i64,
    pub actions: Vec<Arc<str>>,
    pub detail: Option<String>,
    pub first: TallyMark,
    pub last: TallyMark,
}

/// What the engine remembers about one connector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct State {
    pub connect_cluster: String,
    pub connector: String,
    pub offsets: FastMap<String, i64>,
    pub watermark_ms: Option<i64>,
    pub next_sweep_ms: i64,
    pub connector_status: Option<StatusEntry>,
    pub tasks: FastMap<i64, StatusEntry>,
    pub rules: FastMap<String, RuleState>,
    pub restart_backoff: Option<BackoffState>,
    pub inhibitions: FastMap<String, Inhibition>,
    pub held: Vec<Held>,
    pub deferred: Vec<Deferred>,
    pub released: FastMap<String, i64>,
    pub suppressed: FastMap<String, Tally>,
    pub incidents: FastMap<String, String>,
    pub progress: FastMap<String, String>,
}

impl State {
    /// The state as `ConnectorState.model_dump_json()` writes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a state always serializes")
    }

    /// A state from `model_dump_json()`'s text. Refused (the connector stays Python's): a
    /// text that is not one, and a state the engine could not continue exactly (times beyond
    /// ±2^62 ms, a window's record text Python did not write, a held decision without its rule
    /// and event time).
    pub fn from_json(text: &str) -> Result<State, String> {
        let state: State =
            serde_json::from_str(text).map_err(|e| format!("not a connector state: {e}"))?;
        state.check()?;
        Ok(state)
    }

    fn check(&self) -> Result<(), String> {
        let mut times: Vec<i64> = Vec::new();
        times.extend(self.watermark_ms);
        times.push(self.next_sweep_ms);
        times.extend(self.connector_status.iter().map(|s| s.time_ms));
        times.extend(self.tasks.values().map(|s| s.time_ms));
        for rule in self.rules.values() {
            times.extend(&rule.executed);
            times.extend(rule.last_executed_ms);
            for entries in rule.windows.values() {
                for entry in entries {
                    times.push(entry.0);
                    if let Some(record) = &entry.4 {
                        if parse_record(record).is_none() {
                            return Err(format!("a window's record {record:?} is not topic-p@o"));
                        }
                    }
                }
            }
        }
        if let Some(b) = self.restart_backoff {
            times.extend([b.attempts, b.last_ms]);
        }
        for i in self.inhibitions.values() {
            times.extend([i.since_ms, i.until_ms]);
        }
        for held in &self.held {
            times.push(held.since_ms);
            let rule = held.decision.get("rule").and_then(Value::as_str);
            let time = held.decision.get("event_time_ms").and_then(Value::as_i64);
            match (rule, time) {
                (Some(_), Some(t)) => times.push(t),
                _ => return Err("a held decision without its rule or event time".to_string()),
            }
            held.decision
                .values()
                .try_for_each(|v| check_floats("a held decision", v))?;
        }
        for d in &self.deferred {
            times.extend([d.time_ms, d.deferred_ms]);
            d.event
                .values()
                .try_for_each(|v| check_floats("a deferred event", v))?;
        }
        times.extend(self.released.values());
        for t in self.suppressed.values() {
            times.extend([t.window_start_ms, t.count]);
        }
        if times
            .iter()
            .any(|t| !(-TIME_LIMIT..=TIME_LIMIT).contains(t))
        {
            return Err("a time beyond ±2^62 ms".to_string());
        }
        Ok(())
    }
}

/// A record text `topic-partition@offset` read as `decide._record_dict` reads it (the last `@`,
/// then the last `-`), only when its numbers are written as Python writes ints (so `int()`
/// gives them exactly) and the offset leaves room for `next_offset`.
pub fn parse_record(text: &str) -> Option<(&str, i64, i64)> {
    let (rest, offset) = text.rsplit_once('@')?;
    let (topic, partition) = rest.rsplit_once('-')?;
    let partition = canonical_int(partition)?;
    let offset = canonical_int(offset)?;
    (offset < i64::MAX).then_some((topic, partition, offset))
}

fn canonical_int(text: &str) -> Option<i64> {
    let value: i64 = text.parse().ok()?;
    (value.to_string() == text).then_some(value)
}
