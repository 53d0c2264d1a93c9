//! What every request body is built from besides the context: the [`RequestSettings`], and how a tool call's
//! arguments are sent back.

use headstart_core::{ToolArguments, ToolCall};
use serde_json::{Map, Value};

/// The per-request settings that are not part of the context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestSettings {
    /// The model name.
    pub model: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The output token limit. Anthropic requires one: 8192 when `None`.
    pub max_tokens: Option<u32>,
    /// Extra top-level body fields (e.g. `temperature`, `reasoning`, `store`); they replace fields of the same name.
    pub extra: Map<String, Value>,
    /// Declare provider-async tools to the model (OpenAI Responses' `async: true` on their definitions: GPT-6 Astra
    /// and later). Off by default: older models may refuse the field. Other wire formats have no such declaration
    /// and ignore it.
    pub provider_async: bool,
}

/// The argument text of a call: the object's JSON, or the verbatim invalid text.
pub(crate) fn arguments_text(call: &ToolCall) -> String {
    match &call.arguments {
        ToolArguments::Valid(map) => Value::Object(map.clone()).to_string(),
        ToolArguments::Invalid { raw, .. } => raw.clone(),
    }
}

/// The arguments as an object (`{}` for invalid ones).
pub(crate) fn arguments_object(call: &ToolCall) -> Value {
    Value::Object(call.arguments.as_object().cloned().unwrap_or_default())
}
