//! [`ToolOutput`]: what a tool body returns and what its partial updates carry. A file of its own because both the
//! [`Tool`](crate::Tool) trait and the update board use it.

use headstart_core::model::ContentBlock;
use serde::Serialize;
use serde_json::Value;

/// What a tool body returns (and what partial updates carry).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: Vec<ContentBlock>,
    /// Structured data for the application (not sent to the model).
    pub details: Value,
    /// Ask the agent loop to stop after this call's batch (contract §5.6).
    pub terminate: bool,
}

impl ToolOutput {
    /// An output holding one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            ..ToolOutput::default()
        }
    }

    /// Sets `details`.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// Sets `terminate`.
    pub fn with_terminate(mut self, terminate: bool) -> Self {
        self.terminate = terminate;
        self
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::text(text)
    }
}

impl From<Value> for ToolOutput {
    /// The value's JSON text for the model, and the value itself as `details`.
    fn from(value: Value) -> Self {
        ToolOutput::text(value.to_string()).with_details(value)
    }
}
