//! The prepare phase (contract §5.2) and its immediate outcomes (contract §5.3).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use headstart_core::{ToolArguments, ToolCall};
use headstart_store::RunOutcome;

use crate::response::panic::panic_message;
use crate::tools::hooks::{Decision, Hooks};
use crate::tools::tool::{Arguments, Tool};
use crate::tools::toolbox::Toolbox;

/// A call that passed preparation.
pub(crate) struct ReadyCall {
    pub tool: Arc<dyn Tool>,
    pub arguments: Arguments,
    pub conflict_key: Option<String>,
}

/// A call settled without executing: its error text and outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Immediate {
    pub text: String,
    pub outcome: RunOutcome,
}

impl Immediate {
    fn new(outcome: RunOutcome, text: impl Into<String>) -> Self {
        Immediate {
            text: text.into(),
            outcome,
        }
    }

    /// A call past [`EngineConfig::max_calls_per_response`](crate::EngineConfig::max_calls_per_response) (contract
    /// §4.6.4): refused without looking the tool up.
    pub(crate) fn too_many_calls(limit: usize) -> Self {
        Immediate::new(
            RunOutcome::Blocked,
            format!("too many tool calls in one response (the limit is {limit})"),
        )
    }
}

/// Looks the tool up, rewrites and validates the arguments, and runs the `before` hooks, in that order. A panic
/// in a tool's `prepare_arguments`/`conflict_key` or in a hook becomes a blocked outcome, never an unwind.
pub(crate) async fn prepare(call: &ToolCall, toolbox: &Toolbox, hooks: &Hooks) -> Result<ReadyCall, Immediate> {
    match AssertUnwindSafe(prepare_unguarded(call, toolbox, hooks))
        .catch_unwind()
        .await
    {
        Ok(prepared) => prepared,
        Err(payload) => Err(Immediate::new(
            RunOutcome::Blocked,
            format!(
                "preparing tool {} panicked: {}",
                call.name,
                panic_message(payload.as_ref())
            ),
        )),
    }
}

async fn prepare_unguarded(call: &ToolCall, toolbox: &Toolbox, hooks: &Hooks) -> Result<ReadyCall, Immediate> {
    let name = &call.name;
    let Some(tool) = toolbox.get(name).cloned() else {
        return Err(Immediate::new(RunOutcome::NotFound, format!("tool {name} not found")));
    };
    let invalid = |message: &str| {
        Immediate::new(
            RunOutcome::Invalid,
            format!("invalid arguments for tool {name}: {message}"),
        )
    };
    let arguments = match &call.arguments {
        ToolArguments::Valid(arguments) => arguments.clone(),
        ToolArguments::Invalid { error, .. } => return Err(invalid(error)),
    };
    let arguments = tool.prepare_arguments(arguments).map_err(|message| invalid(&message))?;
    if let Err(violations) = toolbox.validate(name, &arguments) {
        return Err(Immediate::new(
            RunOutcome::Invalid,
            format!("validation failed for tool {name}: {}", violations.join("; ")),
        ));
    }
    match hooks.before(call, &arguments).await {
        Ok(Decision::Continue) => {}
        Ok(Decision::Block(reason)) => {
            let reason = reason.unwrap_or_else(|| "tool execution was blocked".to_owned());
            return Err(Immediate::new(RunOutcome::Blocked, reason));
        }
        Err(err) => return Err(Immediate::new(RunOutcome::Blocked, err.message)),
    }
    let conflict_key = tool.conflict_key(&arguments);
    Ok(ReadyCall {
        tool,
        arguments,
        conflict_key,
    })
}
