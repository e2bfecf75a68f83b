//! `offsetd.engine.decision`: a `Decision` (its JSON is `Decision.model_dump_json()`), the light
//! `Suppression` the daemon keeps for cooldown, budget and `enabled: false`, and their id.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::event::{RecordRef, SourceRecord};

/// One planned action with the parameters the engine computed.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct PlannedAction {
    #[serde(rename = "type")]
    pub type_: Arc<str>,
    pub params: Map<String, Value>,
}

/// The triggering event, compactly (`EventSummary`; the progress fields are always empty for
/// the kinds the compiled engine decides).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct EventSummary {
    pub kind: &'static str,
    pub state: Option<String>,
    pub task_id: Option<i64>,
    pub exception_class: Option<String>,
    pub root_cause_class: Option<String>,
    pub stage: Option<String>,
    pub record: Option<RecordRef>,
    pub progress: Option<String>,
    pub held_ms: Option<i64>,
    pub detail: Option<String>,
    pub stuck_with: [String; 0],
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct DecisionInputs {
    pub events: Vec<SourceRecord>,
    pub trigger: Arc<EventSummary>,
}

/// A plan (or a suppressed one), field for field `offsetd.engine.decision.Decision`.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Decision {
    pub id: String,
    pub rule: Arc<str>,
    pub mode: Arc<str>,
    pub connect_cluster: String,
    pub connector: String,
    pub task_id: Option<i64>,
    pub key: String,
    pub actions: Vec<PlannedAction>,
    pub record: Option<RecordRef>,
    pub record_status: Option<&'static str>,
    pub outcome: &'static str,
    pub reason: Option<&'static str>,
    pub detail: Option<String>,
    pub inhibited_by: Option<Arc<str>>,
    pub event_time_ms: i64,
    pub decided_at_ms: i64,
    pub inputs: DecisionInputs,
}

impl Decision {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a decision always serializes")
    }

    /// Its audit record's text (`audit_json(decision.audit_record(rules))`): the decision as
    /// `json.dumps` writes `model_dump(mode="json")`, its rule's spec (`RuleSpec.text`)
    /// spliced in last when given.
    pub fn audit_json(&self, rule_spec: Option<&str>) -> String {
        let value = serde_json::to_value(self).expect("a decision always serializes");
        let mut out = String::with_capacity(2048);
        super::pyjson::push_value(&mut out, &value);
        if let Some(spec) = rule_spec {
            out.pop(); // the closing brace
            out.push_str(", \"rule_spec\": ");
            out.push_str(spec);
            out.push('}');
        }
        out
    }

    /// The counted event at the decision's event time (the newest): its trigger.
    pub fn trigger_source(&self) -> &SourceRecord {
        let events = &self.inputs.events;
        events
            .iter()
            .rev()
            .find(|e| e.timestamp_ms == self.event_time_ms)
            .or(events.last())
            .expect("a decision counts at least one event")
    }

    /// `Decision.from_failure`: caused by a failure (a FAILED status or a DLQ record), so it
    /// can trip the breaker.
    pub fn from_failure(&self) -> bool {
        let trigger = &self.inputs.trigger;
        trigger.kind == "dlq_record" || trigger.state.as_deref() == Some("FAILED")
    }

    pub fn record_text(&self) -> Option<String> {
        self.record
            .as_ref()
            .map(|r| format!("{}-{}@{}", r.topic, r.partition, r.offset))
    }
}

/// A firing cooldown, budget or `enabled: false` suppressed: what its tally reads.
#[derive(Clone, Debug)]
pub struct Suppression {
    pub rule: Arc<str>,
    pub mode: Arc<str>,
    pub connect_cluster: String,
    pub connector: String,
    pub task_id: Option<i64>,
    pub key: String,
    pub action_types: Arc<[Arc<str>]>,
    pub reason: &'static str,
    pub detail: String,
    pub event_time_ms: i64,
    pub decided_at_ms: i64,
    pub trigger_source: SourceRecord,
    pub record_text: Option<Arc<str>>,
    pub from_failure: bool,
    /// The id, made when first asked (most suppressions are folded without it).
    id: OnceLock<String>,
}

impl Suppression {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rule: Arc<str>,
        mode: Arc<str>,
        connect_cluster: String,
        connector: String,
        task_id: Option<i64>,
        key: String,
        action_types: Arc<[Arc<str>]>,
        reason: &'static str,
        detail: String,
        event_time_ms: i64,
        decided_at_ms: i64,
        trigger_source: SourceRecord,
        record_text: Option<Arc<str>>,
        from_failure: bool,
    ) -> Suppression {
        Suppression {
            rule,
            mode,
            connect_cluster,
            connector,
            task_id,
            key,
            action_types,
            reason,
            detail,
            event_time_ms,
            decided_at_ms,
            trigger_source,
            record_text,
            from_failure,
            id: OnceLock::new(),
        }
    }

    pub fn id(&self) -> &str {
        self.id.get_or_init(|| {
            decision_id(
                &self.rule,
                &self.connect_cluster,
                &self.connector,
                &self.key,
                &self.trigger_source,
            )
        })
    }

    /// The binding's JSON of a suppression: its fields, `outcome` and `id` (see the .pyi).
    pub fn to_json(&self) -> String {
        let value = serde_json::json!({
            "id": self.id(),
            "rule": &*self.rule,
            "mode": &*self.mode,
            "connect_cluster": self.connect_cluster,
            "connector": self.connector,
            "task_id": self.task_id,
            "key": self.key,
            "action_types": self.action_types.iter().map(|t| &**t).collect::<Vec<_>>(),
            "outcome": "suppressed",
            "reason": self.reason,
            "detail": self.detail,
            "event_time_ms": self.event_time_ms,
            "decided_at_ms": self.decided_at_ms,
            "trigger_source": self.trigger_source,
            "record_text": self.record_text.as_deref(),
            "from_failure": self.from_failure,
        });
        value.to_string()
    }
}

/// What the engine makes of a firing (`decide_firings`).
#[derive(Clone, Debug)]
pub enum Firing {
    Decision(Arc<Decision>),
    Suppression(Arc<Suppression>),
}

impl Firing {
    pub fn to_json(&self) -> String {
        match self {
            Firing::Decision(d) => d.to_json(),
            Firing::Suppression(s) => s.to_json(),
        }
    }

    pub fn id(&self) -> &str {
        match self {
            Firing::Decision(d) => &d.id,
            Firing::Suppression(s) => s.id(),
        }
    }

    pub fn outcome(&self) -> &'static str {
        match self {
            Firing::Decision(d) => d.outcome,
            Firing::Suppression(_) => "suppressed",
        }
    }
}

/// `decision_id`: sha256 of the rule, cluster, connector, count key and the trigger's
/// coordinates joined by `\x1f`, its first 32 hex digits.
pub fn decision_id(
    rule: &str,
    connect_cluster: &str,
    connector: &str,
    key: &str,
    source: &SourceRecord,
) -> String {
    let mut hasher = Sha256::new();
    for (i, part) in [rule, connect_cluster, connector, key, &source.topic]
        .iter()
        .enumerate()
    {
        if i > 0 {
            hasher.update(b"\x1f");
        }
        hasher.update(part.as_bytes());
    }
    let mut tail = String::with_capacity(42);
    let _ = write!(tail, "\x1f{}\x1f{}", source.partition, source.offset);
    hasher.update(tail.as_bytes());
    hex32(&hasher.finalize())
}

/// The first 32 hex digits of a digest, as `hexdigest()[:32]`.
pub fn hex32(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(32);
    for byte in &digest[..16] {
        out.push(HEX[(byte >> 4) as usize] as char);
        out.push(HEX[(byte & 15) as usize] as char);
    }
    out
}
