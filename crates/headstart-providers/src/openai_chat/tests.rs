use headstart_core::{DeltaEvent, DoneReason, ModelErrorKind};
use serde_json::{json, Value};

use crate::sse::SseEvent;
use crate::ConvertOptions;

fn run(options: ConvertOptions, chunks: &[Value]) -> Vec<DeltaEvent> {
    let mut events: Vec<SseEvent> = chunks.iter().map(|c| SseEvent::message(c.to_string())).collect();
    events.push(SseEvent::message("[DONE]"));
    crate::convert_events(crate::WireFormat::OpenAiChat, &events, &options)
        .into_iter()
        .map(|(_, event)| event)
        .collect()
}

fn call_start(index: u64, id: &str, name: &str) -> Value {
    json!({"id": "r", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
}

fn call_args(index: u64, args: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": args}}]}}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn seal_position(events: &[DeltaEvent], index: usize) -> usize {
    events
        .iter()
        .position(|e| matches!(e, DeltaEvent::ToolcallEnd { index: i, .. } if *i == index))
        .unwrap()
}

fn position_of(events: &[DeltaEvent], pred: impl Fn(&DeltaEvent) -> bool) -> usize {
    events.iter().position(pred).unwrap()
}

#[test]
fn by_default_calls_are_sealed_at_finish_reason_even_when_their_json_is_complete() {
    let events = run(
        ConvertOptions::default(),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{}"),
            call_start(1, "b", "beta"),
            call_args(1, "{}"),
            finish("tool_calls"),
        ],
    );
    let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
    assert!(seal_position(&events, 0) > beta_start, "{events:#?}");
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Done {
            stop_reason: DoneReason::ToolUse,
            ..
        })
    ));
}

#[test]
fn seal_on_next_index_seals_call_n_when_call_n_plus_1_starts() {
    let events = run(
        ConvertOptions {
            seal_on_next_index: true,
        },
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{\"x\": 1}"),
            call_start(1, "b", "beta"),
            call_args(1, "{}"),
            finish("tool_calls"),
        ],
    );
    let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
    let first_seal = seal_position(&events, 0);
    assert_eq!(first_seal + 1, beta_start, "{events:#?}");
    assert!(matches!(
        &events[first_seal],
        DeltaEvent::ToolcallEnd { arguments: None, .. }
    ));
    // The last call still waits for finish_reason.
    let beta_args = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallDelta { index: 1, .. }));
    assert!(seal_position(&events, 1) > beta_args);
}

#[test]
fn seal_on_next_index_turns_a_late_fragment_for_a_sealed_call_into_an_error() {
    let events = run(
        ConvertOptions {
            seal_on_next_index: true,
        },
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{\"x\": 1"),
            call_start(1, "b", "beta"),
            call_args(0, "}"),
            finish("tool_calls"),
        ],
    );
    let Some(DeltaEvent::Error { message, .. }) = events.last() else {
        panic!("{events:#?}")
    };
    assert!(message.contains("after the call was sealed"), "{message}");
}

#[test]
fn length_cuts_off_only_the_call_being_generated_unless_fragments_interleaved() {
    let chunks = [
        call_start(0, "a", "alpha"),
        call_args(0, "{}"),
        call_start(1, "b", "beta"),
        call_args(1, "{\"x\": 1}"),
        finish("length"),
    ];
    let events = run(ConvertOptions::default(), &chunks);
    assert!(matches!(
        &events[seal_position(&events, 0)],
        DeltaEvent::ToolcallEnd { arguments: None, .. }
    ));
    assert!(matches!(
        &events[seal_position(&events, 1)],
        DeltaEvent::ToolcallEnd { arguments: Some(Value::String(raw)), .. } if raw == "{\"x\": 1}"
    ));

    let interleaved = [
        call_start(0, "a", "alpha"),
        call_start(1, "b", "beta"),
        call_args(0, "{}"),
        call_args(1, "{}"),
        finish("length"),
    ];
    let events = run(ConvertOptions::default(), &interleaved);
    for index in [0, 1] {
        assert!(
            matches!(
                &events[seal_position(&events, index)],
                DeltaEvent::ToolcallEnd {
                    arguments: Some(Value::String(_)),
                    ..
                }
            ),
            "{events:#?}"
        );
    }
}

#[test]
fn a_reused_index_with_a_new_id_is_a_new_call_and_text_closes_before_calls() {
    let events = run(
        ConvertOptions::default(),
        &[
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "hi"}}]}),
            call_start(0, "a", "alpha"),
            call_start(0, "b", "beta"),
            finish("stop"),
        ],
    );
    let kinds: Vec<&str> = events.iter().map(DeltaEvent::type_name).collect();
    assert_eq!(
        kinds,
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_start",
            "toolcall_end",
            "toolcall_end",
            "done"
        ]
    );
    // `stop` with calls is reported as tool_use.
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Done {
            stop_reason: DoneReason::ToolUse,
            ..
        })
    ));
}

#[test]
fn content_filter_and_mid_stream_errors_end_as_error() {
    let events = run(
        ConvertOptions::default(),
        &[call_start(0, "a", "alpha"), finish("content_filter")],
    );
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Error {
            kind: Some(ModelErrorKind::Provider),
            ..
        })
    ));
    assert!(!events.iter().any(|e| matches!(e, DeltaEvent::ToolcallEnd { .. })));
    let events = run(
        ConvertOptions::default(),
        &[json!({"error": {"message": "overloaded", "code": 529}})],
    );
    let Some(DeltaEvent::Error { message, kind, .. }) = events.last() else {
        panic!()
    };
    assert_eq!(message, "provider error: overloaded (529)");
    assert_eq!(
        *kind,
        Some(ModelErrorKind::Overloaded),
        "from the code 529, not the text"
    );
    assert!(matches!(events[0], DeltaEvent::Start { .. }));
}

#[test]
fn done_without_finish_reason_is_an_error() {
    let events = run(
        ConvertOptions::default(),
        &[call_start(0, "a", "alpha"), call_args(0, "{}")],
    );
    assert!(matches!(events.last(), Some(DeltaEvent::Error { .. })));
    assert!(!events.iter().any(|e| matches!(e, DeltaEvent::ToolcallEnd { .. })));
}
