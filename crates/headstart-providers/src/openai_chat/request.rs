//! An OpenAI Chat Completions request: its endpoint, headers, API key variable and body. OpenAI's Responses API
//! shares the base URL, the key and the headers.

use headstart_core::{AssistantMessage, Message, ToolDefinition};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use crate::request::settings::{arguments_text, RequestSettings};

/// OpenAI's public base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable the API key is read from by default.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The streaming endpoint below `base` (no trailing slash).
pub(crate) fn endpoint(base: &str) -> String {
    format!("{base}/chat/completions")
}

/// The key as `Authorization: Bearer`.
pub(crate) fn headers(request: RequestBuilder, key: Option<&str>) -> RequestBuilder {
    match key {
        Some(key) => request.bearer_auth(key),
        None => request,
    }
}

fn assistant_text(message: &AssistantMessage) -> String {
    headstart_core::model::joined_text(&message.content)
}

/// OpenAI Chat Completions: `messages` with `tool_calls` / `role: tool`, `stream_options.include_usage`.
pub fn openai_chat_body<'a>(
    settings: &RequestSettings,
    context: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolDefinition],
) -> Value {
    let (mut body, mut messages) = openai_chat_frame(settings, tools);
    for message in context {
        openai_chat_items(message, &mut messages);
    }
    body["messages"] = Value::Array(messages);
    body
}

/// The `messages` items of one context message (none for an empty assistant message): each message's items depend
/// on that message alone, so a body can be assembled from items kept from the request before.
pub(crate) fn openai_chat_items(message: &Message, items: &mut Vec<Value>) {
    match message {
        Message::User(user) => items.push(json!({"role": "user", "content": user.text})),
        Message::Assistant(assistant) => {
            let text = assistant_text(assistant);
            let calls: Vec<Value> = assistant
                .tool_calls()
                .map(|call| {
                    json!({"id": call.id, "type": "function",
                           "function": {"name": call.name, "arguments": arguments_text(call)}})
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return;
            }
            let mut entry = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                entry["tool_calls"] = Value::Array(calls);
            }
            items.push(entry);
        }
        Message::ToolResult(result) => items.push(json!({
            "role": "tool", "tool_call_id": result.tool_call_id, "content": result.text(),
        })),
    }
}

/// The body without its `messages`, and the items before the context's (the system prompt).
pub(crate) fn openai_chat_frame(settings: &RequestSettings, tools: &[ToolDefinition]) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    if let Some(system) = &settings.system {
        before.push(json!({"role": "system", "content": system}));
    }
    let mut body = json!({
        "model": settings.model,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name, "description": tool.description, "parameters": tool.parameters}})
            })
            .collect();
    }
    if let Some(max_tokens) = settings.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    (body, before)
}
