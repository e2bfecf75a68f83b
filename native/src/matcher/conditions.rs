//! A rule's conditions (`offsetd.rules.conditions`), compiled, and their answers for an event.
//!
//! Answers are three-valued: a condition Python answers with data this side does not hold
//! exactly (a failure class that hangs on Python's Unicode `\w`) is `Undecided`, and so is a
//! conjunction that has such a member and no false one. Conditions are pure functions of the
//! event, so their order does not change an answer.

use serde::Deserialize;

use crate::event::{ErrorInfo, Event};
use crate::matcher::failures::{Classifier, FailureClass};
use crate::matcher::message::{MessageMatcher, Required};
use crate::matcher::names::{NameSet, PatternSpec};
use crate::matcher::{Meta, Undecided};

/// One condition as `match_part` writes it (`Unless`'s field name in `name`).
#[derive(Deserialize, Debug, Clone)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum ConditionSpec {
    ConnectCluster {
        patterns: Vec<PatternSpec>,
    },
    Connector {
        patterns: Vec<PatternSpec>,
    },
    ConnectorClass {
        patterns: Vec<PatternSpec>,
    },
    ConnectorType {
        value: String,
    },
    TaskId {
        ids: Vec<i64>,
    },
    State {
        values: Vec<String>,
    },
    Progress {
        values: Vec<String>,
    },
    Stage {
        values: Vec<String>,
    },
    Failure {
        values: Vec<String>,
    },
    ExceptionClass {
        patterns: Vec<PatternSpec>,
    },
    RootCauseClass {
        patterns: Vec<PatternSpec>,
    },
    Message {
        patterns: Vec<String>,
        required: Option<Required>,
    },
    OriginTopic {
        patterns: Vec<PatternSpec>,
    },
}

/// Which conditions only read names and metadata (`ruleset._STATIC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    Names,
    Meta,
    Event,
}

#[derive(Debug, Clone)]
pub enum Condition {
    ConnectCluster(NameSet),
    Connector(NameSet),
    ConnectorClass(NameSet),
    ConnectorType(String),
    TaskId(Vec<i64>),
    State(Vec<String>),
    /// Progress events are Python's: no event here has a progress, so it never holds.
    Progress,
    /// The conditions on the error, each with its slot in an error's memo.
    Stage(Vec<String>, usize),
    Failure(Vec<FailureClass>, usize),
    ExceptionClass(NameSet, usize),
    RootCauseClass(NameSet, usize),
    Message(Box<MessageMatcher>, usize),
    OriginTopic(NameSet),
}

impl Condition {
    /// Compiled; `next_slot` numbers the error conditions of the whole rule set.
    pub fn new(spec: &ConditionSpec, next_slot: &mut usize) -> Result<Condition, String> {
        let mut slot = || {
            *next_slot += 1;
            *next_slot - 1
        };
        Ok(match spec {
            ConditionSpec::ConnectCluster { patterns } => {
                Condition::ConnectCluster(NameSet::new(patterns)?)
            }
            ConditionSpec::Connector { patterns } => Condition::Connector(NameSet::new(patterns)?),
            ConditionSpec::ConnectorClass { patterns } => {
                Condition::ConnectorClass(NameSet::new(patterns)?)
            }
            ConditionSpec::ConnectorType { value } => Condition::ConnectorType(value.clone()),
            ConditionSpec::TaskId { ids } => Condition::TaskId(ids.clone()),
            ConditionSpec::State { values } => Condition::State(values.clone()),
            ConditionSpec::Progress { .. } => Condition::Progress,
            ConditionSpec::Stage { values } => Condition::Stage(values.clone(), slot()),
            ConditionSpec::Failure { values } => {
                let classes = values
                    .iter()
                    .map(|v| FailureClass::from_name(v).ok_or(format!("failure class {v:?}")))
                    .collect::<Result<Vec<_>, _>>()?;
                Condition::Failure(classes, slot())
            }
            ConditionSpec::ExceptionClass { patterns } => {
                Condition::ExceptionClass(NameSet::new(patterns)?, slot())
            }
            ConditionSpec::RootCauseClass { patterns } => {
                Condition::RootCauseClass(NameSet::new(patterns)?, slot())
            }
            ConditionSpec::Message { patterns, required } => Condition::Message(
                Box::new(MessageMatcher::new(patterns, required.clone())?),
                slot(),
            ),
            ConditionSpec::OriginTopic { patterns } => {
                Condition::OriginTopic(NameSet::new(patterns)?)
            }
        })
    }

    pub fn reads(&self) -> Reads {
        match self {
            Condition::ConnectCluster(_) | Condition::Connector(_) => Reads::Names,
            Condition::ConnectorClass(_) | Condition::ConnectorType(_) => Reads::Meta,
            _ => Reads::Event,
        }
    }

    /// Whether it reads the event's error and nothing else (`_ERROR_CONDITIONS`).
    pub fn error_slot(&self) -> Option<usize> {
        match self {
            Condition::Stage(_, s)
            | Condition::Failure(_, s)
            | Condition::ExceptionClass(_, s)
            | Condition::RootCauseClass(_, s)
            | Condition::Message(_, s) => Some(*s),
            _ => None,
        }
    }
}

/// What a condition is asked about: the event, its metadata, and a memo of the error
/// conditions' answers for its error (answers are per error: the same error repeats).
pub struct Facts<'a> {
    pub event: &'a Event,
    pub meta: Option<&'a Meta>,
    pub classifier: &'a Classifier,
    pub memo: Option<&'a mut ErrorMemo>,
}

/// One error's answers: per error condition slot, and its failure class.
#[derive(Debug, Default)]
pub struct ErrorMemo {
    answers: Vec<Option<Result<bool, Undecided>>>,
    failure: Option<Result<FailureClass, Undecided>>,
}

impl Facts<'_> {
    pub fn test(&mut self, condition: &Condition) -> Result<bool, Undecided> {
        let event = self.event;
        Ok(match condition {
            Condition::ConnectCluster(names) => names.matches(event.connect_cluster()),
            Condition::Connector(names) => names.matches(event.connector()),
            Condition::ConnectorClass(names) => {
                self.meta.is_some_and(|m| names.matches(&m.connector_class))
            }
            Condition::ConnectorType(wanted) => {
                self.meta.is_some_and(|m| m.connector_type == *wanted)
            }
            Condition::TaskId(ids) => event.task_id().is_some_and(|id| ids.contains(&id)),
            Condition::State(states) => {
                event.state().is_some_and(|s| states.iter().any(|w| w == s))
            }
            Condition::Progress => false,
            Condition::OriginTopic(names) => match event {
                Event::Dlq(dlq) => dlq.record.as_ref().is_some_and(|r| names.matches(&r.topic)),
                _ => false,
            },
            _ => return self.on_error(condition),
        })
    }

    fn on_error(&mut self, condition: &Condition) -> Result<bool, Undecided> {
        let error = self.event.error();
        let Some(slot) = condition.error_slot() else {
            return Ok(false);
        };
        if let Some(memo) = self.memo.as_deref() {
            if let Some(Some(answer)) = memo.answers.get(slot) {
                return *answer;
            }
        }
        let answer = self.answer(condition, error);
        if let Some(memo) = self.memo.as_deref_mut() {
            if memo.answers.len() <= slot {
                memo.answers.resize(slot + 1, None);
            }
            memo.answers[slot] = Some(answer);
        }
        answer
    }

    fn answer(
        &mut self,
        condition: &Condition,
        error: Option<&ErrorInfo>,
    ) -> Result<bool, Undecided> {
        Ok(match condition {
            Condition::Stage(stages, _) => error
                .and_then(|e| e.stage.as_deref())
                .is_some_and(|s| stages.iter().any(|w| w == s)),
            Condition::Failure(wanted, _) => wanted.contains(&self.failure(error)?),
            Condition::ExceptionClass(names, _) => error.is_some_and(|e| {
                e.exception_class
                    .as_deref()
                    .is_some_and(|c| names.matches(c))
                    || e.root_cause_class
                        .as_deref()
                        .is_some_and(|c| names.matches(c))
            }),
            Condition::RootCauseClass(names, _) => error
                .and_then(|e| e.root_cause_class.as_deref())
                .is_some_and(|c| names.matches(c)),
            Condition::Message(message, _) => error.is_some_and(|e| message.matches(e)),
            _ => false,
        })
    }

    fn failure(&mut self, error: Option<&ErrorInfo>) -> Result<FailureClass, Undecided> {
        if let Some(Some(found)) = self.memo.as_deref().map(|m| m.failure) {
            return found;
        }
        let found = self.classifier.classify(error).map(|f| f.class);
        if let Some(memo) = self.memo.as_deref_mut() {
            memo.failure = Some(found);
        }
        found
    }

    /// Every condition holds (`_all_of`), three-valued: false wins over undecided.
    pub fn all(&mut self, conditions: &[Condition]) -> Result<bool, Undecided> {
        let mut undecided = None;
        for condition in conditions {
            match self.test(condition) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(why) => undecided = Some(why),
            }
        }
        undecided.map_or(Ok(true), Err)
    }

    /// `_dynamic`: the conditions hold and not all of `unless` do.
    pub fn dynamic(
        &mut self,
        conditions: &[Condition],
        unless: Option<&[Condition]>,
    ) -> Result<bool, Undecided> {
        let required = self.all(conditions);
        if required == Ok(false) {
            return Ok(false);
        }
        let excluded = match unless {
            None => Ok(false),
            Some(unless) => self.all(unless),
        };
        match (required, excluded) {
            (Ok(false), _) | (_, Ok(true)) => Ok(false),
            (Ok(true), Ok(false)) => Ok(true),
            (Err(why), _) | (_, Err(why)) => Err(why),
        }
    }
}
