//! What crosses back from the loop as plain data: an answer (a tool's, a hook's, or whether a model gave its stream)
//! through [`CallDone`], a running call's partial results through [`CallUpdates`]. Both are called on the loop's
//! thread and never wait.

use std::sync::{Mutex, PoisonError};

use headstart::{ToolOutput, UpdateSink};
use headstart_host::{HostFailure, Reply};
use pyo3::prelude::*;
use serde_json::Value;

/// What the Python side calls once with an answer (`done(ok, payload)`), on the loop's thread.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct CallDone {
    reply: Mutex<Option<Reply>>,
}

impl CallDone {
    /// The callback that sends the answer through `reply`.
    pub fn new(reply: Reply) -> Self {
        CallDone {
            reply: Mutex::new(Some(reply)),
        }
    }
}

#[pymethods]
impl CallDone {
    /// Reports the answer: when `ok`, `payload` is its JSON text (none: nothing); else the error's message.
    #[pyo3(signature = (ok, payload=None))]
    fn __call__(&self, ok: bool, payload: Option<String>) {
        let answer = match (ok, payload) {
            (true, None) => Ok(Value::Null),
            (true, Some(json)) => serde_json::from_str(&json)
                .map_err(|error| HostFailure::Unreadable(format!("an answer that is not JSON: {error}"))),
            (false, message) => Err(HostFailure::Raised(message.unwrap_or_default())),
        };
        if let Some(reply) = self.reply.lock().unwrap_or_else(PoisonError::into_inner).take() {
            reply.send(answer);
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
