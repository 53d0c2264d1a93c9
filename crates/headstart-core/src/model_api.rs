//! The model side: what the engine asks a model for, and the stream it gets back.
//!
//! These are the types a provider adapter implements and produces. They live here, below the engine, so an adapter
//! (`headstart-providers`) depends on this crate alone; `headstart` re-exports them at its root.

use async_trait::async_trait;
use futures_core::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::ModelContext;
use crate::delta::DeltaEvent;
use crate::model_error::ModelError;

/// A model's response stream: delta events (contract §2), or a transport/provider failure.
pub type DeltaStream = BoxStream<'static, Result<DeltaEvent, ModelError>>;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
    /// Declared to the provider as a tool the model need not wait for (`ToolSpec::provider_async` in `headstart`; OpenAI
    /// Responses' `async: true`, sent only when the request settings opt in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provider_async: bool,
}

/// One model request.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// 0-based index of the request within the agent run.
    pub request: u32,
    /// The canonical model context (contract §7.3), its messages shared with the loop's copy.
    pub context: ModelContext,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
}

/// A streaming model (a provider client, a simulator, a replayed log).
///
/// `stream` returns once the response has begun (or failed to); an `Err` means no response exists and ends the
/// agent run with that error. Failures after that point belong inside the stream, where they end the response as
/// `error` (contract §3.5).
#[async_trait]
pub trait Model: Send + Sync {
    /// Starts one response.
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError>;

    /// The provider, as OpenTelemetry's `gen_ai.provider.name` spells it (`openai`, `anthropic`, `gcp.gemini`…);
    /// `None` when unknown. It labels the `chat` spans of the agent loop.
    fn provider(&self) -> Option<&str> {
        None
    }

    /// The model asked for (`gen_ai.request.model`); `None` when unknown.
    fn model_name(&self) -> Option<&str> {
        None
    }
}
