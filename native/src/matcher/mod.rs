//! A rule set compiled for events (`offsetd.rules.ruleset.RuleSet.matched`).

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}

/// What the matcher needs of one rule (`offsetd.rules.program.match.match_part`).
#[derive(serde::Deserialize, Debug, Clone, Default)]
pub struct MatchRule {}
