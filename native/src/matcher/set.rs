//! The `Matcher`: `RuleSet.matched(event, meta)`, `waiting_for_meta(event)` and `meta_rules`,
//! remembered as Python remembers them.
//!
//! An event's candidates (kind, state, names and metadata conditions) are remembered per
//! (kind, state, cluster, connector, metadata), like `_candidates`; the rules of those that
//! hold for it per (candidates, task id, error instance, failing record's topic), like `_live`
//! (the `Arc` of the error is held in the entry, so its address stays its own); the answers of
//! the error conditions per error (by content), like `_verdicts` and the message memo. Every
//! memo is bounded as Python's is, and cleared whole when full. Lookups hash the event's
//! borrowed strings: nothing is allocated on a hit.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use crate::event::{ErrorInfo, Event, Kind};
use crate::matcher::conditions::{Condition, ErrorMemo, Facts, Reads};
use crate::matcher::failures::Classifier;
use crate::matcher::{Meta, Undecided};
use crate::program::Program;

const CANDIDATE_CACHE_LIMIT: usize = 65536;
const LIVE_CACHE_LIMIT: usize = 16384;
const ERROR_CACHE_LIMIT: usize = 4096;

/// One rule, compiled: its kinds, states, and conditions split as `compile_rule` splits them.
struct Rule {
    kinds: Vec<Kind>,
    states: Option<Vec<String>>,
    /// match's names and metadata conditions (`static`)
    fixed: Vec<Condition>,
    /// match's other conditions (`dynamic`, less `unless`)
    conditions: Vec<Condition>,
    unless: Option<Vec<Condition>>,
    /// a condition or `unless` reads the connector's class or type
    needs_meta: bool,
}

impl Rule {
    fn has_dynamic(&self) -> bool {
        !self.conditions.is_empty() || self.unless.is_some()
    }

    /// Kind and state, as `_by_kind` and `_by_state` index them: a status event's unknown
    /// state or tombstone sees only the rules without a state condition.
    fn sees(&self, kind: Kind, state: Option<&str>) -> bool {
        if !self.kinds.contains(&kind) {
            return false;
        }
        let status = matches!(kind, Kind::ConnectorStatus | Kind::TaskStatus);
        match (&self.states, status) {
            (Some(states), true) => state.is_some_and(|s| states.iter().any(|w| w == s)),
            _ => true,
        }
    }
}

struct CandidateEntry {
    kind: Kind,
    state: Option<Box<str>>,
    cluster: Box<str>,
    connector: Box<str>,
    meta: Option<Meta>,
    rules: Arc<[usize]>,
    plain: bool,
    id: u64,
}

struct LiveEntry {
    candidates: u64,
    task_id: Option<i64>,
    error: Option<Arc<ErrorInfo>>,
    topic: Option<Box<str>>,
    answer: Result<Box<[usize]>, Undecided>,
}

pub struct Matcher {
    rules: Vec<Rule>,
    meta_rules: Vec<usize>,
    classifier: Classifier,
    /// foldhash: a fast hash of the short keys looked up for every event (seeded per matcher)
    hasher: foldhash::fast::RandomState,
    candidates: HashMap<u64, Vec<CandidateEntry>>,
    candidate_count: usize,
    next_id: u64,
    live: HashMap<u64, Vec<LiveEntry>>,
    live_count: usize,
    errors: HashMap<Arc<ErrorInfo>, ErrorMemo>,
    #[allow(clippy::type_complexity)]
    waiting: HashMap<(Kind, Option<String>, String, String), Vec<usize>>,
}

fn error_of(event: &Event) -> Option<&Arc<ErrorInfo>> {
    match event {
        Event::Connector(e) => e.error.as_ref(),
        Event::Task(e) => e.error.as_ref(),
        Event::Dlq(e) => Some(&e.error),
        Event::Topic(_) => None,
    }
}

fn topic_of(event: &Event) -> Option<&str> {
    match event {
        Event::Dlq(e) => e.record.as_ref().map(|r| r.topic.as_str()),
        _ => None,
    }
}

impl Matcher {
    /// The rule set's matcher, or why it cannot be compiled exactly (the rule and the reason:
    /// a regex refused, a glob Python would not compile...).
    pub fn new(program: &Program) -> Result<Matcher, String> {
        let mut slots = 0usize;
        let mut rules = Vec::with_capacity(program.rules.len());
        for rule in &program.rules {
            let spec = &rule.matcher;
            let compile = |specs: &[crate::matcher::conditions::ConditionSpec],
                           slots: &mut usize|
             -> Result<Vec<Condition>, String> {
                specs
                    .iter()
                    .map(|s| Condition::new(s, slots))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|why| format!("rule {:?}: {why}", rule.name))
            };
            let all = compile(&spec.conditions, &mut slots)?;
            let unless = match &spec.unless {
                Some(u) => Some(compile(u, &mut slots)?),
                None => None,
            };
            let needs_meta = all
                .iter()
                .chain(unless.iter().flatten())
                .any(|c| c.reads() == Reads::Meta);
            let (fixed, conditions): (Vec<_>, Vec<_>) =
                all.into_iter().partition(|c| c.reads() != Reads::Event);
            rules.push(Rule {
                kinds: spec.kinds.clone(),
                states: spec.states.clone(),
                fixed,
                conditions,
                unless,
                needs_meta,
            });
        }
        let meta_rules = (0..rules.len()).filter(|&i| rules[i].needs_meta).collect();
        Ok(Matcher {
            rules,
            meta_rules,
            classifier: Classifier::new(),
            hasher: foldhash::fast::RandomState::default(),
            candidates: HashMap::new(),
            candidate_count: 0,
            next_id: 0,
            live: HashMap::new(),
            live_count: 0,
            errors: HashMap::new(),
            waiting: HashMap::new(),
        })
    }

    /// `meta_rules` is not empty: some rule needs the connector's metadata.
    pub fn has_meta_rules(&self) -> bool {
        !self.meta_rules.is_empty()
    }

    /// The rules that need metadata (`RuleSet.meta_rules`), by index.
    pub fn meta_rules(&self) -> &[usize] {
        &self.meta_rules
    }

    /// `RuleSet.matched(event, meta)`: the matching rules' indices, in load order.
    pub fn matched(&mut self, event: &Event, meta: Option<&Meta>) -> Result<&[usize], Undecided> {
        let (key, at) = self.candidate(event, meta);
        let entry = &self.candidates[&key][at];
        if entry.plain {
            return Ok(&self.candidates[&key][at].rules);
        }
        let (id, rules) = (entry.id, entry.rules.clone());
        let (key, at) = self.live(id, &rules, event, meta);
        match &self.live[&key][at].answer {
            Ok(found) => Ok(found),
            Err(why) => Err(*why),
        }
    }

    fn hash_of(&self, value: impl Hash) -> u64 {
        self.hasher.hash_one(value)
    }

    /// `_entry`: the event's candidates, found once per key.
    fn candidate(&mut self, event: &Event, meta: Option<&Meta>) -> (u64, usize) {
        let kind = event.kind();
        let state = event.state();
        let (cluster, connector) = (event.connect_cluster(), event.connector());
        let key = self.hash_of((kind, state, cluster, connector, meta));
        if let Some(bucket) = self.candidates.get(&key) {
            let found = bucket.iter().position(|e| {
                e.kind == kind
                    && e.state.as_deref() == state
                    && &*e.cluster == cluster
                    && &*e.connector == connector
                    && e.meta.as_ref() == meta
            });
            if let Some(at) = found {
                return (key, at);
            }
        }
        let mut facts = Facts {
            event,
            meta,
            classifier: &self.classifier,
            memo: None,
        };
        let found: Vec<usize> = (0..self.rules.len())
            .filter(|&i| {
                let rule = &self.rules[i];
                rule.sees(kind, state)
                    && (meta.is_some() || !rule.needs_meta)
                    && facts.all(&rule.fixed) == Ok(true)
            })
            .collect();
        let plain = found.iter().all(|&i| !self.rules[i].has_dynamic());
        if self.candidate_count >= CANDIDATE_CACHE_LIMIT {
            self.candidates.clear();
            self.candidate_count = 0;
        }
        self.next_id += 1;
        let bucket = self.candidates.entry(key).or_default();
        bucket.push(CandidateEntry {
            kind,
            state: state.map(Into::into),
            cluster: cluster.into(),
            connector: connector.into(),
            meta: meta.cloned(),
            rules: found.into(),
            plain,
            id: self.next_id,
        });
        self.candidate_count += 1;
        (key, bucket.len() - 1)
    }

    /// `_live_of`: of the candidates, those whose dynamic conditions hold for this event.
    fn live(
        &mut self,
        candidates: u64,
        rules: &Arc<[usize]>,
        event: &Event,
        meta: Option<&Meta>,
    ) -> (u64, usize) {
        let task_id = event.task_id();
        let error = error_of(event);
        let error_at = error.map(|e| Arc::as_ptr(e) as usize);
        let topic = topic_of(event);
        let key = self.hash_of((candidates, task_id, error_at, topic));
        if let Some(bucket) = self.live.get(&key) {
            let found = bucket.iter().position(|e| {
                e.candidates == candidates
                    && e.task_id == task_id
                    && e.error.as_ref().map(|e| Arc::as_ptr(e) as usize) == error_at
                    && e.topic.as_deref() == topic
            });
            if let Some(at) = found {
                return (key, at);
            }
        }
        let answer = self.decide(rules, event, meta, error);
        if self.live_count >= LIVE_CACHE_LIMIT {
            self.live.clear();
            self.live_count = 0;
        }
        let bucket = self.live.entry(key).or_default();
        bucket.push(LiveEntry {
            candidates,
            task_id,
            error: error.cloned(),
            topic: topic.map(Into::into),
            answer,
        });
        self.live_count += 1;
        (key, bucket.len() - 1)
    }

    fn decide(
        &mut self,
        rules: &[usize],
        event: &Event,
        meta: Option<&Meta>,
        error: Option<&Arc<ErrorInfo>>,
    ) -> Result<Box<[usize]>, Undecided> {
        let memo = match error {
            Some(error) => {
                if !self.errors.contains_key(&**error) && self.errors.len() >= ERROR_CACHE_LIMIT {
                    self.errors.clear();
                }
                Some(self.errors.entry(error.clone()).or_default())
            }
            None => None,
        };
        let mut facts = Facts {
            event,
            meta,
            classifier: &self.classifier,
            memo,
        };
        let mut found = Vec::with_capacity(rules.len());
        for &i in rules {
            let rule = &self.rules[i];
            if !rule.has_dynamic() || facts.dynamic(&rule.conditions, rule.unless.as_deref())? {
                found.push(i);
            }
        }
        Ok(found.into_boxed_slice())
    }

    /// `RuleSet.waiting_for_meta(event)`: the rules that need metadata and could match the
    /// event once it is known (asked while the connector's metadata is unknown).
    pub fn waiting_for_meta(&mut self, event: &Event) -> Result<Vec<usize>, Undecided> {
        if self.meta_rules.is_empty() {
            return Ok(Vec::new());
        }
        let kind = event.kind();
        let state = event.state();
        let key = (
            kind,
            state.map(str::to_string),
            event.connect_cluster().to_string(),
            event.connector().to_string(),
        );
        if !self.waiting.contains_key(&key) {
            let mut facts = Facts {
                event,
                meta: None,
                classifier: &self.classifier,
                memo: None,
            };
            let base: Vec<usize> = self
                .meta_rules
                .iter()
                .copied()
                .filter(|&i| {
                    let rule = &self.rules[i];
                    let names: Vec<&Condition> = rule
                        .fixed
                        .iter()
                        .filter(|c| c.reads() == Reads::Names)
                        .collect();
                    let state_ok = match &rule.states {
                        None => true,
                        Some(states) => state.is_some_and(|s| states.iter().any(|w| w == s)),
                    };
                    rule.kinds.contains(&kind)
                        && state_ok
                        && names.into_iter().all(|c| facts.test(c) == Ok(true))
                })
                .collect();
            if self.waiting.len() >= CANDIDATE_CACHE_LIMIT {
                self.waiting.clear();
            }
            self.waiting.insert(key.clone(), base);
        }
        let base = self.waiting.get(&key).cloned().unwrap_or_default();
        let mut facts = Facts {
            event,
            meta: None,
            classifier: &self.classifier,
            memo: None,
        };
        let mut found = Vec::with_capacity(base.len());
        for i in base {
            let rule = &self.rules[i];
            if !rule.has_dynamic() || facts.dynamic(&rule.conditions, rule.unless.as_deref())? {
                found.push(i);
            }
        }
        Ok(found)
    }
}
