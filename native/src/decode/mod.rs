//! Frames and records -> events (helper's part: `offsetd.events.frames`, `status`, `dlq`).

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
