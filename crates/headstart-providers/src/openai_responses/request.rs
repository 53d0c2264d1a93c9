//! An OpenAI Responses request: its endpoint and body. The base URL, the API key variable and the headers are
//! OpenAI's, shared with Chat Completions ([`crate::openai_chat`]).

use headstart_core::{ContentBlock, Message, ToolDefinition};
use serde_json::{json, Value};

use crate::request::settings::{arguments_text, RequestSettings};

/// The streaming endpoint below `base` (no trailing slash).
pub(crate) fn endpoint(base: &str) -> String {
    format!("{base}/responses")
}

/// The reasoning item encoded in a Responses thinking signature, if it carries `encrypted_content`.
pub(super) fn reasoning_item(thinking: &str, signature: Option<&str>) -> Option<Value> {
    let signature: Value = serde_json::from_str(signature?).ok()?;
    if signature.get("type")?.as_str()? != "reasoning" {
        return None;
    }
    let encrypted = signature.get("encrypted_content").filter(|v| v.is_string())?;
    let summary = if thinking.is_empty() {
        json!([])
    } else {
        json!([{"type": "summary_text", "text": thinking}])
    };
    let mut item = json!({"type": "reasoning", "summary": summary, "encrypted_content": encrypted});
    if let Some(id) = signature.get("id").filter(|v| v.is_string()) {
        item["id"] = id.clone();
    }
    Some(item)
}

/// OpenAI Responses: `input` items (messages, reasoning, `function_call`, `function_call_output`).
pub fn openai_responses_body<'a>(
    settings: &RequestSettings,
    context: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolDefinition],
) -> Value {
    let mut body = openai_responses_frame(settings, tools);
    let mut input = Vec::new();
    for message in context {
        openai_responses_items(message, &mut input);
    }
    body["input"] = Value::Array(input);
    body
}

/// The `input` items of one context message: each message's items depend on that message alone, so a body can be
/// assembled from items kept from the request before.
pub(crate) fn openai_responses_items(message: &Message, input: &mut Vec<Value>) {
    match message {
        Message::User(user) => input.push(json!({"role": "user", "content": user.text})),
        Message::Assistant(assistant) => {
            let mut text_parts: Vec<Value> = Vec::new();
            let flush = |parts: &mut Vec<Value>, input: &mut Vec<Value>| {
                if !parts.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": std::mem::take(parts)}));
                }
            };
            for block in &assistant.content {
                match block {
                    ContentBlock::Text { text } if !text.is_empty() => {
                        text_parts.push(json!({"type": "output_text", "text": text}));
                    }
                    ContentBlock::Text { .. } => {}
                    ContentBlock::Thinking { thinking, signature } => {
                        if let Some(item) = reasoning_item(thinking, signature.as_deref()) {
                            flush(&mut text_parts, input);
                            input.push(item);
                        }
                    }
                    ContentBlock::ToolCall(call) => {
                        flush(&mut text_parts, input);
                        let mut item = json!({"type": "function_call", "call_id": call.id, "name": call.name,
                                              "arguments": arguments_text(call)});
                        // As the model emitted it: an async call's item carries the marker back.
                        if call.provider_async {
                            item["async"] = json!(true);
                        }
                        input.push(item);
                    }
                }
            }
            flush(&mut text_parts, input);
        }
        Message::ToolResult(result) => input.push(json!({
            "type": "function_call_output", "call_id": result.tool_call_id, "output": result.text(),
        })),
    }
}

/// The body without its `input`.
pub(crate) fn openai_responses_frame(settings: &RequestSettings, tools: &[ToolDefinition]) -> Value {
    let mut body = json!({"model": settings.model, "stream": true});
    if let Some(system) = &settings.system {
        body["instructions"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| {
                let mut definition = json!({"type": "function", "name": tool.name, "description": tool.description,
                                            "parameters": tool.parameters, "strict": false});
                if settings.provider_async && tool.provider_async {
                    definition["async"] = json!(true);
                }
                definition
            })
            .collect();
    }
    if let Some(max_tokens) = settings.max_tokens {
        body["max_output_tokens"] = json!(max_tokens);
    }
    body
}
