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
