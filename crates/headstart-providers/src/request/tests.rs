use headstart_core::{
    AssistantMessage, ContentBlock, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage, UserMessage,
};
use serde_json::{json, Map};

use super::*;

fn call(id: &str, name: &str, args: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: ToolArguments::parse(args),
        provider_async: false,
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
            ready_during: None,
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
        provider_async: false,
    }]
}

fn settings() -> RequestSettings {
    RequestSettings {
        model: "m".into(),
        system: Some("be brief".into()),
        max_tokens: Some(100),
        extra: Map::from_iter([("temperature".to_owned(), json!(0))]),
        provider_async: false,
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
