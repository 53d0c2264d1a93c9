//! What crosses back from the loop as plain data: a call's (or a model request's) outcome through [`CallDone`], a
//! running call's partial results through [`CallUpdates`]. Both are called on the loop's thread and never wait.

use std::sync::{Mutex, PoisonError};

use headstart::{ToolOutput, UpdateSink};
use pyo3::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;

/// A call's outcome as the Python side reports it: plain data, no Python object.
pub(crate) type Outcome = Result<ToolOutput, String>;

/// What the Python side calls once with a call's outcome (`done(ok, text, details_json)`), on the loop's thread.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct CallDone {
    sender: Mutex<Option<oneshot::Sender<Outcome>>>,
}

impl CallDone {
    /// The callback that sends the outcome through `sender`.
    pub fn new(sender: oneshot::Sender<Outcome>) -> Self {
        CallDone {
            sender: Mutex::new(Some(sender)),
        }
    }
}

#[pymethods]
impl CallDone {
    /// Reports the call's outcome: its content text (and `details`, JSON text) when `ok`, else its error message.
    #[pyo3(signature = (ok, text, details=None))]
    fn __call__(&self, ok: bool, text: String, details: Option<String>) {
        let outcome = if ok {
            let details = details
                .and_then(|json| serde_json::from_str(&json).ok())
                .unwrap_or(Value::Null);
            Ok(ToolOutput::text(text).with_details(details))
        } else {
            Err(text)
        };
        if let Some(sender) = self.sender.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = sender.send(outcome);
        }
    }
}

/// A running call's partial results (`await ctx.update(...)`): sent straight to the engine, without waiting.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct CallUpdates {
    sink: UpdateSink,
}

impl CallUpdates {
    /// Partial results of a call go to `sink`.
    pub fn new(sink: UpdateSink) -> Self {
        CallUpdates { sink }
    }
}

#[pymethods]
impl CallUpdates {
    /// Sends a partial result: its text, and its `details` as JSON text.
    #[pyo3(signature = (text, details=None))]
    fn send(&self, text: String, details: Option<String>) {
        let details = details
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or(Value::Null);
        self.sink.send(ToolOutput::text(text).with_details(details));
    }
}
