//! `offsetd.events.dlq.decode_dlq`: a sink's dead letter queue record -> a DLQ event.
//!
//! Only the `__connect.errors.*` headers are read (as UTF-8 text, the last of a name wins, in
//! the place of its first). The daemon's wiring calls `decode_dlq(cluster, raw)` without
//! `connector=`: the owner is the `__connect.errors.connector.name` header, and a record
//! without one is Malformed there, so it is here.

use super::memo::{DecodeMemo, DlqErrorRef};
use super::status::source_of;
use super::text::{head_chars, number, utf8};
use super::trace::{first_line, last_cause, TRACE_HEAD_CHARS};
use super::{Left, RawRef};
use crate::event::{DlqRecordEvent, ErrorInfo, Event, Kind, RecordRef};

pub const PREFIX: &str = "__connect.errors.";
const TOPIC: &str = "__connect.errors.topic";
const PARTITION: &str = "__connect.errors.partition";
const OFFSET: &str = "__connect.errors.offset";
const CONNECTOR: &str = "__connect.errors.connector.name";
const TASK: &str = "__connect.errors.task.id";
const STAGE: &str = "__connect.errors.stage";
const CLASS: &str = "__connect.errors.class.name";
const EXCEPTION: &str = "__connect.errors.exception.class.name";
const MESSAGE: &str = "__connect.errors.exception.message";
const STACKTRACE: &str = "__connect.errors.exception.stacktrace";

/// The context headers by name, in the order of each name's first: a handful, so a list
/// searched from the front beats hashing each name.
type Headers<'a> = Vec<(&'a str, Option<&'a str>)>;

/// `_context_headers`: every context header as text; Malformed if one is not UTF-8.
fn context_headers<'a>(raw: &RawRef<'a>) -> Result<Headers<'a>, Left> {
    let mut found = Headers::with_capacity(raw.headers.len());
    for &(name, value) in &raw.headers {
        if name.starts_with(PREFIX) {
            let text = match value {
                None => None,
                Some(bytes) => Some(utf8(bytes).ok_or(Left::Malformed)?),
            };
            match found.iter_mut().find(|(known, _)| *known == name) {
                Some(entry) => entry.1 = text, // the last wins, in the place of the first
                None => found.push((name, text)),
            }
        }
    }
    Ok(found)
}

fn get<'a>(headers: &Headers<'a>, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(known, _)| *known == name)
        .and_then(|(_, text)| *text)
}

/// `x or None` for a header: an empty text is none.
fn given<'a>(headers: &Headers<'a>, name: &str) -> Option<&'a str> {
    get(headers, name).filter(|text| !text.is_empty())
}

/// `decode_dlq(connect_cluster, raw)` (no `connector=`), or why Python decides it.
pub fn decode_dlq(cluster: &str, raw: &RawRef<'_>, memo: &mut DecodeMemo) -> Result<Event, Left> {
    let headers = context_headers(raw)?;
    let owner = given(&headers, CONNECTOR).ok_or(Left::Malformed)?;
    let task_id = match get(&headers, TASK) {
        None => None,
        Some(task) => Some(number(task, i32::MAX.into()).ok_or(Left::Malformed)?),
    };
    let record = record_ref(&headers);
    let head = head_chars(get(&headers, STACKTRACE).unwrap_or(""), TRACE_HEAD_CHARS);
    let key = DlqErrorRef([
        get(&headers, EXCEPTION),
        get(&headers, MESSAGE),
        Some(head),
        get(&headers, STAGE),
        get(&headers, CLASS),
    ]);
    let error = memo.dlq_error(key, || error_of(&headers, head));
    Ok(Event::Dlq(DlqRecordEvent {
        connect_cluster: cluster.to_owned(),
        connector: owner.to_owned(),
        source: source_of(raw),
        kind: Kind::DlqRecord,
        task_id,
        record,
        error,
        headers: headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.map(str::to_owned)))
            .collect(),
    }))
}

/// `_record_ref`: the failing record when its topic, partition and offset are all there.
fn record_ref(headers: &Headers<'_>) -> Option<RecordRef> {
    let topic = given(headers, TOPIC)?;
    let partition = number(get(headers, PARTITION)?, i32::MAX.into())?;
    let offset = number(get(headers, OFFSET)?, i64::MAX)?;
    Some(RecordRef {
        topic: topic.to_owned(),
        partition,
        offset,
    })
}

/// `_error`: the exception from its headers (else the trace's first line), the root cause
/// from the trace head's last `Caused by:`.
fn error_of(headers: &Headers<'_>, head: &str) -> ErrorInfo {
    let (first_class, first_message) = first_line(head);
    let exception_class = given(headers, EXCEPTION).or(first_class);
    let message = given(headers, MESSAGE).or(first_message);
    let (root_class, root_message) = match last_cause(head) {
        Some((class, message)) => (Some(class), message),
        None => (exception_class, message),
    };
    ErrorInfo {
        exception_class: exception_class.map(str::to_owned),
        message: message.map(str::to_owned),
        root_cause_class: root_class.map(str::to_owned),
        root_cause_message: root_message.map(str::to_owned),
        stage: given(headers, STAGE).map(str::to_owned),
        executing_class: given(headers, CLASS).map(str::to_owned),
        trace_head: head.to_owned(),
    }
}
