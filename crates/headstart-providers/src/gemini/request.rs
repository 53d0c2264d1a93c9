//! A Gemini `streamGenerateContent` request: its endpoint, headers, API key variable and body.

use headstart_core::{ContentBlock, Message, ToolDefinition};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use super::converter::GENERATED_ID_PREFIX;
use crate::request::settings::{arguments_object, RequestSettings};

/// The provider's public base URL.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The environment variable the API key is read from by default.
pub const API_KEY_ENV: &str = "GEMINI_API_KEY";

/// The streaming endpoint of `model` below `base` (no trailing slash).
pub(crate) fn endpoint(base: &str, model: &str) -> String {
    format!("{base}/models/{model}:streamGenerateContent?alt=sse")
}

/// The key as `x-goog-api-key`.
pub(crate) fn headers(request: RequestBuilder, key: Option<&str>) -> RequestBuilder {
    match key {
        Some(key) => request.header("x-goog-api-key", key),
        None => request,
    }
}

/// Gemini `generateContent`: `contents` with `functionCall` / `functionResponse` parts, thought signatures attached
/// to the part that followed them, tool schemas as `parametersJsonSchema`.
pub fn gemini_body<'a>(
    settings: &RequestSettings,
    context: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolDefinition],
) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    let mut last_is_results = false;
    for message in context {
        match message {
            Message::User(user) => {
                contents.push(json!({"role": "user", "parts": [{"text": user.text}]}));
                last_is_results = false;
            }
            Message::Assistant(assistant) => {
                let mut parts: Vec<Value> = Vec::new();
                let mut signature: Option<&str> = None;
                for block in &assistant.content {
                    let mut part = match block {
                        ContentBlock::Thinking { signature: Some(s), .. } => {
                            signature = Some(s);
                            continue;
                        }
                        ContentBlock::Thinking { .. } => continue,
                        ContentBlock::Text { text } if text.is_empty() => continue,
                        ContentBlock::Text { text } => json!({"text": text}),
                        ContentBlock::ToolCall(call) => {
                            let mut function_call = json!({"name": call.name, "args": arguments_object(call)});
                            if !call.id.starts_with(GENERATED_ID_PREFIX) {
                                function_call["id"] = json!(call.id);
                            }
                            json!({"functionCall": function_call})
                        }
                    };
                    if let Some(signature) = signature.take() {
                        part["thoughtSignature"] = json!(signature);
                    }
                    parts.push(part);
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
                last_is_results = false;
            }
            Message::ToolResult(result) => {
                let key = if result.is_error { "error" } else { "output" };
                let mut response = json!({"name": result.tool_name, "response": {key: result.text()}});
                if !result.tool_call_id.starts_with(GENERATED_ID_PREFIX) {
                    response["id"] = json!(result.tool_call_id);
                }
                let part = json!({"functionResponse": response});
                match contents.last_mut().and_then(|c| c["parts"].as_array_mut()) {
                    Some(parts) if last_is_results => parts.push(part),
                    _ => contents.push(json!({"role": "user", "parts": [part]})),
                }
                last_is_results = true;
            }
        }
    }
    let mut body = json!({"contents": contents});
    if let Some(system) = &settings.system {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !tools.is_empty() {
        let declarations: Vec<Value> = tools
            .iter()
            .map(|tool| {
                json!({"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.parameters})
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    if let Some(max_tokens) = settings.max_tokens {
        body["generationConfig"] = json!({"maxOutputTokens": max_tokens});
    }
    body
}
