//! [`ToolSpec`]: what a tool is, for the model and for the engine, as one value.

use std::time::Duration;

use serde_json::Value;

use crate::config::ExecutionMode;

/// What a tool is: its name, description and parameters for the model, and the flags the engine schedules its calls
/// by. A [`Tool`](crate::Tool) builds it once and returns it from [`Tool::spec`](crate::Tool::spec); a
/// [layer](crate::layer) that changes a flag returns a changed copy.
///
/// ```
/// use std::time::Duration;
/// use headstart::ToolSpec;
///
/// let spec = ToolSpec::new("lookup")
///     .description("Looks a word up")
///     .parameters(serde_json::json!({"type": "object", "properties": {"word": {"type": "string"}}}))
///     .early(true)
///     .idempotent(true)
///     .timeout(Some(Duration::from_secs(10)));
/// assert!(spec.early && spec.idempotent && !spec.provider_async);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments; calls are validated against it before they run (contract §5.2). Default:
    /// `{"type": "object"}`.
    pub parameters: Value,
    /// Early: a call may start as soon as it is sealed, while the model keeps streaming (contract §3.1; the wire and
    /// scenario files flag such a tool `async`). Only flag tools whose result the model does not need before it
    /// finishes the response, and whose effects are safe to start before the model has finished talking.
    pub early: bool,
    /// Provider-async: declared to the provider as a tool whose result the model need not wait for (OpenAI
    /// Responses' `async: true`, sent only when the model's request settings opt in), so the model goes on working
    /// after it calls it, and the result reaches it in a later request. A provider-async tool is early too: its
    /// calls start at their seal (contract §3.1).
    pub provider_async: bool,
    /// Safe to run twice: recovery may run an interrupted call again instead of failing it (contract §7.4).
    pub idempotent: bool,
    /// `Sequential` fences this tool's batch: its calls run one at a time, after every earlier batch settled
    /// (contract §4.4). `Parallel` (the default) leaves the tool to the engine's
    /// [`EngineConfig::tool_execution`](crate::EngineConfig::tool_execution).
    pub execution_mode: ExecutionMode,
    /// The body is cancelled and the call fails with `"timed out after <N>ms"` once this passes (contract §4.6).
    pub timeout: Option<Duration>,
}

impl ToolSpec {
    /// A tool named `name`: no description, any object as arguments, not early, not idempotent, parallel, no
    /// timeout.
    pub fn new(name: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            early: false,
            provider_async: false,
            idempotent: false,
            execution_mode: ExecutionMode::Parallel,
            timeout: None,
        }
    }

    /// With `description`.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// With `parameters` as the arguments' JSON Schema.
    pub fn parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// Early or not ([`ToolSpec::early`](#structfield.early)).
    pub fn early(mut self, early: bool) -> Self {
        self.early = early;
        self
    }

    /// Provider-async or not ([`ToolSpec::provider_async`](#structfield.provider_async)); a provider-async tool is
    /// early too.
    pub fn provider_async(mut self, provider_async: bool) -> Self {
        self.provider_async = provider_async;
        self.early |= provider_async;
        self
    }

    /// Idempotent or not ([`ToolSpec::idempotent`](#structfield.idempotent)).
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// With `mode` ([`ToolSpec::execution_mode`](#structfield.execution_mode)).
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.execution_mode = mode;
        self
    }

    /// With `timeout` ([`ToolSpec::timeout`](#structfield.timeout)).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }
}
