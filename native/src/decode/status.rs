//! `offsetd.events.status.decode_status`: connect-status records -> connector, task and topic
//! status events.
//!
//! Keys: `status-connector-<name>`, `status-task-<name>-<id>` (the id after the last `-`, at
//! most i32's maximum), `status-topic-<topic>:connector-<name>` (split at the first
//! `:connector-`). Values: `{"state","trace","worker_id","generation"}` (others ignored; a
//! FAILED status's non-empty trace gives `error`), `{"topic":{"task","discoverTimestamp"}}`;
//! null is a tombstone. The checks are Python's, in its order, so that what Python rejects is
//! `Left::Malformed` here before any reason of this side's own.

use super::json::{object_fields, Item, Refusal, Text};
use super::memo::{DecodeMemo, Head, StatusFields};
use super::text::{head_chars, number, utf8};
use super::trace::{trace_error, TRACE_HEAD_CHARS};
use super::{Left, RawRef};
use crate::event::{
    ConnectorStatusEvent, Event, Kind, SourceRecord, TaskStatusEvent, TopicStatusEvent,
};

const CONNECTOR: &str = "status-connector-";
const TASK: &str = "status-task-";
const TOPIC: &str = "status-topic-";
const TOPIC_SEP: &str = ":connector-";
const INT32_MAX: i64 = i32::MAX as i64;

/// `STATUS_STATES`: the states Connect's reader accepts.
const STATES: [&str; 7] = [
    "UNASSIGNED",
    "RUNNING",
    "PAUSED",
    "FAILED",
    "RESTARTING",
    "STOPPED",
    "DESTROYED",
];

pub fn source_of(raw: &RawRef<'_>) -> SourceRecord {
    SourceRecord {
        topic: raw.topic.to_owned(),
        partition: raw.partition.into(),
        offset: raw.offset,
        timestamp_ms: raw.timestamp_ms,
    }
}

/// What a status key is: a connector's or task's (`Head`), or a topic's (its text).
enum KeyHead<'a> {
    Head(Head),
    Topic(&'a str),
}

fn key_head(key: &[u8]) -> Result<KeyHead<'_>, Left> {
    let key = utf8(key).ok_or(Left::Malformed)?;
    if let Some(connector) = key.strip_prefix(CONNECTOR) {
        if connector.is_empty() {
            return Err(Left::Malformed);
        }
        return Ok(KeyHead::Head(Head {
            connector: connector.to_owned(),
            task_id: None,
        }));
    }
    if let Some(rest) = key.strip_prefix(TASK) {
        let (connector, task) = rest.rsplit_once('-').ok_or(Left::Malformed)?;
        if connector.is_empty() {
            return Err(Left::Malformed);
        }
        let task_id = number(task, INT32_MAX).ok_or(Left::Malformed)?;
        return Ok(KeyHead::Head(Head {
            connector: connector.to_owned(),
            task_id: Some(task_id),
        }));
    }
    if key.starts_with(TOPIC) {
        return Ok(KeyHead::Topic(key));
    }
    Err(Left::Malformed)
}

fn refused(refusal: Refusal) -> Left {
    match refusal {
        Refusal::Malformed => Left::Malformed,
        Refusal::Deep => Left::DeepJson,
        Refusal::LongInteger => Left::LongInteger,
    }
}

/// `decode_status(connect_cluster, raw)`, or why Python decides it.
pub fn decode_status(
    cluster: &str,
    raw: &RawRef<'_>,
    memo: &mut DecodeMemo,
) -> Result<Event, Left> {
    let key = raw.key.ok_or(Left::Malformed)?;
    let head = match memo.heads.get(key) {
        Some(head) => head.clone(),
        None => match key_head(key)? {
            KeyHead::Topic(text) => return topic_status(cluster, raw, text),
            KeyHead::Head(head) => {
                memo.remember_head(key, &head);
                head
            }
        },
    };
    let fields = match raw.value {
        None => None,
        Some(value) => Some(status_fields(value, memo)?),
    };
    let (state, worker_id, generation, error) = match fields {
        None => (None, None, None, None),
        Some(f) => (
            Some(f.state.to_owned()),
            f.worker_id,
            Some(f.generation),
            f.error,
        ),
    };
    let source = source_of(raw);
    let connect_cluster = cluster.to_owned();
    Ok(match head.task_id {
        None => Event::Connector(ConnectorStatusEvent {
            connect_cluster,
            connector: head.connector,
            source,
            kind: Kind::ConnectorStatus,
            state,
            worker_id,
            generation,
            error,
        }),
        Some(task_id) => Event::Task(TaskStatusEvent {
            connect_cluster,
            connector: head.connector,
            source,
            kind: Kind::TaskStatus,
            task_id,
            state,
            worker_id,
            generation,
            error,
        }),
    })
}

fn status_fields(value: &[u8], memo: &mut DecodeMemo) -> Result<StatusFields, Left> {
    if let Some(known) = memo.fields.get(value) {
        return Ok(known.clone());
    }
    let fields = checked_fields(value, memo)?;
    memo.remember_fields(value, &fields);
    Ok(fields)
}

/// `_optional_text`: None or a str, else Malformed (a lone surrogate: a str Python keeps).
fn optional_text<'a>(item: &'a Option<Item<'_>>) -> Result<Option<&'a Text<'a>>, Left> {
    match item {
        None | Some(Item::Null) => Ok(None),
        Some(Item::Str(text)) => Ok(Some(text)),
        Some(_) => Err(Left::Malformed),
    }
}

fn checked_fields(value: &[u8], memo: &mut DecodeMemo) -> Result<StatusFields, Left> {
    let text = utf8(value).ok_or(Left::Malformed)?;
    let found =
        object_fields(text, ["state", "generation", "trace", "worker_id"]).map_err(refused)?;
    let [state, generation, trace, worker_id] = found.ok_or(Left::Malformed)?;
    let state = match &state {
        Some(Item::Str(Text::Valid(s))) => STATES.iter().find(|known| **known == *s),
        _ => None,
    }
    .ok_or(Left::Malformed)?;
    let generation = match generation {
        Some(Item::Int(g)) => Ok(g),
        Some(Item::BigInt { .. }) => Err(Left::BigInteger), // after the checks below
        _ => return Err(Left::Malformed),
    };
    let trace = optional_text(&trace)?;
    let worker_id = optional_text(&worker_id)?;
    let generation = generation?;
    let worker_id = match worker_id {
        None => None,
        Some(Text::Valid(w)) => Some(w.to_string()),
        Some(Text::LoneSurrogate) => return Err(Left::LoneSurrogate),
    };
    let error = match trace {
        Some(Text::Valid(t)) if !t.is_empty() && *state == "FAILED" => {
            let head = head_chars(t, TRACE_HEAD_CHARS);
            Some(memo.status_error(head, || trace_error(head)))
        }
        Some(Text::LoneSurrogate) if *state == "FAILED" => return Err(Left::LoneSurrogate),
        _ => None,
    };
    Ok(StatusFields {
        state,
        worker_id,
        generation,
        error,
    })
}

/// `_topic_status`: a topic status event (deleted for a tombstone).
fn topic_status(cluster: &str, raw: &RawRef<'_>, key: &str) -> Result<Event, Left> {
    let (topic, connector) = key[TOPIC.len()..]
        .split_once(TOPIC_SEP)
        .ok_or(Left::Malformed)?;
    if topic.is_empty() || connector.is_empty() {
        return Err(Left::Malformed);
    }
    let (task_id, discovered_ms, deleted) = match raw.value {
        None => (None, None, true),
        Some(value) => {
            let (task, discovered) = topic_fields(value)?;
            (Some(task), Some(discovered), false)
        }
    };
    Ok(Event::Topic(TopicStatusEvent {
        connect_cluster: cluster.to_owned(),
        connector: connector.to_owned(),
        source: source_of(raw),
        kind: Kind::TopicStatus,
        topic: topic.to_owned(),
        task_id,
        discovered_ms,
        deleted,
    }))
}

/// The task and discovery time of `{"topic": {"task": ..., "discoverTimestamp": ...}}`.
fn topic_fields(value: &[u8]) -> Result<(i64, i64), Left> {
    let text = utf8(value).ok_or(Left::Malformed)?;
    let [topic] = object_fields(text, ["topic"])
        .map_err(refused)?
        .ok_or(Left::Malformed)?;
    let Some(Item::Object(inner)) = topic else {
        return Err(Left::Malformed);
    };
    let [task, discovered] = object_fields(inner, ["task", "discoverTimestamp"])
        .map_err(refused)?
        .ok_or(Left::Malformed)?;
    let integer =
        |item: &Option<Item<'_>>| matches!(item, Some(Item::Int(_) | Item::BigInt { .. }));
    if !integer(&task) || !integer(&discovered) {
        return Err(Left::Malformed); // `type(...) is not int`: floats and booleans too
    }
    match (task, discovered) {
        (Some(Item::Int(task)), _) if task < 0 => Err(Left::Malformed),
        (Some(Item::BigInt { negative: true }), _) => Err(Left::Malformed),
        (Some(Item::Int(task)), Some(Item::Int(discovered))) => Ok((task, discovered)),
        _ => Err(Left::BigInteger), // a Python int all the same: pydantic takes it
    }
}
