//! Tools: the [`Tool`] trait and what a call's body gets to work with.

use async_trait::async_trait;
use headstart_store::SessionId;
use serde_json::{Map, Value};

use crate::tools::spec::ToolSpec;
use tokio_util::sync::CancellationToken;

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
/// Only `spec` and `execute` are required: what the tool is ([`ToolSpec`], built once) and how a call runs. The
/// engine guarantees that `execute` never begins before the assistant fragment containing the call is durably
/// committed (contract §1), and that each call id executes at most once per response (contract §4.7).
///
/// ```
/// use async_trait::async_trait;
/// use headstart::{Arguments, Tool, ToolContext, ToolOutput, ToolResult, ToolSpec};
///
/// struct Lookup {
///     spec: ToolSpec,
/// }
///
/// #[async_trait]
/// impl Tool for Lookup {
///     fn spec(&self) -> &ToolSpec {
///         &self.spec
///     }
///
///     async fn execute(&self, arguments: Arguments, _context: ToolContext) -> ToolResult {
///         Ok(ToolOutput::text(format!("looked up {}", arguments["word"])))
///     }
/// }
///
/// let lookup = Lookup { spec: ToolSpec::new("lookup").early(true) };
/// assert_eq!(lookup.spec().name, "lookup");
/// ```
#[async_trait]
pub trait Tool: Send + Sync {
    /// What the tool is: its name, description and parameters, and the flags its calls are scheduled by.
    fn spec(&self) -> &ToolSpec;

    /// Calls with equal keys run in source order; different keys run in parallel (contract §4.5). A function of
    /// each call's arguments, so not part of the spec.
    fn conflict_key(&self, _arguments: &Arguments) -> Option<String> {
        None
    }

    /// A compatibility rewrite applied before validation (contract §5.2); an `Err` is an invalid-arguments outcome.
    fn prepare_arguments(&self, arguments: Arguments) -> Result<Arguments, String> {
        Ok(arguments)
    }

    /// Runs the call.
    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult;
}
