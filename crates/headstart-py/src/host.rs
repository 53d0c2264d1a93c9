//! [`PyHost`]: the Python package's [`Host`]: how the engine reaches Python.
//!
//! An ask becomes a letter in the engine's [`Mailbox`], which the run's asyncio loop takes on its own thread and
//! starts as a task (`headstart._runtime.install`); the task's answer comes back through [`CallDone`] as JSON text,
//! and an abort is a cancel letter. No GIL is taken on the engine's side. What an ask means and how its answer is
//! read are the host layer's ([`headstart_host`]).

use std::collections::HashMap;
use std::sync::Arc;

use headstart::core::model::joined_text;
use headstart_host::{Ask, Host, HostFailure, Reply};
use pyo3::prelude::*;
use serde_json::{json, Value};

use crate::home::Home;
use crate::mailbox::Letter;
use crate::outcome::{CallDone, CallUpdates};

/// The Python functions of one engine: its tools by name, its hooks, and the loop they run on.
pub(crate) struct PyHost {
    pub home: Home,
    /// The `headstart.Tool` objects, by name.
    pub tools: HashMap<String, Arc<Py<PyAny>>>,
    pub before: Option<Arc<Py<PyAny>>>,
    pub after: Option<Arc<Py<PyAny>>>,
}

impl Host for PyHost {
    fn start(&self, ask: Ask, reply: Reply) -> Result<u64, HostFailure> {
        let mailbox = self.home.mailbox().map_err(HostFailure::Gone)?;
        let id = mailbox.next_id();
        let done = CallDone::new(reply);
        let letter = match ask {
            Ask::Call(call) => {
                let tool = self
                    .tools
                    .get(&call.tool)
                    .ok_or_else(|| HostFailure::Gone(format!("the engine has no Python tool {}", call.tool)))?;
                Letter::Call {
                    id,
                    tool: Arc::clone(tool),
                    arguments: Value::Object(call.arguments).to_string(),
                    call_id: call.call_id,
                    session_id: call.session_id,
                    key: call.idempotency_key,
                    updates: CallUpdates::new(call.updates),
                    done,
                }
            }
            Ask::Before { call, arguments } => Letter::Hook {
                id,
                function: self.hook(&self.before, "before_tool_call")?,
                arguments: vec![json!(call).to_string(), Value::Object(arguments).to_string()],
                done,
            },
            Ask::After { call, result } => Letter::Hook {
                id,
                function: self.hook(&self.after, "after_tool_call")?,
                arguments: vec![
                    json!(call).to_string(),
                    json!({
                        "content": joined_text(&result.content),
                        "details": result.details,
                        "is_error": result.is_error,
                        "terminate": result.terminate,
                    })
                    .to_string(),
                ],
                done,
            },
        };
        mailbox.send(letter);
        Ok(id)
    }

    fn abort(&self, id: u64) {
        if let Ok(mailbox) = self.home.mailbox() {
            mailbox.send(Letter::Cancel { id });
        }
    }
}

impl PyHost {
    /// The hook function `name`, which the engine asks only when the Python side gave it.
    fn hook(&self, function: &Option<Arc<Py<PyAny>>>, name: &str) -> Result<Arc<Py<PyAny>>, HostFailure> {
        function
            .clone()
            .ok_or_else(|| HostFailure::Gone(format!("the engine has no {name} hook")))
    }
}
