//! offsetd's compiled owner path (issue 35; see README.md beside Cargo.toml).
//!
//! The Python engine (`offsetd.engine`) is the reference: every part here is held equal to it by
//! differential tests (tests/unit/native) on the bench's recorded copy topic and on random
//! streams. Nothing here does I/O.

use pyo3::prelude::*;

pub mod decode;
pub mod engine;
pub mod event;
pub mod ingest;
pub mod matcher;
pub mod owner;
pub mod program;

#[pymodule]
fn offsetd_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(event_roundtrip, m)?)?;
    m.add_function(wrap_pyfunction!(json_dumps, m)?)?;
    decode::register(m)?;
    matcher::register(m)?;
    engine::register(m)?;
    ingest::register(m)?;
    owner::register(m)?;
    Ok(())
}

/// An event's JSON (Python's `model_dump_json()`) read into the compiled event and written
/// back: equal text proves the two representations agree field for field.
#[pyfunction]
fn event_roundtrip(text: &str) -> PyResult<String> {
    event::Event::from_json(text)
        .map(|e| e.to_json())
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// A JSON text written again as Python's `json.dumps` writes it (floats as `repr`, `", "` and
/// `": "`, `ensure_ascii`): what the compiled audit records are made with, for the tests.
#[pyfunction]
fn json_dumps(text: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let mut out = String::new();
    engine::pyjson::push_value(&mut out, &value);
    Ok(out)
}
