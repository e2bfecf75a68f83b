//! Frames and records -> events: `offsetd.events.frames.decode_frame`, `events.status.
//! decode_status` and `events.dlq.decode_dlq`, exactly.
//!
//! The owner calls `frame` once per internal record and `decode` per record. Every event
//! `decode` makes is the one Python's decoder makes (its `model_dump_json()` text); every
//! record Python rejects, and every one whose answer this side cannot be sure of (`Left`), is
//! handed to Python, which gives the event or the exact `Malformed`.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

pub mod dlq;
pub mod frame;
pub mod json;
pub mod memo;
pub mod status;
pub mod text;
pub mod trace;
mod unicode_tables;

pub use frame::{frame, frame_records, Frame, FrameError, RawRef};
pub use memo::DecodeMemo;

use crate::event::Event;

/// Why a record is left to Python's decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Left {
    /// Python rejects it (`Malformed`): its message is Python's to write.
    Malformed,
    /// A kind of topic this side does not decode (connect-offsets), or no topic it reads.
    NotDecodedHere,
    /// An integer field beyond i64 (a generation, a topic status's task or time): Python
    /// takes any int, the events here hold an i64.
    BigInteger,
    /// A string field holding a lone surrogate (`"\ud800"` in the JSON): a Python str that
    /// no Rust `String` can be.
    LoneSurrogate,
    /// JSON nested deeper than this side reads (`json::MAX_DEPTH`): Python's answer depends
    /// on its recursion limit.
    DeepJson,
    /// An integer literal longer than any `sys.set_int_max_str_digits` must allow.
    LongInteger,
}

impl Left {
    pub fn as_str(self) -> &'static str {
        match self {
            Left::Malformed => "malformed",
            Left::NotDecodedHere => "not decoded here",
            Left::BigInteger => "big integer",
            Left::LoneSurrogate => "lone surrogate",
            Left::DeepJson => "deep JSON",
            Left::LongInteger => "long integer",
        }
    }
}

/// A record's event, or why Python decodes it. Not boxed: nearly every record is an event,
/// and a box would be one more allocation per record for a value moved once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Event(Event),
    Python(Left),
}

/// Which decoder reads a topic (`offsetd.app.wiring.Wiring.source_topics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicKind {
    /// A Connect cluster's status topic: `decode_status`.
    Status,
    /// One of its DLQ topics: `decode_dlq` (no `connector=`).
    Dlq,
    /// Its offsets topic: `decode_offsets`, Python's.
    Offsets,
    /// Status and DLQ records in one topic, told apart by shape as the bench's copy topic
    /// is (`bench.bench_daemon.is_status`: a `status-` key and no headers).
    ByShape,
}

impl TopicKind {
    pub fn parse(name: &str) -> Option<TopicKind> {
        Some(match name {
            "status" => TopicKind::Status,
            "dlq" => TopicKind::Dlq,
            "offsets" => TopicKind::Offsets,
            "shape" => TopicKind::ByShape,
            _ => return None,
        })
    }
}

/// A topic's Connect cluster and decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicCtx {
    pub connect_cluster: String,
    pub kind: TopicKind,
}

/// `bench.bench_daemon.is_status`.
fn is_status(raw: &RawRef<'_>) -> bool {
    raw.key.is_some_and(|key| key.starts_with(b"status-")) && raw.headers.is_empty()
}

/// A record's event as its topic's Python decoder makes it, or why Python decodes it.
pub fn decode(raw: &RawRef<'_>, topic: &TopicCtx, memo: &mut DecodeMemo) -> Decoded {
    let cluster = &topic.connect_cluster;
    let made = match topic.kind {
        TopicKind::Status => status::decode_status(cluster, raw, memo),
        TopicKind::Dlq => dlq::decode_dlq(cluster, raw, memo),
        TopicKind::Offsets => Err(Left::NotDecodedHere),
        TopicKind::ByShape if is_status(raw) => status::decode_status(cluster, raw, memo),
        TopicKind::ByShape => dlq::decode_dlq(cluster, raw, memo),
    };
    match made {
        Ok(event) => Decoded::Event(event),
        Err(left) => Decoded::Python(left),
    }
}

// -- Python ----------------------------------------------------------------------------------

type TopicsArg = HashMap<String, (String, String)>;

fn topic_table(topics: TopicsArg) -> PyResult<HashMap<String, TopicCtx>> {
    topics
        .into_iter()
        .map(|(topic, (connect_cluster, kind))| {
            let kind = TopicKind::parse(&kind)
                .ok_or_else(|| PyValueError::new_err(format!("unknown topic kind: {kind:?}")))?;
            Ok((
                topic,
                TopicCtx {
                    connect_cluster,
                    kind,
                },
            ))
        })
        .collect()
}

fn frame_of(data: &[u8]) -> PyResult<Frame<'_>> {
    frame(data).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A decoder with its memos, for a stream of frames (the tests' and the bench's handle).
#[pyclass(module = "offsetd_native")]
pub struct Decoder {
    topics: HashMap<String, TopicCtx>,
    memo: DecodeMemo,
}

impl Decoder {
    fn outcomes(&mut self, data: &[u8]) -> PyResult<Vec<Result<String, Left>>> {
        let frame = frame_of(data)?;
        let contexts: Vec<Option<&TopicCtx>> =
            frame.topics.iter().map(|t| self.topics.get(*t)).collect();
        Ok(frame
            .records
            .iter()
            .map(|raw| match contexts[usize::from(raw.topic_index)] {
                None => Err(Left::NotDecodedHere),
                Some(topic) => match decode(raw, topic, &mut self.memo) {
                    Decoded::Event(event) => Ok(event.to_json()),
                    Decoded::Python(left) => Err(left),
                },
            })
            .collect())
    }
}

#[pymethods]
impl Decoder {
    #[new]
    fn py_new(topics: TopicsArg) -> PyResult<Self> {
        Ok(Decoder {
            topics: topic_table(topics)?,
            memo: DecodeMemo::new(),
        })
    }

    /// Per record of the frame: its event's JSON, or None (left to Python).
    fn frame_events(&mut self, frame: &[u8]) -> PyResult<Vec<Option<String>>> {
        Ok(self.outcomes(frame)?.into_iter().map(Result::ok).collect())
    }

    /// How many records of the frame are events here (none written out): the decoding's own
    /// time, for the bench.
    fn frame_event_count(&mut self, frame: &[u8]) -> PyResult<usize> {
        let frame = frame_of(frame)?;
        let mut count = 0;
        for raw in &frame.records {
            if let Some(topic) = self.topics.get(raw.topic) {
                if let Decoded::Event(_) = decode(raw, topic, &mut self.memo) {
                    count += 1;
                }
            }
        }
        Ok(count)
    }

    /// Per record of the frame: (its event's JSON, None) or (None, why Python decodes it).
    fn frame_outcomes(
        &mut self,
        frame: &[u8],
    ) -> PyResult<Vec<(Option<String>, Option<&'static str>)>> {
        Ok(self
            .outcomes(frame)?
            .into_iter()
            .map(|made| match made {
                Ok(json) => (Some(json), None),
                Err(left) => (None, Some(left.as_str())),
            })
            .collect())
    }
}

/// Per record of the frame: its event's JSON, or None (left to Python); fresh memos.
#[pyfunction]
fn decode_frame_events(frame: &[u8], topics: TopicsArg) -> PyResult<Vec<Option<String>>> {
    Decoder::py_new(topics)?.frame_events(frame)
}

/// A frame's records as `RawRecord`'s fields, in its order.
#[pyfunction]
fn frame_fields<'py>(py: Python<'py>, frame: &[u8]) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let records = frame_records(frame).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let bytes = |part: Option<&[u8]>| part.map(|b| PyBytes::new(py, b));
    records
        .iter()
        .map(|raw| {
            let headers: Vec<(&str, Option<Bound<'py, PyBytes>>)> = raw
                .headers
                .iter()
                .map(|&(name, value)| (name, bytes(value)))
                .collect();
            let headers = PyTuple::new(py, headers)?;
            (
                raw.topic,
                raw.partition,
                raw.offset,
                raw.timestamp_ms,
                bytes(raw.key),
                bytes(raw.value),
                headers,
            )
                .into_pyobject(py)
        })
        .collect()
}

/// What the owner reads of a frame before it decides (`offsetd.app.decider`): how many
/// records it holds (the scope counts them) and the topic of its first record keyed
/// `status-connector-` (a connector changed: its cluster's metadata is read again), without
/// building the records in Python. ValueError whenever `decode_frame` raises Malformed.
#[pyfunction]
fn frame_summary(frame: &[u8]) -> PyResult<(usize, Option<&str>)> {
    let records = frame_records(frame).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let changed = records
        .iter()
        .find(|raw| raw.key.is_some_and(|key| key.starts_with(CONNECTOR_STATUS)))
        .map(|raw| raw.topic);
    Ok((records.len(), changed))
}

/// The key prefix of a connector's own status record (`_CONNECTOR_STATUS` in the decider).
const CONNECTOR_STATUS: &[u8] = b"status-connector-";

/// `first_line(head)` of `offsetd.events.decode`.
#[pyfunction]
fn trace_first_line(head: &str) -> (Option<&str>, Option<&str>) {
    trace::first_line(head)
}

/// `last_cause(head)` of `offsetd.events.decode`.
#[pyfunction]
fn trace_last_cause(head: &str) -> Option<(&str, Option<&str>)> {
    trace::last_cause(head)
}

/// The code point ranges a Python character class holds here: `text::is_word` ("word") or
/// `text::is_space` ("space") asked of every code point, fast paths and tables alike.
#[pyfunction]
fn char_class_ranges(name: &str) -> PyResult<Vec<(u32, u32)>> {
    let class: fn(char) -> bool = match name {
        "word" => text::is_word,
        "space" => text::is_space,
        _ => return Err(PyValueError::new_err(format!("no class {name:?}"))),
    };
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for c in (0..=0x10FFFFu32)
        .filter_map(char::from_u32)
        .filter(|c| class(*c))
    {
        let code = c as u32;
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == code => last.1 = code,
            _ => ranges.push((code, code)),
        }
    }
    Ok(ranges)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Decoder>()?;
    m.add_function(wrap_pyfunction!(decode_frame_events, m)?)?;
    m.add_function(wrap_pyfunction!(frame_fields, m)?)?;
    m.add_function(wrap_pyfunction!(frame_summary, m)?)?;
    m.add_function(wrap_pyfunction!(trace_first_line, m)?)?;
    m.add_function(wrap_pyfunction!(trace_last_cause, m)?)?;
    m.add_function(wrap_pyfunction!(char_class_ranges, m)?)?;
    Ok(())
}
