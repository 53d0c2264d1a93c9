//! The exception classes Python sees, and how Rust failures become them.
//!
//! A Rust panic must never reach Python as pyo3's `PanicException` (a `BaseException`, which `except Exception`
//! misses): the awaitables catch panics and raise [`EngineError`] instead.

use std::any::Any;

use pyo3::exceptions::PyException;
use pyo3::{create_exception, PyErr};

create_exception!(
    headstart,
    HeadstartError,
    PyException,
    "The base class of every headstart error."
);
create_exception!(
    headstart,
    EngineError,
    HeadstartError,
    "The engine failed in a way that is not the store's or the model's (an internal error, a panic)."
);
create_exception!(
    headstart,
    StoreError,
    HeadstartError,
    "The transcript store failed: it cannot be opened, read or written."
);
create_exception!(
    headstart,
    SessionBusy,
    StoreError,
    "Another process holds the session (its lock beside the SQLite file): the message names it. Nothing was written."
);
create_exception!(
    headstart,
    ModelError,
    HeadstartError,
    "The model's stream could not be read (an unknown format, an event that is not JSON)."
);
create_exception!(
    headstart,
    ConfigError,
    HeadstartError,
    "A tool or engine setting is invalid (a duplicate tool name, an unknown format)."
);

/// A store failure as a Python exception.
pub(crate) fn store_error(error: impl std::fmt::Display) -> PyErr {
    StoreError::new_err(error.to_string())
}

/// A panic's payload as an [`EngineError`].
pub(crate) fn panic_error(payload: &(dyn Any + Send)) -> PyErr {
    EngineError::new_err(panic_message(payload))
}

/// What a caught panic says, as an `EngineError`'s message.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("headstart panicked: {text}")
}
