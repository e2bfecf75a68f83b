//! The matcher for Python, for the differential tests (`tests/unit/native/test_native_match.py`):
//! events and rule programs cross as JSON, answers as rule names.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::event::{ErrorInfo, Event};
use crate::matcher::failures::{Classifier, CATALOG};
use crate::matcher::{names, re2, Matcher, Meta};
use crate::program::Program;

#[pyclass(name = "Matcher", module = "offsetd_native")]
pub struct PyMatcher {
    matcher: Matcher,
    names: Vec<String>,
}

fn meta_of(meta: Option<(String, String)>) -> Option<Meta> {
    meta.map(|(connector_class, connector_type)| Meta {
        connector_class,
        connector_type,
    })
}

fn event_of(text: &str) -> PyResult<Event> {
    Event::from_json(text).map_err(PyValueError::new_err)
}

#[pymethods]
impl PyMatcher {
    #[new]
    fn new(program_json: &str) -> PyResult<Self> {
        let program = Program::from_json(program_json).map_err(PyValueError::new_err)?;
        let matcher = Matcher::new(&program).map_err(PyValueError::new_err)?;
        let names = program.rules.iter().map(|r| r.name.clone()).collect();
        Ok(PyMatcher { matcher, names })
    }

    #[pyo3(signature = (event_json, meta))]
    fn matched(
        &mut self,
        event_json: &str,
        meta: Option<(String, String)>,
    ) -> PyResult<Option<Vec<String>>> {
        let event = event_of(event_json)?;
        let meta = meta_of(meta);
        Ok(self
            .matcher
            .matched(&event, meta.as_ref())
            .ok()
            .map(|found| found.iter().map(|&i| self.names[i].clone()).collect()))
    }

    fn waiting_for_meta(&mut self, event_json: &str) -> PyResult<Option<Vec<String>>> {
        let event = event_of(event_json)?;
        Ok(self
            .matcher
            .waiting_for_meta(&event)
            .ok()
            .map(|found| found.iter().map(|&i| self.names[i].clone()).collect()))
    }

    #[getter]
    fn meta_rules(&self) -> Vec<String> {
        let indices = self.matcher.meta_rules();
        indices.iter().map(|&i| self.names[i].clone()).collect()
    }
}

/// `classify(error)` for an `ErrorInfo`'s JSON (`None`: no error): (class, because), or None
/// when Python's answer hangs on its Unicode tables.
#[pyfunction]
#[pyo3(signature = (error_json))]
fn classify(error_json: Option<&str>) -> PyResult<Option<(String, String)>> {
    let error: Option<ErrorInfo> = match error_json {
        Some(text) => {
            Some(serde_json::from_str(text).map_err(|e| PyValueError::new_err(e.to_string()))?)
        }
        None => None,
    };
    Ok(Classifier::new()
        .classify(error.as_ref())
        .ok()
        .map(|f| (f.class.name().to_string(), f.because.to_string())))
}

/// The failure catalogue, in order: (exception class or glob, failure class).
#[pyfunction]
fn failure_catalog() -> Vec<(String, String)> {
    CATALOG
        .iter()
        .map(|&(name, class)| (name.to_string(), class.name().to_string()))
        .collect()
}

/// Whether an RE2 `pattern` matches `text` as the matcher runs it (`how`: "search" or
/// "fullmatch"); ValueError with the reason when the pattern is refused.
#[pyfunction]
fn regex_matches(pattern: &str, text: &str, how: &str) -> PyResult<bool> {
    let regex = match how {
        "search" => names::search_regex(&[pattern.to_string()]),
        "fullmatch" => re2::translate(pattern)
            .and_then(|t| regex::Regex::new(&format!(r"\A(?:{t})\z")).map_err(|e| e.to_string())),
        other => return Err(PyValueError::new_err(format!("how: {other:?}"))),
    }
    .map_err(PyValueError::new_err)?;
    Ok(regex.is_match(text))
}

/// `fnmatch.fnmatchcase(name, pattern)`; ValueError when Python could not compile the glob.
#[pyfunction]
fn glob_matches(pattern: &str, name: &str) -> PyResult<bool> {
    let glob = crate::matcher::glob::Glob::new(pattern).map_err(PyValueError::new_err)?;
    Ok(glob.matches(name))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMatcher>()?;
    m.add_function(wrap_pyfunction!(classify, m)?)?;
    m.add_function(wrap_pyfunction!(failure_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(regex_matches, m)?)?;
    m.add_function(wrap_pyfunction!(glob_matches, m)?)?;
    Ok(())
}
