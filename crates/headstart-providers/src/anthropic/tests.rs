use headstart_core::{DeltaEvent, DoneReason, ModelErrorKind, Usage};
use serde_json::{json, Value};

use crate::sse::SseEvent;

fn run(events: &[Value]) -> Vec<DeltaEvent> {
    let events: Vec<SseEvent> = events
        .iter()
        .map(|data| SseEvent::named(data["type"].as_str().unwrap(), data.to_string()))
        .collect();
    crate::convert_events(crate::WireFormat::Anthropic, &events, &Default::default())
        .into_iter()
        .map(|(_, e)| e)
        .collect()
}

#[test]
fn thinking_signature_skipped_blocks_and_start_input() {
    let events = run(&[
        json!({"type": "message_start", "message": {"id": "msg", "model": "claude", "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 2, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    let mut acc = headstart_core::Accumulator::new();
    for event in events {
        acc.apply(event).unwrap();
    }
    let message = acc.snapshot();
    assert_eq!(
        serde_json::to_value(&message.content).unwrap(),
        json!([
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "tool_call", "id": "t", "name": "f", "arguments": {"a": 1}},
        ])
    );
    assert_eq!(
        message.usage,
        Usage {
            input: 5,
            output: 9,
            cache_read: 7,
            cache_write: 2
        }
    );
}

#[test]
fn a_call_without_content_block_stop_is_sealed_invalid_and_errors_end_as_error() {
    let events = run(&[
        json!({"type": "message_start", "message": {"id": "msg"}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
        json!({"type": "message_stop"}),
    ]);
    assert!(matches!(
        &events[events.len() - 2],
        DeltaEvent::ToolcallEnd { arguments: Some(Value::String(raw)), .. } if raw == "{}"
    ));
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Done {
            stop_reason: DoneReason::Length,
            ..
        })
    ));
    let events = run(&[
        json!({"type": "message_start", "message": {"id": "msg"}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    assert!(
        matches!(events.last(), Some(DeltaEvent::Error { message, kind: Some(ModelErrorKind::Overloaded), .. }) if message == "provider error: Overloaded (overloaded_error)")
    );
}
