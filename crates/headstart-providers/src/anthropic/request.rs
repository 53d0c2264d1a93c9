//! An Anthropic Messages request: its endpoint, headers, API key variable and body.

use headstart_core::{ContentBlock, Message, ToolDefinition};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use crate::request::settings::{arguments_object, RequestSettings};

/// The provider's public base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The environment variable the API key is read from by default.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The Anthropic API version header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The default `max_tokens` when [`RequestSettings::max_tokens`] is `None` (Anthropic requires one).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;

/// The streaming endpoint below `base` (no trailing slash).
pub(crate) fn endpoint(base: &str) -> String {
    format!("{base}/messages")
}

/// The API version header, and the key as `x-api-key`.
pub(crate) fn headers(request: RequestBuilder, key: Option<&str>) -> RequestBuilder {
    let request = request.header("anthropic-version", ANTHROPIC_VERSION);
    match key {
        Some(key) => request.header("x-api-key", key),
        None => request,
    }
}

/// Anthropic Messages: content blocks; consecutive tool results share one user message.
pub fn anthropic_body<'a>(
    settings: &RequestSettings,
    context: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolDefinition],
) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut last_is_results = false;
    for message in context {
        match message {
            Message::User(user) => {
                messages.push(json!({"role": "user", "content": [{"type": "text", "text": user.text}]}));
                last_is_results = false;
            }
            Message::Assistant(assistant) => {
                let content: Vec<Value> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking {
                            thinking,
                            signature: Some(signature),
                        } => Some(json!({"type": "thinking", "thinking": thinking, "signature": signature})),
                        ContentBlock::Thinking { signature: None, .. } => None,
                        ContentBlock::Text { text } if text.is_empty() => None,
                        ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                        ContentBlock::ToolCall(call) => Some(json!({"type": "tool_use", "id": call.id,
                                                                     "name": call.name, "input": arguments_object(call)})),
                    })
                    .collect();
                if !content.is_empty() {
                    messages.push(json!({"role": "assistant", "content": content}));
                }
                last_is_results = false;
            }
            Message::ToolResult(result) => {
                let block = json!({"type": "tool_result", "tool_use_id": result.tool_call_id,
                                   "content": result.text(), "is_error": result.is_error});
                match messages.last_mut().and_then(|m| m["content"].as_array_mut()) {
                    Some(content) if last_is_results => content.push(block),
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
                last_is_results = true;
            }
        }
    }
    let mut body = json!({
        "model": settings.model,
        "max_tokens": settings.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &settings.system {
        body["system"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
            .collect();
    }
    body
}
