//! [`PyTool`]: a Python function (decorated with `@headstart.tool`) as an engine [`Tool`].
//!
//! Everything the scheduler asks (early, sequential, conflict key, timeout) is read once, when the engine is built,
//! so the engine never calls into Python to decide scheduling. Only `execute` crosses over: it starts the call's
//! coroutine on the run's loop (`headstart._runtime.start_call`, from tokio's blocking pool), waits for its outcome
//! as plain data through a oneshot channel, and cancels the Python task when the call's token fires or when the
//! engine drops the call (its timeout).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::{Arguments, ExecutionMode, Tool, ToolContext, ToolError, ToolResult, ToolSpec};
use pyo3::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::home::Home;
use crate::json::from_python;
use crate::mailbox::Letter;
use crate::outcome::{CallDone, CallUpdates};
use crate::task::CancelOnDrop;

/// How a tool's calls are keyed for conflicts (contract §4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ConflictKey {
    /// Every call has this key.
    Fixed(String),
    /// The call's argument of this name (its text, or its JSON) is the key.
    Argument(String),
}

/// A Python tool.
pub(crate) struct PyTool {
    spec: ToolSpec,
    conflict_key: Option<ConflictKey>,
    /// The Python `headstart.Tool` object.
    function: Arc<Py<PyAny>>,
    home: Home,
}

impl PyTool {
    /// Reads a `headstart.Tool`'s settings; its calls will run on `home`'s loop.
    pub fn from_python(tool: &Bound<'_, PyAny>, home: Home) -> PyResult<Self> {
        let conflict_key = match tool.getattr("conflict_key")?.extract::<Option<String>>()? {
            None => None,
            Some(key) if tool.getattr("conflict_key_is_argument")?.extract::<bool>()? => {
                Some(ConflictKey::Argument(key))
            }
            Some(key) => Some(ConflictKey::Fixed(key)),
        };
        let name: String = tool.getattr("name")?.extract()?;
        let timeout = match tool.getattr("timeout")?.extract::<Option<f64>>()? {
            None => None,
            // A negative timeout is no time at all; an infinite, NaN or out-of-range one is the caller's error, not
            // a panic.
            Some(seconds) => Some(
                Duration::try_from_secs_f64(if seconds < 0.0 { 0.0 } else { seconds }).map_err(|_| {
                    crate::errors::ConfigError::new_err(format!(
                        "tool {name}: timeout must be a finite number of seconds, not {seconds}"
                    ))
                })?,
            ),
        };
        let spec = ToolSpec::new(name)
            .description(tool.getattr("description")?.extract::<String>()?)
            .parameters(from_python(&tool.getattr("parameters")?)?)
            .early(tool.getattr("early")?.extract()?)
            .provider_async(tool.getattr("provider_async")?.extract()?)
            .idempotent(tool.getattr("idempotent")?.extract()?)
            .execution_mode(ExecutionMode::sequential_if(tool.getattr("sequential")?.extract()?))
            .timeout(timeout);
        Ok(PyTool {
            spec,
            conflict_key,
            function: Arc::new(tool.clone().unbind()),
            home,
        })
    }
}

#[async_trait]
impl Tool for PyTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        match self.conflict_key.as_ref()? {
            ConflictKey::Fixed(key) => Some(key.clone()),
            ConflictKey::Argument(name) => arguments.get(name).map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
        }
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult {
        let mailbox = self.home.mailbox().map_err(ToolError::new)?;
        let (sender, mut receiver) = oneshot::channel();
        let id = mailbox.next_id();
        mailbox.send(Letter::Call {
            id,
            tool: Arc::clone(&self.function),
            arguments: Value::Object(arguments).to_string(),
            call_id: context.call_id.clone(),
            session_id: context.session_id.as_ref().map(|session| session.0.clone()),
            key: context.idempotency_key.clone(),
            updates: CallUpdates::new(context.updates.clone()),
            done: CallDone::new(sender),
        });
        let mut guard = CancelOnDrop::new(mailbox.clone(), id);
        let outcome = tokio::select! {
            outcome = &mut receiver => outcome,
            () = context.cancel.cancelled() => {
                guard.cancel();
                receiver.await
            }
        };
        guard.disarm();
        match outcome {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(_) => Err(ToolError::new("the Python tool's task ended without an outcome")),
        }
    }
}
