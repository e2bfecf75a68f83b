//! Deciding: `offsetd.engine.decide` (windows, limits, firings), the state, folding.
//!
//! The Python engine is the reference (`offsetd.engine.decide._decide` with `light=True`, what
//! the daemon runs). Each module mirrors one Python module so a step reads next to its
//! original: `state` (`engine.state`), `counting` (`engine.counting`), `decide`
//! (`engine.decide`), `firing` (`engine.decision`), `tally` (`engine.tally`). `py` is the
//! binding the differential tests drive.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value};

pub mod counting;
pub mod decide;
pub mod firing;
pub mod py;
pub mod pyjson;
pub mod state;
pub mod tally;

pub use decide::Refusal;

/// Durations and times the program may hold: below 2^53 ms (285,000 years), so that every sum
/// and difference of a time (within ±2^62, `decide::TIME_LIMIT`) and a duration fits an i64,
/// and a duration converts to a float exactly, as Python's arithmetic on ints does.
pub const DURATION_LIMIT: i64 = 1 << 53;

/// A restart backoff (`offsetd.rules.actions.Backoff`), in ms.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    pub initial: i64,
    pub max: i64,
    pub factor: f64,
    pub reset_after: i64,
}

/// One action of a rule as the engine plans it (`offsetd.rules.ruleset.CompiledAction`).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EngineAction {
    #[serde(rename = "type")]
    pub type_: Arc<str>,
    /// `Action.planned_params()`: JSON values, in their order.
    pub params: Map<String, Value>,
    /// Set for the actions whose effects say `backoff`.
    pub backoff: Option<BackoffSpec>,
    pub skips_record: bool,
}

/// A rule's `inhibits`: the rules it suppresses, and for how long (ms).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct InhibitSpec {
    pub rules: Vec<String>,
    pub for_ms: i64,
}

/// A part of a count key (`offsetd.rules.models.COUNT_KEYS`).
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KeyField {
    Connector,
    TaskId,
    Record,
    ExceptionClass,
    RootCauseClass,
}

impl KeyField {
    pub fn name(self) -> &'static str {
        match self {
            KeyField::Connector => "connector",
            KeyField::TaskId => "task_id",
            KeyField::Record => "record",
            KeyField::ExceptionClass => "exception_class",
            KeyField::RootCauseClass => "root_cause_class",
        }
    }
}

/// What the engine needs of one rule (`offsetd.rules.program.engine.engine_part`).
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct EngineRule {
    pub mode: Arc<str>,
    pub enabled: bool,
    pub count: i64,
    pub within_ms: i64,
    pub key: Vec<KeyField>,
    pub keys_record: bool,
    pub cooldown_ms: i64,
    pub budget_max: i64,
    pub budget_per_ms: i64,
    pub inhibits: Option<InhibitSpec>,
    pub has_skip: bool,
    pub needs_meta: bool,
    pub actions: Vec<EngineAction>,
    pub action_types: Arc<[Arc<str>]>,
}

/// The rule set's horizons (`offsetd.rules.program.engine.engine_set_part`).
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct EngineSet {
    pub restart_reset_ms: i64,
    pub meta_within_ms: i64,
    pub limits_horizon_ms: i64,
    pub meta_rules: Vec<String>,
}

/// A compiled rule: its name (shared by every decision and state entry it makes) and its part.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: Arc<str>,
    pub part: EngineRule,
}

/// The rule set as the engine decides with it: rules in load order, by name, and the horizons.
#[derive(Debug, Clone)]
pub struct Engine {
    pub rules: Vec<Rule>,
    pub by_name: HashMap<Arc<str>, usize>,
    pub set: EngineSet,
    /// `offsetd.engine.decide.MAX_KEYS` (the tests lower it, as the Python tests patch it).
    pub max_keys: usize,
}

pub const MAX_KEYS: usize = 128;

impl Engine {
    /// The engine of a rule program; refuses one it cannot decide exactly as Python does.
    pub fn new(program: &crate::program::Program, max_keys: usize) -> Result<Engine, String> {
        let mut rules = Vec::with_capacity(program.rules.len());
        let mut by_name = HashMap::new();
        for (i, rule) in program.rules.iter().enumerate() {
            check_rule(&rule.name, &rule.engine)?;
            let name: Arc<str> = Arc::from(rule.name.as_str());
            if by_name.insert(name.clone(), i).is_some() {
                return Err(format!("two rules are named {:?}", rule.name));
            }
            rules.push(Rule {
                name,
                part: rule.engine.clone(),
            });
        }
        let set = program.engine.clone();
        for value in [
            set.restart_reset_ms,
            set.meta_within_ms,
            set.limits_horizon_ms,
        ] {
            check_duration("the rule set's horizons", value)?;
        }
        let needing: Vec<&str> = rules
            .iter()
            .filter(|r| r.part.needs_meta)
            .map(|r| &*r.name)
            .collect();
        if needing
            != set
                .meta_rules
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
        {
            return Err("meta_rules is not the rules that need metadata".to_string());
        }
        if max_keys == 0 {
            return Err("max_keys must be positive".to_string());
        }
        Ok(Engine {
            rules,
            by_name,
            set,
            max_keys,
        })
    }

    /// The index of a rule by its name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

fn check_duration(what: &str, value: i64) -> Result<(), String> {
    if (0..DURATION_LIMIT).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{what}: {value} ms is beyond what the compiled engine holds"
        ))
    }
}

/// Refuses a rule whose numbers or parameters the compiled engine would not reproduce exactly.
fn check_rule(name: &str, rule: &EngineRule) -> Result<(), String> {
    let what = format!("rule {name:?}");
    for value in [
        rule.within_ms,
        rule.cooldown_ms,
        rule.budget_per_ms,
        rule.count,
        rule.budget_max,
    ] {
        check_duration(&what, value)?;
    }
    if let Some(inhibits) = &rule.inhibits {
        check_duration(&what, inhibits.for_ms)?;
    }
    if rule.action_types.len() != rule.actions.len()
        || rule
            .actions
            .iter()
            .zip(rule.action_types.iter())
            .any(|(a, t)| a.type_ != *t)
    {
        return Err(format!("{what}: action_types are not its actions' types"));
    }
    if rule.keys_record != rule.key.contains(&KeyField::Record) {
        return Err(format!("{what}: keys_record does not follow its key"));
    }
    for action in &rule.actions {
        if let Some(b) = &action.backoff {
            for value in [b.initial, b.max, b.reset_after] {
                check_duration(&what, value)?;
            }
            if !(b.factor.is_finite() && (1.0..=10.0).contains(&b.factor)) {
                return Err(format!("{what}: backoff factor {} out of range", b.factor));
            }
        }
        for value in action.params.values() {
            check_floats(&what, value)?;
        }
    }
    Ok(())
}

/// pydantic writes a float as Python's `repr` does past 1e16 and below 1e-4 (`1e+16`,
/// `1e-05`), serde_json as `1e16`, `1e-5`: a value out there cannot be written equal (nor an
/// integer beyond u64, which serde_json reads as a float).
pub fn check_floats(what: &str, value: &Value) -> Result<(), String> {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            let magnitude = f.abs();
            if f == 0.0 || (1e-4..1e15).contains(&magnitude) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: the parameter {f} would not be written as Python writes it"
                ))
            }
        }
        Value::Array(items) => items.iter().try_for_each(|v| check_floats(what, v)),
        Value::Object(map) => map.values().try_for_each(|v| check_floats(what, v)),
        _ => Ok(()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
