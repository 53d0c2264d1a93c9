//! JSON values as Python objects: what every event, delta and stored message crosses the boundary as.
//!
//! Built directly (dicts, lists, str, int, float, bool, None), not through `json.loads` of a text: a text delta's
//! event is a few small dicts, and building them costs less than printing and parsing them.

use std::convert::Infallible;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

/// A JSON value that converts into the Python object `json.loads` would give.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Json(pub Value);

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.0)
    }
}

/// JSON values that convert into a Python list of their objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JsonList(pub Vec<Value>);

impl<'py> IntoPyObject<'py> for JsonList {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for value in &self.0 {
            list.append(to_python(py, value)?)?;
        }
        Ok(list)
    }
}

/// `value` as a Python object.
pub(crate) fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => infallible(flag.into_pyobject(py))?.to_owned().into_any(),
        Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                infallible(int.into_pyobject(py))?.into_any()
            } else if let Some(int) = number.as_u64() {
                infallible(int.into_pyobject(py))?.into_any()
            } else {
                infallible(number.as_f64().unwrap_or(f64::NAN).into_pyobject(py))?.into_any()
            }
        }
        Value::String(text) => infallible(text.into_pyobject(py))?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python object as JSON, through Python's own `json.dumps` (so every type it accepts is accepted here).
pub(crate) fn from_python(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let text: String = value.py().import("json")?.call_method1("dumps", (value,))?.extract()?;
    serde_json::from_str(&text).map_err(|error| crate::errors::ConfigError::new_err(error.to_string()))
}

fn infallible<T>(result: Result<T, Infallible>) -> PyResult<T> {
    result.map_err(|never| match never {})
}
