use headstart_core::{DeltaEvent, Usage};
use serde_json::{json, Value};

use super::request::reasoning_item;
use crate::sse::SseEvent;

fn run(events: &[(&str, Value)]) -> Vec<DeltaEvent> {
    let events: Vec<SseEvent> = events
        .iter()
        .map(|(name, data)| {
            let mut data = data.clone();
            data["type"] = json!(name);
            SseEvent::named(*name, data.to_string())
        })
        .collect();
    crate::convert_events(crate::WireFormat::OpenAiResponses, &events, &Default::default())
        .into_iter()
        .map(|(_, e)| e)
        .collect()
}

#[test]
fn reasoning_and_text_blocks_with_signature_and_restated_arguments() {
    let events = run(&[
        (
            "response.created",
            json!({"response": {"id": "resp_1", "model": "gpt"}}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "summary_index": 0, "delta": "a"}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "summary_index": 1, "delta": "b"}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc"}}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 1, "item": {"type": "message"}}),
        ),
        (
            "response.content_part.added",
            json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
        ),
        (
            "response.output_text.delta",
            json!({"output_index": 1, "content_index": 0, "delta": "hi"}),
        ),
        (
            "response.output_text.done",
            json!({"output_index": 1, "content_index": 0}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 2, "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"output_index": 2, "delta": "{\"a\""}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 2, "item": {"type": "function_call", "call_id": "c1", "status": "completed", "arguments": "{\"a\": 1}"}}),
        ),
        (
            "response.completed",
            json!({"response": {"usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}}),
        ),
    ]);
    let mut acc = headstart_core::Accumulator::new();
    for event in events.clone() {
        acc.apply(event).unwrap();
    }
    let message = acc.snapshot();
    assert_eq!(
        serde_json::to_value(&message.content).unwrap(),
        json!([
            {"type": "thinking", "thinking": "a\n\nb", "signature": "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"encrypted_content\":\"enc\"}"},
            {"type": "text", "text": "hi"},
            {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
        ])
    );
    assert_eq!(message.stop_reason, headstart_core::StopReason::ToolUse);
    assert_eq!(
        message.usage,
        Usage {
            input: 6,
            output: 3,
            cache_read: 4,
            cache_write: 0
        }
    );
}

#[test]
fn failed_and_error_events_end_as_error() {
    let events = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.failed",
            json!({"response": {"error": {"code": "server_error", "message": "boom"}}}),
        ),
    ]);
    assert!(
        matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message == "the response failed: boom (server_error)")
    );
    let events = run(&[("error", json!({"code": "rate_limit_exceeded", "message": "slow down"}))]);
    assert_eq!(events[0].type_name(), "start");
    assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("slow down")));
}

#[test]
fn reasoning_signatures_become_reasoning_items_only_with_encrypted_content() {
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
fn an_async_call_item_is_kept_as_provider_async_and_not_made_early() {
    let item = json!({"id": "fc_1", "type": "function_call", "arguments": "", "async": true,
                      "call_id": "call_1", "name": "lookup"});
    let events = run(&[
        ("response.output_item.added", json!({"output_index": 0, "item": item})),
        (
            "response.function_call_arguments.delta",
            json!({"output_index": 0, "item_id": "fc_1", "delta": "{}"}),
        ),
        ("response.output_item.done", json!({"output_index": 0, "item": item})),
        ("response.completed", json!({"response": {"status": "completed"}})),
    ]);
    let start = events
        .iter()
        .find(|event| matches!(event, DeltaEvent::ToolcallStart { .. }))
        .expect("the call opens");
    assert!(
        matches!(
            start,
            DeltaEvent::ToolcallStart {
                early: false,
                provider_async: true,
                ..
            }
        ),
        "{start:?}"
    );
    // A call item without the marker stays an ordinary call.
    let plain = json!({"id": "fc_2", "type": "function_call", "arguments": "{}", "call_id": "call_2", "name": "x"});
    let events = run(&[("response.output_item.added", json!({"output_index": 0, "item": plain}))]);
    assert!(events.iter().any(|event| matches!(
        event,
        DeltaEvent::ToolcallStart {
            provider_async: false,
            ..
        }
    )));
}

#[test]
fn async_is_declared_only_for_provider_async_tools_and_only_when_the_settings_opt_in() {
    use headstart_core::{
        AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall, ToolDefinition,
    };

    use crate::request::{openai_responses_body, RequestSettings};

    let tool = |name: &str, provider_async: bool| ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
        provider_async,
    };
    let tools = [tool("lookup", true), tool("write", false)];
    let call = |id: &str, provider_async: bool| {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: ToolArguments::default(),
            provider_async,
        })
    };
    let context = [Message::Assistant(AssistantMessage {
        turn_id: "resp_1".into(),
        stop_reason: StopReason::ToolUse,
        content: vec![call("call_async", true), call("call_plain", false)],
        usage: Usage::default(),
        model: None,
        error_message: None,
    })];
    let declared = |settings: &RequestSettings| -> Vec<Option<bool>> {
        openai_responses_body(settings, &context, &tools)["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|tool| tool["async"].as_bool())
            .collect()
    };
    let off = RequestSettings::default();
    let on = RequestSettings {
        provider_async: true,
        ..RequestSettings::default()
    };
    assert_eq!(declared(&off), [None, None]);
    assert_eq!(declared(&on), [Some(true), None]);
    // A call item goes back as the model sent it, with or without the marker, whatever the settings.
    let input = openai_responses_body(&off, &context, &tools)["input"].clone();
    assert_eq!(input[0]["async"], json!(true), "{input}");
    assert!(input[1].get("async").is_none(), "{input}");
}
