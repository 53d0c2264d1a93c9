//! Request bodies: the canonical model context (contract §7.3) and the tool definitions, in each wire format.
//!
//! The context is what `headstart_core::context::model_context` produces: user prompts, one merged assistant
//! message per response (followed by its tool results in call order), tool results. Notes per format:
//!
//! - Invalid tool call arguments (kept verbatim in the transcript) are sent back as their raw text where the
//!   format carries arguments as a string (OpenAI), and as `{}` where it needs an object (Anthropic, Gemini); the
//!   call's error result tells the model what was wrong.
//! - Thinking blocks are sent back only where the format needs them and they carry the provider's signature:
//!   Anthropic `thinking` blocks with a signature; Responses reasoning items whose signature (see
//!   [`crate::openai_responses`]) carries `encrypted_content` (so no reference to server-side state is made);
//!   Gemini thought signatures, attached to the part that follows them. Chat Completions never gets reasoning back.
//!   Signatures are provider-specific: a transcript started with one provider's thinking blocks cannot be continued
//!   with another provider.
//! - Empty assistant messages (an errored response with no content) are left out.

use headstart_core::{AssistantMessage, ContentBlock, Message, ToolArguments, ToolCall};
use serde_json::{json, Map, Value};

pub use headstart_core::ToolDefinition;

use crate::gemini::GENERATED_ID_PREFIX;
use crate::WireFormat;

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
}

/// The default Anthropic `max_tokens` when [`RequestSettings::max_tokens`] is `None`.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;

/// Builds the streaming request body for `format`.
pub fn build_body(
    format: WireFormat,
    settings: &RequestSettings,
    context: &[Message],
    tools: &[ToolDefinition],
) -> Value {
    let mut body = match format {
        WireFormat::OpenAiChat => openai_chat_body(settings, context, tools),
        WireFormat::OpenAiResponses => openai_responses_body(settings, context, tools),
        WireFormat::Anthropic => anthropic_body(settings, context, tools),
        WireFormat::Gemini => gemini_body(settings, context, tools),
    };
    if let Value::Object(fields) = &mut body {
        for (key, value) in &settings.extra {
            fields.insert(key.clone(), value.clone());
        }
    }
    body
}

/// The argument text of a call: the object's JSON, or the verbatim invalid text.
fn arguments_text(call: &ToolCall) -> String {
    match &call.arguments {
        ToolArguments::Valid(map) => Value::Object(map.clone()).to_string(),
        ToolArguments::Invalid { raw, .. } => raw.clone(),
    }
}

/// The arguments as an object (`{}` for invalid ones).
fn arguments_object(call: &ToolCall) -> Value {
    Value::Object(call.arguments.as_object().cloned().unwrap_or_default())
}

fn assistant_text(message: &AssistantMessage) -> String {
    headstart_core::model::joined_text(&message.content)
}

/// OpenAI Chat Completions: `messages` with `tool_calls` / `role: tool`, `stream_options.include_usage`.
pub fn openai_chat_body(settings: &RequestSettings, context: &[Message], tools: &[ToolDefinition]) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &settings.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in context {
        match message {
            Message::User(user) => messages.push(json!({"role": "user", "content": user.text})),
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
                    continue;
                }
                let mut entry = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
                if !calls.is_empty() {
                    entry["tool_calls"] = Value::Array(calls);
                }
                messages.push(entry);
            }
            Message::ToolResult(result) => messages.push(json!({
                "role": "tool", "tool_call_id": result.tool_call_id, "content": result.text(),
            })),
        }
    }
    let mut body = json!({
        "model": settings.model,
        "messages": messages,
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
    body
}

/// The reasoning item encoded in a Responses thinking signature, if it carries `encrypted_content`.
fn reasoning_item(thinking: &str, signature: Option<&str>) -> Option<Value> {
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
pub fn openai_responses_body(settings: &RequestSettings, context: &[Message], tools: &[ToolDefinition]) -> Value {
    let mut input = Vec::new();
    for message in context {
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
                                flush(&mut text_parts, &mut input);
                                input.push(item);
                            }
                        }
                        ContentBlock::ToolCall(call) => {
                            flush(&mut text_parts, &mut input);
                            input.push(json!({"type": "function_call", "call_id": call.id, "name": call.name,
                                              "arguments": arguments_text(call)}));
                        }
                    }
                }
                flush(&mut text_parts, &mut input);
            }
            Message::ToolResult(result) => input.push(json!({
                "type": "function_call_output", "call_id": result.tool_call_id, "output": result.text(),
            })),
        }
    }
    let mut body = json!({"model": settings.model, "input": input, "stream": true});
    if let Some(system) = &settings.system {
        body["instructions"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "name": tool.name, "description": tool.description,
                       "parameters": tool.parameters, "strict": false})
            })
            .collect();
    }
    if let Some(max_tokens) = settings.max_tokens {
        body["max_output_tokens"] = json!(max_tokens);
    }
    body
}

/// Anthropic Messages: content blocks; consecutive tool results share one user message.
pub fn anthropic_body(settings: &RequestSettings, context: &[Message], tools: &[ToolDefinition]) -> Value {
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

/// Gemini `generateContent`: `contents` with `functionCall` / `functionResponse` parts, thought signatures attached
/// to the part that followed them, tool schemas as `parametersJsonSchema`.
pub fn gemini_body(settings: &RequestSettings, context: &[Message], tools: &[ToolDefinition]) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use headstart_core::{StopReason, ToolResultMessage, Usage, UserMessage};

    fn call(id: &str, name: &str, args: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: ToolArguments::parse(args),
        })
    }

    fn context() -> Vec<Message> {
        let assistant = AssistantMessage {
            turn_id: "t".into(),
            stop_reason: StopReason::ToolUse,
            content: vec![
                ContentBlock::Thinking {
                    thinking: "plan".into(),
                    signature: Some("sig".into()),
                },
                ContentBlock::text("Let me look."),
                call("c1", "add", r#"{"x": 1}"#),
                call("c2", "add", r#"{"x": "#),
            ],
            usage: Usage::default(),
            model: None,
            error_message: None,
        };
        let result = |id: &str, text: &str, is_error: bool| {
            Message::ToolResult(ToolResultMessage {
                tool_call_id: id.into(),
                tool_name: "add".into(),
                content: vec![ContentBlock::text(text)],
                details: Value::Null,
                is_error,
                terminate: false,
            })
        };
        vec![
            Message::User(UserMessage::new("hi")),
            Message::Assistant(assistant),
            result("c1", "2", false),
            result("c2", "invalid arguments", true),
        ]
    }

    fn tools() -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "add".into(),
            description: "adds".into(),
            parameters: json!({"type": "object"}),
        }]
    }

    fn settings() -> RequestSettings {
        RequestSettings {
            model: "m".into(),
            system: Some("be brief".into()),
            max_tokens: Some(100),
            extra: Map::from_iter([("temperature".to_owned(), json!(0))]),
        }
    }

    #[test]
    fn chat_body() {
        let body = build_body(WireFormat::OpenAiChat, &settings(), &context(), &tools());
        assert_eq!(
            body,
            json!({
                "model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 100,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "Let me look.", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"x\":1}"}},
                        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{\"x\": "}},
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "2"},
                    {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments"},
                ],
                "tools": [{"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}],
            })
        );
    }

    #[test]
    fn responses_body() {
        let body = build_body(WireFormat::OpenAiResponses, &settings(), &context(), &tools());
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(body["max_output_tokens"], 100);
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": "hi"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
                {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"x\":1}"},
                {"type": "function_call", "call_id": "c2", "name": "add", "arguments": "{\"x\": "},
                {"type": "function_call_output", "call_id": "c1", "output": "2"},
                {"type": "function_call_output", "call_id": "c2", "output": "invalid arguments"},
            ])
        );
        assert_eq!(
            reasoning_item("s", Some(r#"{"type":"reasoning","id":"rs","encrypted_content":"e"}"#)),
            Some(
                json!({"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "e"})
            )
        );
        assert_eq!(
            reasoning_item("s", Some(r#"{"type":"reasoning","id":"rs","encrypted_content":null}"#)),
            None
        );
    }

    #[test]
    fn anthropic_body_groups_tool_results() {
        let body = build_body(WireFormat::Anthropic, &settings(), &context(), &tools());
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "c1", "name": "add", "input": {"x": 1}},
                    {"type": "tool_use", "id": "c2", "name": "add", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "2", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "invalid arguments", "is_error": true},
                ]},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "add", "description": "adds", "input_schema": {"type": "object"}}])
        );
    }

    #[test]
    fn gemini_body_attaches_signatures_and_omits_generated_ids() {
        let mut context = context();
        if let Message::Assistant(assistant) = &mut context[1] {
            assistant.content[2] = call("gemini-call-r-0", "add", r#"{"x": 1}"#);
        }
        if let Message::ToolResult(result) = &mut context[2] {
            result.tool_call_id = "gemini-call-r-0".into();
        }
        let body = build_body(WireFormat::Gemini, &settings(), &context, &tools());
        assert_eq!(
            body["contents"],
            json!([
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [
                    {"text": "Let me look.", "thoughtSignature": "sig"},
                    {"functionCall": {"name": "add", "args": {"x": 1}}},
                    {"functionCall": {"name": "add", "args": {}, "id": "c2"}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "add", "response": {"output": "2"}}},
                    {"functionResponse": {"name": "add", "response": {"error": "invalid arguments"}, "id": "c2"}},
                ]},
            ])
        );
        assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "be brief"}]}));
        assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 100}));
        assert_eq!(
            body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"],
            json!({"type": "object"})
        );
    }
}
