//! [`PyHook`]: Python callables as the engine's `before_tool_call` / `after_tool_call` hook.
//!
//! Each is called on the run's loop through the mailbox (sync or `async`), with plain JSON data in and out:
//! `before_tool_call(call, arguments)` returns `None`/`True` (run it), `False` (block it) or a string (block it with
//! that reason); `after_tool_call(call, result)` returns `None` (keep the result) or a dict of the fields to
//! replace (`content` as text, `details`, `is_error`, `terminate`). A hook that raises fails the call with its error.

use std::sync::Arc;

use async_trait::async_trait;
use headstart::core::model::ContentBlock;
use headstart::{Arguments, Decision, ResultDraft, ResultOverride, ToolCall, ToolError, ToolHook};
use pyo3::prelude::*;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::home::Home;
use crate::mailbox::Letter;
use crate::outcome::CallDone;
use crate::task::CancelOnDrop;

/// The Python hook callables of an engine.
pub(crate) struct PyHook {
    pub before: Option<Arc<Py<PyAny>>>,
    pub after: Option<Arc<Py<PyAny>>>,
    pub home: Home,
}

impl PyHook {
    /// Calls `function` with `arguments` (JSON values) on the loop; what it returned, as JSON.
    async fn call(&self, function: &Arc<Py<PyAny>>, arguments: Vec<Value>) -> Result<Value, ToolError> {
        let mailbox = self.home.mailbox().map_err(ToolError::new)?;
        let (sender, receiver) = oneshot::channel();
        let id = mailbox.next_id();
        mailbox.send(Letter::Hook {
            id,
            function: Arc::clone(function),
            arguments: arguments.iter().map(Value::to_string).collect(),
            done: CallDone::new(sender),
        });
        let mut guard = CancelOnDrop::new(mailbox.clone(), id);
        let outcome = receiver.await;
        guard.disarm();
        match outcome {
            Ok(Ok(output)) => Ok(output.details),
            Ok(Err(message)) => Err(ToolError::new(format!("a hook failed: {message}"))),
            Err(_) => Err(ToolError::new("a hook's task ended without an answer")),
        }
    }
}

#[async_trait]
impl ToolHook for PyHook {
    async fn before_tool_call(&self, call: &ToolCall, arguments: &Arguments) -> Result<Decision, ToolError> {
        let Some(before) = &self.before else {
            return Ok(Decision::Continue);
        };
        let call = serde_json::to_value(call).unwrap_or_default();
        Ok(
            match self.call(before, vec![call, Value::Object(arguments.clone())]).await? {
                Value::Bool(false) => Decision::Block(None),
                Value::String(reason) => Decision::Block(Some(reason)),
                _ => Decision::Continue,
            },
        )
    }

    async fn after_tool_call(&self, call: &ToolCall, result: &ResultDraft) -> Result<ResultOverride, ToolError> {
        let Some(after) = &self.after else {
            return Ok(ResultOverride::default());
        };
        let draft = json!({
            "content": headstart::core::model::joined_text(&result.content),
            "details": result.details,
            "is_error": result.is_error,
            "terminate": result.terminate,
        });
        let call = serde_json::to_value(call).unwrap_or_default();
        let Value::Object(changes) = self.call(after, vec![call, draft]).await? else {
            return Ok(ResultOverride::default());
        };
        Ok(ResultOverride {
            content: changes
                .get("content")
                .and_then(Value::as_str)
                .map(|text| vec![ContentBlock::text(text)]),
            details: changes.get("details").cloned(),
            is_error: changes.get("is_error").and_then(Value::as_bool),
            terminate: changes.get("terminate").and_then(Value::as_bool),
        })
    }
}
