//! Deciding: `offsetd.engine.decide` (windows, limits, firings), the state, folding.

use pyo3::prelude::*;
use serde::Deserialize;

/// What the engine needs of one rule (`offsetd.rules.program.engine.engine_part`).
#[derive(Deserialize, Debug, Clone, Default)]
pub struct EngineRule {}

/// The rule set's horizons (`offsetd.rules.program.engine.engine_set_part`).
#[derive(Deserialize, Debug, Clone, Default)]
pub struct EngineSet {}

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
