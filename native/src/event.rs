//! The events of `offsetd.events.models`, as plain structs.
//!
//! Field order and names are the pydantic models' own: `serde_json::to_string(&event)` is
//! byte for byte what `event.model_dump_json()` writes, and Python's JSON of an event
//! deserializes here (`Event::from_json`). That equality is what the differential tests hold
//! the compiled path to.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Where an event came from: its Kafka coordinates and record timestamp (event time).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceRecord {
    pub topic: String,
    pub partition: i64,
    pub offset: i64,
    pub timestamp_ms: i64,
}

/// What failed: read from a FAILED status trace or a DLQ record's error headers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ErrorInfo {
    pub exception_class: Option<String>,
    pub message: Option<String>,
    pub root_cause_class: Option<String>,
    pub root_cause_message: Option<String>,
    pub stage: Option<String>,
    pub executing_class: Option<String>,
    pub trace_head: String,
}

/// A Kafka record, exactly: the failing record of a DLQ event.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordRef {
    pub topic: String,
    pub partition: i64,
    pub offset: i64,
}

/// `status-connector-<name>`; `state: None` is a tombstone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConnectorStatusEvent {
    pub connect_cluster: String,
    pub connector: String,
    pub source: SourceRecord,
    pub kind: Kind,
    pub state: Option<String>,
    pub worker_id: Option<String>,
    pub generation: Option<i64>,
    pub error: Option<std::sync::Arc<ErrorInfo>>,
}

/// `status-task-<name>-<id>`; `state: None` is a tombstone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaskStatusEvent {
    pub connect_cluster: String,
    pub connector: String,
    pub source: SourceRecord,
    pub kind: Kind,
    pub task_id: i64,
    pub state: Option<String>,
    pub worker_id: Option<String>,
    pub generation: Option<i64>,
    pub error: Option<std::sync::Arc<ErrorInfo>>,
}

/// `status-topic-<topic>:connector-<name>` (KIP-558).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopicStatusEvent {
    pub connect_cluster: String,
    pub connector: String,
    pub source: SourceRecord,
    pub kind: Kind,
    pub topic: String,
    pub task_id: Option<i64>,
    pub discovered_ms: Option<i64>,
    pub deleted: bool,
}

/// A record a sink task sent to its dead letter queue, with its `__connect.errors.*` context.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DlqRecordEvent {
    pub connect_cluster: String,
    pub connector: String,
    pub source: SourceRecord,
    pub kind: Kind,
    pub task_id: Option<i64>,
    pub record: Option<RecordRef>,
    pub error: std::sync::Arc<ErrorInfo>,
    pub headers: IndexMap<String, Option<String>>,
}

/// The kinds, as `EventKind`'s values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ConnectorStatus,
    TaskStatus,
    TopicStatus,
    DlqRecord,
    SourceOffset,
    Progress,
}

/// One event of the kinds the compiled path decodes. Source offsets and progress events stay
/// Python's (rare, and not on a storm's path): the owner hands them over as they are.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Event {
    Connector(ConnectorStatusEvent),
    Task(TaskStatusEvent),
    Topic(TopicStatusEvent),
    Dlq(DlqRecordEvent),
}

impl Event {
    pub fn kind(&self) -> Kind {
        match self {
            Event::Connector(_) => Kind::ConnectorStatus,
            Event::Task(_) => Kind::TaskStatus,
            Event::Topic(_) => Kind::TopicStatus,
            Event::Dlq(_) => Kind::DlqRecord,
        }
    }

    pub fn source(&self) -> &SourceRecord {
        match self {
            Event::Connector(e) => &e.source,
            Event::Task(e) => &e.source,
            Event::Topic(e) => &e.source,
            Event::Dlq(e) => &e.source,
        }
    }

    pub fn connect_cluster(&self) -> &str {
        match self {
            Event::Connector(e) => &e.connect_cluster,
            Event::Task(e) => &e.connect_cluster,
            Event::Topic(e) => &e.connect_cluster,
            Event::Dlq(e) => &e.connect_cluster,
        }
    }

    pub fn connector(&self) -> &str {
        match self {
            Event::Connector(e) => &e.connector,
            Event::Task(e) => &e.connector,
            Event::Topic(e) => &e.connector,
            Event::Dlq(e) => &e.connector,
        }
    }

    /// The event's task id; None for a connector status (and a topic status or DLQ record
    /// that names none).
    pub fn task_id(&self) -> Option<i64> {
        match self {
            Event::Connector(_) => None,
            Event::Task(e) => Some(e.task_id),
            Event::Topic(e) => e.task_id,
            Event::Dlq(e) => e.task_id,
        }
    }

    /// A status event's state (None: a tombstone, or a kind without a state).
    pub fn state(&self) -> Option<&str> {
        match self {
            Event::Connector(e) => e.state.as_deref(),
            Event::Task(e) => e.state.as_deref(),
            _ => None,
        }
    }

    pub fn error(&self) -> Option<&ErrorInfo> {
        match self {
            Event::Connector(e) => e.error.as_deref(),
            Event::Task(e) => e.error.as_deref(),
            Event::Dlq(e) => Some(&e.error),
            Event::Topic(_) => None,
        }
    }

    /// The event as `model_dump_json()` writes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event always serializes")
    }

    /// An event from Python's JSON of it (`model_dump_json()`), by its `kind`.
    pub fn from_json(text: &str) -> Result<Event, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let made = match kind {
            "connector_status" => serde_json::from_value(value).map(Event::Connector),
            "task_status" => serde_json::from_value(value).map(Event::Task),
            "topic_status" => serde_json::from_value(value).map(Event::Topic),
            "dlq_record" => serde_json::from_value(value).map(Event::Dlq),
            other => return Err(format!("not a kind the compiled path decodes: {other:?}")),
        };
        made.map_err(|e| e.to_string())
    }
}
