//! Tools: the [`Tool`] trait and what a call's body gets to work with.

use std::time::Duration;

use async_trait::async_trait;
use headstart_store::SessionId;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::config::ExecutionMode;
use crate::tools::error::ToolError;
use crate::tools::output::ToolOutput;
use crate::tools::updates::UpdateSink;

/// A tool's arguments: always a JSON object once a call reaches `execute`.
pub type Arguments = Map<String, Value>;

/// What a call's body returns: its output, or the error its result reports.
pub type ToolResult = Result<ToolOutput, ToolError>;

/// What a call's body gets besides its arguments.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's id.
    pub call_id: String,
    /// The session the call belongs to; `None` only for a [detached](ToolContext::detached) context.
    pub session_id: Option<SessionId>,
    /// The call's stable idempotency key (contract §7.5): the same on every attempt and every worker, different for
    /// every (session, request, call id) ([`headstart_store::idempotency_key`]). Pass it to the service the tool calls
    /// (an `Idempotency-Key` header, a request id), so that a call recovery re-runs is recognised there.
    pub idempotency_key: String,
    /// Cancelled when the response fails, the caller cancels, or the call's timeout passes. A body should return
    /// promptly once it fires; whatever it returns is recorded (contract §5.5).
    pub cancel: CancellationToken,
    /// Partial results.
    pub updates: UpdateSink,
}

impl ToolContext {
    /// A context for running a tool outside the engine (a unit test, a REPL): a fresh cancellation token, an update
    /// sink that drops what it is sent, and the call id as its idempotency key (there is no session).
    pub fn detached(call_id: impl Into<String>) -> Self {
        let call_id = call_id.into();
        ToolContext {
            idempotency_key: call_id.clone(),
            call_id,
            session_id: None,
            cancel: CancellationToken::new(),
            updates: UpdateSink::disconnected(),
        }
    }
}

/// A tool the model can call.
///
/// Only `name` and `execute` are required. The engine guarantees that `execute` never begins before the
/// assistant fragment containing the call is durably committed (contract §1), and that each call id executes at most
/// once per response (contract §4.7).
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str {
        ""
    }

    /// JSON Schema of the arguments; calls are validated against it before they run (contract §5.2).
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object"})
    }

    /// Early: the call may start as soon as it is sealed, while the model keeps streaming (contract §3.1; the
    /// wire and scenario files flag such a tool `async`). Only flag tools whose result the model does not need before
    /// it finishes the response, and whose effects are safe to start before the model has finished talking.
    ///
    /// Defaults to what the deprecated [`Tool::is_async`] says, so a tool written before the rename keeps its flag.
    fn early(&self) -> bool {
        #[allow(deprecated)]
        self.is_async()
    }

    /// The name [`Tool::early`] had before issue 20 (`execute` is async for every tool, so the name misled).
    /// Implement `early` instead; the engine asks `early`, whose default asks this. Callers should ask `early` too:
    /// a tool that implements only `early` answers `false` here.
    #[deprecated(note = "renamed to `Tool::early`: implement and call `early` instead")]
    fn is_async(&self) -> bool {
        false
    }

    /// Provider-async: the tool is declared to the provider as one whose result the model need not wait for (OpenAI
    /// Responses' `async: true` on the tool's definition, sent only when the model's request settings opt in), so
    /// the model goes on working after it calls it, and the result reaches it in a later request. A provider-async
    /// tool is early too: its calls start at their seal (contract §3.1). Declare only tools whose result the model
    /// can do without for a while.
    fn provider_async(&self) -> bool {
        false
    }

    /// `Sequential` fences this tool's batch: its calls run one at a time, after every earlier batch settled
    /// (contract §4.4). `Parallel` (the default) leaves the tool to the engine's [`EngineConfig::tool_execution`](crate::EngineConfig::tool_execution).
    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    /// Calls with equal keys run in source order; different keys run in parallel (contract §4.5).
    fn conflict_key(&self, _arguments: &Arguments) -> Option<String> {
        None
    }

    /// The body is cancelled and the call fails with `"timed out after <N>ms"` once this passes (contract §4.6).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// A compatibility rewrite applied before validation (contract §5.2); an `Err` is an invalid-arguments outcome.
    fn prepare_arguments(&self, arguments: Arguments) -> Result<Arguments, String> {
        Ok(arguments)
    }

    /// Safe to run twice: recovery may re-execute an interrupted call instead of failing it (contract §7.4).
    fn idempotent(&self) -> bool {
        false
    }

    /// Runs the call.
    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult;
}
