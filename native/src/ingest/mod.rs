//! The ingest's framing (`offsetd.ingest.Ingest._route` and `offsetd.events.frames`'
//! `route_*`, `plan_frames` and `encode_frame`): a consumed batch in, one frame per owner out.
//!
//! The same frames, byte for byte, as the Python: each record routed to its owner key
//! (`<connect-cluster>/<connector>`, from its key or one header), encoded as a frame carries it
//! (a DLQ topic's record: its `__connect.errors.*` headers only, the stack trace cut to its first
//! 4,096 characters), grouped per owner in consumption order into frames of at most
//! `max_frame_bytes`, a record larger than `max_record_bytes` left out. A record this code
//! cannot route itself (an offsets topic's, or one the Python router would refuse) is routed by
//! the Python callback, so every refusal keeps the Python's words. Tested against the Python in
//! tests/unit/native/test_native_ingest.py.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

const FRAME_VERSION: u8 = 1;
const DLQ_PREFIX: &str = "__connect.errors.";
const H_CONNECTOR: &str = "__connect.errors.connector.name";
const H_STACKTRACE: &str = "__connect.errors.exception.stacktrace";
const TRACE_HEAD_CHARS: usize = 4096;
const STATUS_CONNECTOR: &[u8] = b"status-connector-";
const STATUS_TASK: &[u8] = b"status-task-";
const STATUS_TOPIC: &[u8] = b"status-topic-";
const TOPIC_SEPARATOR: &[u8] = b":connector-";

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Framer>()?;
    Ok(())
}

/// How a topic's records find their owner.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// `frames.route_status`: from the key.
    Status,
    /// `frames.route_dlq`: the last `__connect.errors.connector.name` header.
    Dlq,
    /// `frames.route_status_or_dlq`: a status key without headers is a status record, the rest
    /// DLQ records (a topic that carries both).
    StatusOrDlq,
    /// Any other router: the Python callback routes every record.
    Python,
}

struct Source {
    cluster: String,
    route: Route,
    /// Frame only the `__connect.errors.*` headers (a DLQ topic).
    dlq: bool,
}

/// One owner's frame being filled: its records' topics (in order of first use) and body.
struct Group {
    owner: String,
    topics: Vec<String>,
    body: Vec<u8>,
    bytes: usize,
    count: usize,
}

impl Group {
    fn new(owner: String) -> Group {
        Group {
            owner,
            topics: Vec::new(),
            body: Vec::new(),
            bytes: 0,
            count: 0,
        }
    }

    fn topic_index(&mut self, topic: &str) -> u16 {
        match self.topics.iter().position(|t| t == topic) {
            Some(i) => i as u16,
            None => {
                self.topics.push(topic.to_owned());
                (self.topics.len() - 1) as u16
            }
        }
    }

    /// `encode_frame`: the version, the topics, then the records.
    fn frame(&self) -> Vec<u8> {
        let head: usize = 3 + self.topics.iter().map(|t| 2 + t.len()).sum::<usize>();
        let mut out = Vec::with_capacity(head + self.body.len());
        out.push(FRAME_VERSION);
        out.extend_from_slice(&(self.topics.len() as u16).to_be_bytes());
        for topic in &self.topics {
            out.extend_from_slice(&(topic.len() as u16).to_be_bytes());
            out.extend_from_slice(topic.as_bytes());
        }
        out.extend_from_slice(&self.body);
        out
    }
}

/// A batch's frames (owner, value, records), too large records (index, framed size), error
/// messages (index) and positions ((topic, partition) -> next offset).
type Plan<'py> = (
    Vec<(String, Py<PyBytes>, usize)>,
    Vec<(usize, usize)>,
    Vec<usize>,
    Bound<'py, PyDict>,
);

/// The ingest's framing for one set of sources, made once per ingest.
#[pyclass(module = "offsetd_native")]
pub struct Framer {
    sources: HashMap<String, Source>,
    max_frame_bytes: usize,
    max_record_bytes: usize,
}

/// One record's parts, borrowed from its message for the length of a batch.
struct Parts<'py> {
    key: Option<Bound<'py, PyBytes>>,
    value: Option<Bound<'py, PyBytes>>,
    headers: Vec<(Bound<'py, PyString>, Option<Bound<'py, PyBytes>>)>,
}

#[pymethods]
impl Framer {
    /// `sources`: topic -> (Connect cluster, route, dlq) with route one of "status", "dlq",
    /// "status_or_dlq" or "python".
    #[new]
    fn new(
        sources: HashMap<String, (String, String, bool)>,
        max_frame_bytes: usize,
        max_record_bytes: usize,
    ) -> PyResult<Framer> {
        let mut made = HashMap::new();
        for (topic, (cluster, route, dlq)) in sources {
            let route = match route.as_str() {
                "status" => Route::Status,
                "dlq" => Route::Dlq,
                "status_or_dlq" => Route::StatusOrDlq,
                "python" => Route::Python,
                other => return Err(PyValueError::new_err(format!("unknown route {other:?}"))),
            };
            made.insert(
                topic,
                Source {
                    cluster,
                    route,
                    dlq,
                },
            );
        }
        Ok(Framer {
            sources: made,
            max_frame_bytes: max_frame_bytes.min(max_record_bytes),
            max_record_bytes,
        })
    }

    /// Frame a consumed batch (confluent-kafka messages, in order).
    ///
    /// Returns `(frames, too_large, errors, positions)`: each frame as (owner, value, records);
    /// (index, framed size) of the records no frame can carry; the indices of the messages that
    /// carry an error instead of a record; (topic, partition) -> the next offset. `route(index)`
    /// routes a record this code cannot (the Python router): its owner, or None when it names
    /// no connector (the callback has reported it).
    fn plan<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyList>,
        route: &Bound<'py, PyAny>,
    ) -> PyResult<Plan<'py>> {
        let mut frames: Vec<(String, Py<PyBytes>, usize)> = Vec::new();
        let mut too_large: Vec<(usize, usize)> = Vec::new();
        let mut errors: Vec<usize> = Vec::new();
        let positions = PyDict::new(py);
        let mut groups: Vec<Group> = Vec::new();
        let mut by_owner: HashMap<String, usize> = HashMap::new();
        let mut chunk: Vec<u8> = Vec::with_capacity(1024);
        for (index, msg) in batch.iter().enumerate() {
            if !msg.call_method0(intern!(py, "error"))?.is_none() {
                errors.push(index);
                continue;
            }
            let topic_obj = msg.call_method0(intern!(py, "topic"))?;
            let topic: String = if topic_obj.is_none() {
                String::new()
            } else {
                topic_obj.extract()?
            };
            let partition: i64 = optional_int(&msg.call_method0(intern!(py, "partition"))?)?;
            let offset: i64 = optional_int(&msg.call_method0(intern!(py, "offset"))?)?;
            positions.set_item(
                PyTuple::new(
                    py,
                    [topic_obj.clone(), partition.into_pyobject(py)?.into_any()],
                )?,
                offset + 1,
            )?;
            let Some(source) = self.sources.get(&topic) else {
                continue;
            };
            let stamp = msg.call_method0(intern!(py, "timestamp"))?;
            let (kind, timestamp): (i64, i64) = stamp.extract()?;
            let timestamp = if kind != 0 { timestamp } else { -1 };
            let parts = parts_of(py, &msg)?;
            let owner = match self.route(source, &parts)? {
                Some(owner) => Some(owner),
                None => {
                    let routed = route.call1((index,))?;
                    if routed.is_none() {
                        None
                    } else {
                        Some(routed.extract::<String>()?)
                    }
                }
            };
            let Some(owner) = owner else {
                continue;
            };
            chunk.clear();
            encode_record(&mut chunk, partition, offset, timestamp, &parts, source.dlq)?;
            let size = 2 + chunk.len();
            if size > self.max_record_bytes {
                too_large.push((index, size));
                continue;
            }
            let at = match by_owner.get(&owner) {
                Some(&at) if groups[at].bytes + size > self.max_frame_bytes => {
                    let full = std::mem::replace(&mut groups[at], Group::new(owner.clone()));
                    frames.push(finish(py, full));
                    at
                }
                Some(&at) => at,
                None => {
                    groups.push(Group::new(owner.clone()));
                    by_owner.insert(owner, groups.len() - 1);
                    groups.len() - 1
                }
            };
            let group = &mut groups[at];
            let topic_index = group.topic_index(&topic);
            group.body.extend_from_slice(&topic_index.to_be_bytes());
            group.body.extend_from_slice(&chunk);
            group.bytes += size;
            group.count += 1;
        }
        // The groups left, in order of their owners' first records (`plan_frames`' dict).
        for group in groups {
            if group.count > 0 {
                frames.push(finish(py, group));
            }
        }
        Ok((frames, too_large, errors, positions))
    }
}

impl Framer {
    /// The owner key when this code can route the record itself (None: the Python decides).
    fn route(&self, source: &Source, parts: &Parts<'_>) -> PyResult<Option<String>> {
        let route = match source.route {
            Route::StatusOrDlq => {
                let status = parts
                    .key
                    .as_ref()
                    .is_some_and(|k| k.as_bytes().starts_with(b"status-"))
                    && parts.headers.is_empty();
                if status {
                    Route::Status
                } else {
                    Route::Dlq
                }
            }
            other => other,
        };
        let connector = match route {
            Route::Status => match &parts.key {
                Some(key) => status_connector(key.as_bytes()),
                None => None,
            },
            Route::Dlq => {
                let mut name: Option<&Bound<'_, PyBytes>> = None;
                let mut named = false;
                for (header, value) in &parts.headers {
                    let Ok(header) = header.to_str() else {
                        return Ok(None); // not UTF-8 as Rust reads it: the Python routes it
                    };
                    if header == H_CONNECTOR {
                        named = true;
                        name = value.as_ref();
                    }
                }
                match (named, name) {
                    (true, Some(value)) => std::str::from_utf8(value.as_bytes())
                        .ok()
                        .filter(|c| !c.is_empty()),
                    _ => None,
                }
            }
            Route::StatusOrDlq | Route::Python => None,
        };
        Ok(connector.map(|c| format!("{}/{}", source.cluster, c)))
    }
}

/// `route_status`'s connector, when it names one (the key must be UTF-8 as a whole).
fn status_connector(key: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(key).ok()?;
    let bytes = text.as_bytes();
    let connector: &str = if bytes.starts_with(STATUS_CONNECTOR) {
        &text[STATUS_CONNECTOR.len()..]
    } else if bytes.starts_with(STATUS_TASK) {
        let rest = &text[STATUS_TASK.len()..];
        match rest.rfind('-') {
            Some(at) => &rest[..at],
            None => "",
        }
    } else if bytes.starts_with(STATUS_TOPIC) {
        let rest = &text[STATUS_TOPIC.len()..];
        let separator = std::str::from_utf8(TOPIC_SEPARATOR).ok()?;
        match rest.find(separator) {
            Some(at) => &rest[at + separator.len()..],
            None => "",
        }
    } else {
        return None;
    };
    (!connector.is_empty()).then_some(connector)
}

fn optional_int(value: &Bound<'_, PyAny>) -> PyResult<i64> {
    if value.is_none() {
        Ok(-1)
    } else {
        value.extract()
    }
}

fn optional_bytes<'py>(value: Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    if value.is_none() {
        Ok(None)
    } else {
        Ok(Some(value.cast_into::<PyBytes>()?))
    }
}

fn parts_of<'py>(py: Python<'py>, msg: &Bound<'py, PyAny>) -> PyResult<Parts<'py>> {
    let key = optional_bytes(msg.call_method0(intern!(py, "key"))?)?;
    let value = optional_bytes(msg.call_method0(intern!(py, "value"))?)?;
    let given = msg.call_method0(intern!(py, "headers"))?;
    let mut headers = Vec::new();
    if !given.is_none() {
        for pair in given.try_iter()? {
            let pair = pair?;
            let pair = pair.cast::<PyTuple>()?;
            let name = pair.get_item(0)?.cast_into::<PyString>()?;
            let data = optional_bytes(pair.get_item(1)?)?;
            headers.push((name, data));
        }
    }
    Ok(Parts {
        key,
        value,
        headers,
    })
}

/// `encode_record`: one record as a frame carries it, but for its topic index.
fn encode_record(
    out: &mut Vec<u8>,
    partition: i64,
    offset: i64,
    timestamp: i64,
    parts: &Parts<'_>,
    dlq: bool,
) -> PyResult<()> {
    let (key, value) = if dlq {
        (None, None)
    } else {
        (
            parts.key.as_ref().map(|k| k.as_bytes()),
            parts.value.as_ref().map(|v| v.as_bytes()),
        )
    };
    let mut headers: Vec<(&str, Option<&[u8]>)> = Vec::with_capacity(parts.headers.len());
    for (name, data) in &parts.headers {
        let name = name.to_str()?;
        let data = data.as_ref().map(|d| d.as_bytes());
        if dlq {
            if !name.starts_with(DLQ_PREFIX) {
                continue;
            }
            if name == H_STACKTRACE {
                headers.push((name, data.map(trace_head)));
                continue;
            }
        }
        headers.push((name, data));
    }
    out.extend_from_slice(&(partition as i32).to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&key.map_or(-1, |k| k.len() as i32).to_be_bytes());
    out.extend_from_slice(&value.map_or(-1, |v| v.len() as i32).to_be_bytes());
    out.extend_from_slice(&(headers.len() as u16).to_be_bytes());
    if let Some(key) = key {
        out.extend_from_slice(key);
    }
    if let Some(value) = value {
        out.extend_from_slice(value);
    }
    for (name, data) in headers {
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(&data.map_or(-1, |d| d.len() as i32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        if let Some(data) = data {
            out.extend_from_slice(data);
        }
    }
    Ok(())
}

/// `_trace_head`: a stack trace cut to its first `TRACE_HEAD_CHARS` characters (whole if
/// shorter, as it is if it is not UTF-8).
fn trace_head(data: &[u8]) -> &[u8] {
    if data.len() <= TRACE_HEAD_CHARS {
        return data;
    }
    if data.is_ascii() {
        return &data[..TRACE_HEAD_CHARS];
    }
    match std::str::from_utf8(data) {
        Ok(text) => match text.char_indices().nth(TRACE_HEAD_CHARS) {
            Some((at, _)) => &data[..at],
            None => data,
        },
        Err(_) => data,
    }
}

fn finish(py: Python<'_>, group: Group) -> (String, Py<PyBytes>, usize) {
    let value = PyBytes::new(py, &group.frame()).unbind();
    (group.owner, value, group.count)
}
