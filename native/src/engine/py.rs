//! The binding the differential tests (and, until the owner is compiled, Python) drive:
//! `Engine`, `State`, `Firing`.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::firing;
use super::state;
use super::tally::{fold_suppressed, tally_record_json};
use crate::event::Event;
use crate::program::Program;

/// A connector's state (`ConnectorState`), held in Rust.
#[pyclass(name = "State", module = "offsetd_native")]
#[derive(Default)]
pub struct PyState {
    pub inner: state::State,
}

#[pymethods]
impl PyState {
    #[new]
    fn new() -> Self {
        PyState::default()
    }

    #[staticmethod]
    fn from_json(text: &str) -> PyResult<PyState> {
        state::State::from_json(text)
            .map(|inner| PyState { inner })
            .map_err(PyValueError::new_err)
    }

    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// `len(state.deferred)`: events waiting for the connector's metadata. The owner asks it
    /// after every frame (`offsetd.app.decider`), where writing the JSON to look would cost
    /// more than the frame.
    #[getter]
    fn deferred_count(&self) -> usize {
        self.inner.deferred.len()
    }
}

/// One firing: a `Decision` or a light `Suppression`.
#[pyclass(name = "Firing", module = "offsetd_native", frozen)]
pub struct PyFiring {
    pub inner: firing::Firing,
}

#[pymethods]
impl PyFiring {
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    #[getter]
    fn outcome(&self) -> &'static str {
        self.inner.outcome()
    }

    #[getter]
    fn is_decision(&self) -> bool {
        matches!(self.inner, firing::Firing::Decision(_))
    }
}

/// The compiled engine of a rule program.
#[pyclass(name = "Engine", module = "offsetd_native", frozen)]
pub struct PyEngine {
    inner: Arc<super::Engine>,
}

impl PyEngine {
    fn indices(&self, names: Vec<String>) -> PyResult<Vec<usize>> {
        names
            .iter()
            .map(|n| {
                self.inner
                    .index(n)
                    .ok_or_else(|| PyValueError::new_err(format!("no rule named {n:?}")))
            })
            .collect()
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (program_json, max_keys = super::MAX_KEYS))]
    fn new(program_json: &str, max_keys: usize) -> PyResult<Self> {
        let program = Program::from_json(program_json).map_err(PyValueError::new_err)?;
        let engine = super::Engine::new(&program, max_keys).map_err(PyValueError::new_err)?;
        Ok(PyEngine {
            inner: Arc::new(engine),
        })
    }

    #[pyo3(signature = (state, event_json, matched, meta_known, now_ms, waiting = Vec::new()))]
    fn decide(
        &self,
        mut state: PyRefMut<'_, PyState>,
        event_json: &str,
        matched: Vec<String>,
        meta_known: bool,
        now_ms: i64,
        waiting: Vec<String>,
    ) -> PyResult<Vec<PyFiring>> {
        let event = Event::from_json(event_json).map_err(PyValueError::new_err)?;
        let matched = self.indices(matched)?;
        let waiting = self.indices(waiting)?;
        let made = self
            .inner
            .decide(
                &mut state.inner,
                &event,
                &matched,
                &waiting,
                meta_known,
                now_ms,
            )
            .map_err(|r| PyValueError::new_err(format!("left to Python: {r}")))?;
        Ok(made.into_iter().map(|inner| PyFiring { inner }).collect())
    }

    fn prune(&self, mut state: PyRefMut<'_, PyState>) {
        self.inner.prune(&mut state.inner);
    }

    fn fold(
        &self,
        mut state: PyRefMut<'_, PyState>,
        firings: Vec<PyRef<'_, PyFiring>>,
        window_ms: i64,
    ) -> PyResult<(Vec<String>, Vec<String>)> {
        if window_ms <= 0 {
            return Err(PyValueError::new_err("window_ms must be positive"));
        }
        let firings: Vec<firing::Firing> = firings.iter().map(|f| f.inner.clone()).collect();
        let folded = fold_suppressed(&mut state.inner, &firings, window_ms);
        let planned = folded.planned.iter().map(|d| d.to_json()).collect();
        let tallies = folded
            .tallies
            .iter()
            .map(|t| tally_record_json(&state.inner, t, window_ms))
            .collect();
        Ok((planned, tallies))
    }

    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner
            .rules
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_class::<PyState>()?;
    m.add_class::<PyFiring>()?;
    Ok(())
}
