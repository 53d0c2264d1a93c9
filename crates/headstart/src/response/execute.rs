//! The execute and finalize phases of one call (contract §5.4, §4.6): the body with its timeout, panics caught,
//! then the `after` hooks.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use headstart_core::{ToolCall, ToolResultMessage};
use headstart_store::{RunEnd, RunOutcome, RunState};
use serde_json::Value;

use crate::response::panic::panic_message;
use crate::response::prepare::ReadyCall;
use crate::tools::error::ToolError;
use crate::tools::hooks::{Hooks, ResultDraft};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// The settled result of an executed call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Executed {
    pub draft: ResultDraft,
    pub outcome: RunOutcome,
}

impl Executed {
    pub fn error(outcome: RunOutcome, text: impl Into<String>) -> Self {
        Executed {
            draft: error_draft(text.into()),
            outcome,
        }
    }

    /// The result message for `call`.
    pub fn into_result(self, call: &ToolCall) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: self.draft.content,
            details: self.draft.details,
            is_error: self.draft.is_error,
            terminate: self.draft.terminate,
            ready_during: None,
        }
    }

    /// The result message for `call` and how its run ends (`started_at_us`: when its body started, if it did).
    pub fn settle(self, call: &ToolCall, started_at_us: Option<i64>) -> (ToolResultMessage, RunEnd) {
        let run = RunEnd {
            state: self.run_state(),
            outcome: self.outcome,
            started_at_us,
        };
        (self.into_result(call), run)
    }

    /// The run state this outcome ends in.
    pub fn run_state(&self) -> RunState {
        match self.outcome {
            RunOutcome::Cancelled | RunOutcome::TimedOut => RunState::Cancelled,
            // A call the engine did not start (contract §7.5.4) never ran.
            RunOutcome::Skipped => RunState::Skipped,
            _ => RunState::Finished,
        }
    }
}

fn error_draft(text: String) -> ResultDraft {
    ResultDraft {
        content: vec![headstart_core::ContentBlock::text(text)],
        details: Value::Null,
        is_error: true,
        terminate: false,
    }
}

/// Runs a tool's body as the engine runs every call's (contract §4.6, §5.4): the timeout counts from here (the call's
/// start), a return exactly at the deadline wins, a body that passes it has its token cancelled, and a panic
/// becomes an error instead of unwinding into the caller. A body that did not fail on its own says how it stopped
/// ([`ToolError::stopped`]: timed out, panicked, or cancelled through its context's token), with the text the engine
/// gives it. A host that runs bodies outside the engine (Restate's `Tools` service) runs them with this, so a call
/// ends the same wherever its body ran.
pub async fn run_body(tool: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
    let cancel = context.cancel.clone();
    let timeout = tool.spec().timeout;
    let body = AssertUnwindSafe(tool.execute(arguments, context)).catch_unwind();
    let returned = match timeout {
        None => Some(body.await),
        Some(limit) => tokio::select! {
            biased;
            returned = body => Some(returned),
            () = tokio::time::sleep(limit) => None,
        },
    };
    match returned {
        None => {
            cancel.cancel();
            let limit = timeout.map_or(0, |limit| limit.as_millis());
            Err(ToolError::stopped(
                RunOutcome::TimedOut,
                format!("timed out after {limit}ms"),
            ))
        }
        Some(Ok(Ok(output))) => Ok(output),
        Some(Ok(Err(error))) if error.stopped.is_none() && cancel.is_cancelled() => {
            Err(ToolError::stopped(RunOutcome::Cancelled, error.message))
        }
        Some(Ok(Err(error))) => Err(error),
        Some(Err(payload)) => Err(ToolError::stopped(
            RunOutcome::Panicked,
            format!(
                "tool {} panicked: {}",
                tool.spec().name,
                panic_message(payload.as_ref())
            ),
        )),
    }
}

/// Executes a prepared call and finalizes its result with the `after` hooks. Never unwinds: panics in the body
/// or in a hook become error results.
pub(crate) async fn execute(ready: ReadyCall, call: Arc<ToolCall>, hooks: Hooks, context: ToolContext) -> Executed {
    let returned = run_body(ready.tool.as_ref(), ready.arguments, context).await;
    finalize(&call, body_returned(returned), &hooks).await
}

/// What a body's return is, before the `after` hooks (contract §5.4): its output, or its error with how it stopped.
pub(crate) fn body_returned(result: ToolResult) -> Executed {
    match result {
        Ok(output) => Executed {
            draft: ResultDraft {
                content: output.content,
                details: output.details,
                is_error: false,
                terminate: output.terminate,
            },
            outcome: RunOutcome::Finished,
        },
        Err(error) => Executed::error(error.stopped.unwrap_or(RunOutcome::Error), error.message),
    }
}

/// The finalize phase (contract §4.6): the `after` hooks on an executed call's result, wherever its body ran. Never
/// unwinds: a hook's panic becomes an error result.
pub(crate) async fn finalize(call: &ToolCall, executed: Executed, hooks: &Hooks) -> Executed {
    let finalized = AssertUnwindSafe(hooks.after(call, executed.draft.clone()))
        .catch_unwind()
        .await;
    match finalized {
        Ok(Ok(draft)) => Executed { draft, ..executed },
        Ok(Err(error)) => Executed::error(RunOutcome::Error, error.message),
        Err(payload) => Executed::error(
            RunOutcome::Error,
            format!("after_tool_call hook panicked: {}", panic_message(payload.as_ref())),
        ),
    }
}
