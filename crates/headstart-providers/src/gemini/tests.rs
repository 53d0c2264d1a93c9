use headstart_core::{DeltaEvent, Usage};
use serde_json::{json, Value};

use crate::sse::SseEvent;

fn run(chunks: &[Value]) -> Vec<DeltaEvent> {
    let events: Vec<SseEvent> = chunks.iter().map(|c| SseEvent::message(c.to_string())).collect();
    crate::convert_events(crate::WireFormat::Gemini, &events, &Default::default())
        .into_iter()
        .map(|(_, e)| e)
        .collect()
}

#[test]
fn text_thoughts_signatures_and_calls() {
    let events = run(&[
        json!({"responseId": "r", "modelVersion": "g", "candidates": [{"content": {"parts": [{"text": "pondering", "thought": true}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "lo"}, {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "sig"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"id": "given", "name": "g"}}, {"text": "", "thoughtSignature": "last"}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 4, "candidatesTokenCount": 3, "thoughtsTokenCount": 2}}),
    ]);
    let mut acc = headstart_core::Accumulator::new();
    for event in events {
        acc.apply(event).unwrap();
    }
    let message = acc.snapshot();
    assert_eq!(
        serde_json::to_value(&message.content).unwrap(),
        json!([
            {"type": "thinking", "thinking": "pondering"},
            {"type": "text", "text": "Hello"},
            {"type": "thinking", "thinking": "", "signature": "sig"},
            {"type": "tool_call", "id": "gemini-call-r-0", "name": "f", "arguments": {"a": 1}},
            {"type": "tool_call", "id": "given", "name": "g", "arguments": {}},
            {"type": "thinking", "thinking": "", "signature": "last"},
        ])
    );
    assert_eq!(message.stop_reason, headstart_core::StopReason::ToolUse);
    assert_eq!(
        message.usage,
        Usage {
            input: 6,
            output: 5,
            cache_read: 4,
            cache_write: 0
        }
    );
}

#[test]
fn safety_stops_blocked_prompts_and_truncated_bodies_are_errors() {
    let events = run(&[json!({"candidates": [{"finishReason": "SAFETY"}]})]);
    assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("SAFETY")));
    let events = run(&[json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})]);
    assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("PROHIBITED")));
    let events = run(&[json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]})]);
    assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("finishReason")));
}
