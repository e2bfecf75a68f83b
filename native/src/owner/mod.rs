//! The owner's work on one frame (`offsetd.engine.batch.decide_batch`, light, then
//! `offsetd.engine.tally.fold_suppressed` and `tally_record`): the compiled path whole.
//!
//! A frame is decided wholly here or wholly by Python, never half: first every record is
//! decoded, matched and checked against what the engine refuses (none of which reads or
//! changes the state), and if any of them is Python's to decode or decide (a record the
//! decoders leave, a matcher's undecided answer, a time the engine refuses), the frame is
//! handed back untouched (`None`) for the Python engine, which is the reference. Else the
//! records are decided in order on the state as `decide_batch` does (a replay, at or below its
//! partition's high-water offset, is skipped before it counts), and the firings folded: what
//! crosses back is the planned decisions (JSON), the tallies' audit records (JSON, as
//! `json.dumps` writes them) and the counts the metrics need, never a record or an event.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::decode::{decode, frame, DecodeMemo, Decoded, TopicCtx, TopicKind};
use crate::engine::firing::Firing;
use crate::engine::py::PyState;
use crate::engine::tally::{fold_suppressed, tally_record_json};
use crate::engine::{Engine, MAX_KEYS};
use crate::event::{Event, Kind};
use crate::matcher::{Matcher, Meta};
use crate::program::Program;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Owner>()?;
    m.add_class::<FrameOutcome>()?;
    Ok(())
}

/// The compiled owner of a rule set: its matcher, its engine and the decoders' memos.
#[pyclass(module = "offsetd_native")]
pub struct Owner {
    engine: Engine,
    matcher: Matcher,
    topics: HashMap<String, TopicCtx>,
    memo: DecodeMemo,
    window_ms: i64,
}

/// One event ready to decide: what the scan found for it.
struct Ready {
    event: Event,
    matched: Vec<usize>,
    waiting: Vec<usize>,
}

/// What a frame decided here hands back to Python.
#[pyclass(module = "offsetd_native", frozen, get_all)]
pub struct FrameOutcome {
    /// Events applied (0: the state did not change and need not be written).
    pub applied: usize,
    /// The planned decisions, in order: each `Decision.model_dump_json()`.
    pub planned: Vec<String>,
    /// The tallies the frame changed, in order: each `json.dumps(tally_record(...))`.
    pub tallies: Vec<String>,
    /// (rule, mode, outcome, reason, count) of every firing: "planned" with no reason, or
    /// "suppressed" and its reason, in order of first firing.
    pub decisions: Vec<(String, String, String, Option<String>, u64)>,
    /// (rule, count): the rules that saw an event (`on_match`), in load order.
    pub matches: Vec<(String, u64)>,
    /// (kind, topic, count): the events applied, in order of first event.
    pub events: Vec<(String, String, u64)>,
    /// (kind, event time in ms) of every applied event that is not a DLQ record, in order:
    /// what the decision latency is read from.
    pub times: Vec<(String, i64)>,
    /// The suppressed firings (held `inhibited` decisions too) caused by failures (a FAILED
    /// status or a DLQ record), as the breaker reads them: (decision id, decided at, record
    /// text), every one, in order (`Remediator.note_suppressed`).
    pub failures: Vec<(String, i64, Option<String>)>,
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::ConnectorStatus => "connector_status",
        Kind::TaskStatus => "task_status",
        Kind::TopicStatus => "topic_status",
        Kind::DlqRecord => "dlq_record",
        Kind::SourceOffset => "source_offset",
        Kind::Progress => "progress",
    }
}

#[pymethods]
impl Owner {
    /// `program_json`: `offsetd.rules.program.rule_program(rules)`; `topics`: topic ->
    /// (Connect cluster, "status" | "dlq" | "offsets" | "shape"); `window_ms`: the tallies'
    /// window. ValueError when the rule set is one the compiled parts cannot decide exactly.
    #[new]
    #[pyo3(signature = (program_json, topics, window_ms, max_keys = MAX_KEYS))]
    fn new(
        program_json: &str,
        topics: HashMap<String, (String, String)>,
        window_ms: i64,
        max_keys: usize,
    ) -> PyResult<Owner> {
        let program = Program::from_json(program_json).map_err(PyValueError::new_err)?;
        let engine = Engine::new(&program, max_keys).map_err(PyValueError::new_err)?;
        let matcher = Matcher::new(&program).map_err(PyValueError::new_err)?;
        if window_ms <= 0 {
            return Err(PyValueError::new_err("window_ms must be positive"));
        }
        let mut table = HashMap::new();
        for (topic, (connect_cluster, kind)) in topics {
            let kind = TopicKind::parse(&kind)
                .ok_or_else(|| PyValueError::new_err(format!("unknown topic kind: {kind:?}")))?;
            table.insert(
                topic,
                TopicCtx {
                    connect_cluster,
                    kind,
                },
            );
        }
        Ok(Owner {
            engine,
            matcher,
            topics: table,
            memo: DecodeMemo::new(),
            window_ms,
        })
    }

    /// Decide one frame of a connector's records on `state` (updated in place), with the
    /// connector's metadata (class, type) if known, at `now_ms` (None: each event's own time,
    /// as if tailing live: the bench). None: the frame is Python's (nothing was changed).
    #[pyo3(signature = (state, data, meta, now_ms))]
    fn decide_frame(
        &mut self,
        mut state: PyRefMut<'_, PyState>,
        data: &[u8],
        meta: Option<(String, String)>,
        now_ms: Option<i64>,
    ) -> Option<FrameOutcome> {
        let meta = meta.map(|(connector_class, connector_type)| Meta {
            connector_class,
            connector_type,
        });
        let ready = self.scan(data, meta.as_ref(), now_ms)?;
        Some(self.decide(&mut state.inner, ready, meta.is_some(), now_ms))
    }
}

impl Owner {
    /// Decode, match and check every record; None at the first one that is Python's.
    fn scan(
        &mut self,
        data: &[u8],
        meta: Option<&Meta>,
        now_ms: Option<i64>,
    ) -> Option<Vec<Ready>> {
        let frame = frame(data).ok()?;
        let contexts: Vec<Option<&TopicCtx>> =
            frame.topics.iter().map(|t| self.topics.get(*t)).collect();
        let needs_waiting = meta.is_none() && self.matcher.has_meta_rules();
        let mut ready = Vec::with_capacity(frame.records.len());
        for raw in &frame.records {
            let topic = contexts[usize::from(raw.topic_index)]?;
            let Decoded::Event(event) = decode(raw, topic, &mut self.memo) else {
                return None;
            };
            let now = now_ms.unwrap_or(event.source().timestamp_ms);
            if self.engine.refusal(&event, now).is_some() {
                return None;
            }
            let matched = self.matcher.matched(&event, meta).ok()?.to_vec();
            let waiting = if needs_waiting {
                self.matcher.waiting_for_meta(&event).ok()?
            } else {
                Vec::new()
            };
            ready.push(Ready {
                event,
                matched,
                waiting,
            });
        }
        Some(ready)
    }

    fn decide(
        &self,
        state: &mut crate::engine::state::State,
        ready: Vec<Ready>,
        meta_known: bool,
        now_ms: Option<i64>,
    ) -> FrameOutcome {
        let mut matches = vec![0u64; self.engine.rules.len()];
        let mut firings: Vec<Firing> = Vec::new();
        let mut applied = 0usize;
        let mut events: Vec<(String, String, u64)> = Vec::new();
        let mut times: Vec<(String, i64)> = Vec::new();
        for item in ready {
            let source = item.event.source();
            let key = format!("{}:{}", source.topic, source.partition);
            if state
                .offsets
                .get(&key)
                .is_some_and(|&seen| source.offset <= seen)
            {
                continue; // a replay: counted already (`decide_batch`)
            }
            let now = now_ms.unwrap_or(source.timestamp_ms);
            let made = self.engine.decide_counted(
                state,
                &item.event,
                &item.matched,
                &item.waiting,
                meta_known,
                now,
                &mut matches,
            );
            // Refusals were ruled out by the scan; `Unordered` cannot come from a state
            // this engine made (engine::decide): an engine's bug, loud.
            let made =
                made.unwrap_or_else(|refusal| panic!("the compiled engine refused: {refusal}"));
            applied += 1;
            let kind = kind_name(item.event.kind());
            match events
                .iter_mut()
                .find(|(k, t, _)| k == kind && *t == source.topic)
            {
                Some(entry) => entry.2 += 1,
                None => events.push((kind.to_string(), source.topic.clone(), 1)),
            }
            if item.event.kind() != Kind::DlqRecord {
                times.push((kind.to_string(), source.timestamp_ms));
            }
            firings.extend(made);
        }
        let mut decisions: Vec<(String, String, String, Option<String>, u64)> = Vec::new();
        let mut failures: Vec<(String, i64, Option<String>)> = Vec::new();
        for firing in &firings {
            let (rule, mode, outcome, reason) = match firing {
                Firing::Decision(d) => {
                    // a held (`inhibited`) one is a suppressed firing too: the app hands
                    // every suppressed firing caused by a failure to the breaker
                    if d.outcome != "planned" && d.from_failure() {
                        failures.push((d.id.clone(), d.decided_at_ms, d.record_text()));
                    }
                    (
                        d.rule.to_string(),
                        d.mode.to_string(),
                        d.outcome.to_string(),
                        d.reason.map(str::to_string),
                    )
                }
                Firing::Suppression(s) => {
                    if s.from_failure {
                        // its id is the one its tally already computed (and kept)
                        failures.push((
                            s.id().to_string(),
                            s.decided_at_ms,
                            s.record_text.as_deref().map(str::to_string),
                        ));
                    }
                    (
                        s.rule.to_string(),
                        s.mode.to_string(),
                        "suppressed".to_string(),
                        Some(s.reason.to_string()),
                    )
                }
            };
            match decisions.iter_mut().find(|(r, m, o, why, _)| {
                *r == rule && *m == mode && *o == outcome && *why == reason
            }) {
                Some(entry) => entry.4 += 1,
                None => decisions.push((rule, mode, outcome, reason, 1)),
            }
        }
        let folded = fold_suppressed(state, &firings, self.window_ms);
        let planned = folded.planned.iter().map(|d| d.to_json()).collect();
        let tallies = folded
            .tallies
            .iter()
            .map(|t| tally_record_json(state, t, self.window_ms))
            .collect();
        let matches = self
            .engine
            .rules
            .iter()
            .zip(matches)
            .filter(|(_, count)| *count > 0)
            .map(|(rule, count)| (rule.name.to_string(), count))
            .collect();
        FrameOutcome {
            applied,
            planned,
            tallies,
            decisions,
            matches,
            events,
            times,
            failures,
        }
    }
}
