//! A rule set compiled for events (`offsetd.rules.ruleset.RuleSet.matched`).

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
