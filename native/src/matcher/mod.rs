//! A rule set compiled for events (`offsetd.rules.ruleset.RuleSet.matched`): which rules an
//! event matches, in load order, with Python's answers exactly or none at all.
//!
//! - `spec`: what `offsetd.rules.program.match.match_part` writes for a rule;
//! - `conditions`, `names`, `message`: the conditions (`offsetd.rules.conditions`);
//! - `glob` (`fnmatchcase`), `re2` (RE2 patterns rewritten for the `regex` crate, or refused);
//! - `failures`: `offsetd.events.failures.classify`;
//! - `set`: the `Matcher` and its memos (`RuleSet._entry`, `_live`, `_verdicts`);
//! - `python`: the binding the differential tests use.

use pyo3::prelude::*;

pub mod conditions;
pub mod failures;
pub mod glob;
pub mod message;
pub mod names;
mod python;
pub mod re2;
pub mod set;
pub mod spec;

pub use set::Matcher;
pub use spec::MatchRule;

/// A connector's metadata (`offsetd.rules.models.ConnectorMeta`, less its labels).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Meta {
    pub connector_class: String,
    pub connector_type: String,
}

/// "Leave it to Python": the answer hangs on something this side does not reproduce exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecided(pub &'static str);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    python::register(m)
}
