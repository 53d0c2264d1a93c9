use headstart_core::{DeltaEvent, DoneReason, ModelErrorKind};
use serde_json::{json, Value};

use crate::sse::SseEvent;
use crate::{ConvertOptions, SealAt};

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

fn sealed_at(seal_at: SealAt) -> ConvertOptions {
    ConvertOptions {
        seal_at,
        ..ConvertOptions::default()
    }
}

fn error_message(events: &[DeltaEvent]) -> &str {
    match events.last() {
        Some(DeltaEvent::Error { message, .. }) => message,
        _ => panic!("the response did not end as error: {events:#?}"),
    }
}

fn calls_sealed(events: &[DeltaEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, DeltaEvent::ToolcallEnd { .. }))
        .count()
}

#[test]
fn by_default_a_call_is_sealed_by_the_fragment_that_completes_its_json_object() {
    let events = run(
        ConvertOptions::default(),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{\"x\": \"}"),
            call_args(0, "\"}"),
            call_args(0, " "),
            call_start(1, "b", "beta"),
            call_args(1, "{}\n"),
            finish("tool_calls"),
        ],
    );
    let completing = events
        .iter()
        .position(|e| matches!(e, DeltaEvent::ToolcallDelta { index: 0, delta } if delta == "\"}"))
        .unwrap();
    assert_eq!(seal_position(&events, 0), completing + 1, "{events:#?}");
    assert!(matches!(
        &events[completing + 1],
        DeltaEvent::ToolcallEnd { arguments: None, .. }
    ));
    let beta_args = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallDelta { index: 1, .. }));
    assert_eq!(seal_position(&events, 1), beta_args + 1);
    let finish_at = position_of(&events, |e| matches!(e, DeltaEvent::Done { .. }));
    assert!(seal_position(&events, 1) < finish_at);
    assert_eq!(calls_sealed(&events), 2);
}

#[test]
fn finish_seals_calls_only_at_finish_reason_even_when_their_json_is_complete() {
    let events = run(
        sealed_at(SealAt::Finish),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{}"),
            call_start(1, "b", "beta"),
            call_args(1, "{}"),
            finish("tool_calls"),
        ],
    );
    let beta_args = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallDelta { index: 1, .. }));
    assert!(seal_position(&events, 0) > beta_args, "{events:#?}");
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Done {
            stop_reason: DoneReason::ToolUse,
            ..
        })
    ));
}

#[test]
fn next_index_seals_call_n_when_call_n_plus_1_starts() {
    for rule in [SealAt::NextIndex, SealAt::Complete] {
        // Arguments that are not a complete object (none at all: `{}`) are sealed by the next call in both rules.
        let events = run(
            sealed_at(rule),
            &[
                call_start(0, "a", "alpha"),
                call_args(0, "{\"x\": 1"),
                call_start(1, "b", "beta"),
                call_start(2, "c", "gamma"),
                finish("tool_calls"),
            ],
        );
        let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
        let gamma_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 2, .. }));
        assert_eq!(seal_position(&events, 0) + 1, beta_start, "{rule}: {events:#?}");
        assert_eq!(seal_position(&events, 1) + 1, gamma_start, "{rule}");
        // The last call waits for finish_reason.
        assert!(seal_position(&events, 2) > gamma_start, "{rule}");
    }
    // next-index ignores a complete object.
    let events = run(
        sealed_at(SealAt::NextIndex),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{}"),
            call_start(1, "b", "beta"),
            finish("tool_calls"),
        ],
    );
    let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
    assert_eq!(seal_position(&events, 0) + 1, beta_start);
}

#[test]
fn a_late_fragment_for_a_sealed_call_ends_the_response_naming_what_the_server_did_and_the_opt_out() {
    let interleaved = [
        call_start(0, "a", "alpha"),
        call_args(0, "{\"x\": 1"),
        call_start(1, "b", "beta"),
        call_args(0, "}"),
        call_args(1, "{}"),
        finish("tool_calls"),
    ];
    for rule in [SealAt::NextIndex, SealAt::Complete] {
        let events = run(sealed_at(rule), &interleaved);
        let message = error_message(&events);
        assert!(message.contains("tool call index 0"), "{message}");
        assert!(message.contains("interleaves calls"), "{message}");
        assert!(message.contains("--seal-at finish"), "{message}");
        assert!(message.contains("seal=\"finish\""), "{message}");
        assert_eq!(
            calls_sealed(&events),
            1,
            "only the call sealed before the late fragment"
        );
    }
    // Sealed at finish_reason, the same stream is read whole.
    let events = run(sealed_at(SealAt::Finish), &interleaved);
    assert!(matches!(events.last(), Some(DeltaEvent::Done { .. })), "{events:#?}");
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            DeltaEvent::ToolcallDelta { index: 0, delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "{\"x\": 1}");

    let after_object = [
        call_start(0, "a", "alpha"),
        call_args(0, "{\"x\": 1}"),
        call_args(0, ", \"y\": 2}"),
        finish("tool_calls"),
    ];
    let events = run(ConvertOptions::default(), &after_object);
    let message = error_message(&events);
    assert!(message.contains("complete JSON object"), "{message}");
    assert!(message.contains("--seal-at finish"), "{message}");
    let events = run(sealed_at(SealAt::Finish), &after_object);
    assert!(matches!(events.last(), Some(DeltaEvent::Done { .. })));
}

#[test]
fn fragments_that_change_nothing_are_accepted_after_the_seal() {
    let events = run(
        ConvertOptions::default(),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{\"q\": \"tokio\"}"),
            call_args(0, ""),
            call_args(0, " \n"),
            // Some gateways repeat the id and name in every chunk.
            call_start(0, "a", "alpha"),
            finish("tool_calls"),
        ],
    );
    assert!(matches!(events.last(), Some(DeltaEvent::Done { .. })), "{events:#?}");
    assert_eq!(calls_sealed(&events), 1);
    // Whitespace inside an unfinished string is content: after a next-index seal it changes the arguments.
    let events = run(
        ConvertOptions::default(),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{\"q\": \"to"),
            call_start(1, "b", "beta"),
            call_args(0, " "),
            finish("tool_calls"),
        ],
    );
    assert!(error_message(&events).contains("tool call index 0"));
}

#[test]
fn arguments_that_arrive_before_the_name_seal_the_call_when_it_starts() {
    let events = run(
        ConvertOptions::default(),
        &[
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "alpha"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "more"}}]}),
            finish("tool_calls"),
        ],
    );
    let text = position_of(&events, |e| matches!(e, DeltaEvent::TextStart { .. }));
    assert!(seal_position(&events, 0) < text, "{events:#?}");
}

#[test]
fn seal_rules_have_names() {
    for rule in SealAt::ALL {
        assert_eq!(rule.as_str().parse::<SealAt>(), Ok(rule));
    }
    assert_eq!(SealAt::default(), SealAt::Complete);
    let error = "eager".parse::<SealAt>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown sealing rule \"eager\" (expected complete, next-index or finish)"
    );
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
    let events = run(sealed_at(SealAt::Finish), &chunks);
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
    let events = run(sealed_at(SealAt::Finish), &interleaved);
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
    let chunks = [call_start(0, "a", "alpha"), call_args(0, "{\"x\": ")];
    let events = run(ConvertOptions::default(), &chunks);
    assert!(matches!(events.last(), Some(DeltaEvent::Error { .. })));
    assert_eq!(calls_sealed(&events), 0, "an unfinished call is never sealed");
    // A call whose object was complete had been sealed before the stream broke off.
    let events = run(
        sealed_at(SealAt::Finish),
        &[call_start(0, "a", "alpha"), call_args(0, "{}")],
    );
    assert!(matches!(events.last(), Some(DeltaEvent::Error { .. })));
    assert_eq!(calls_sealed(&events), 0);
}

#[test]
fn length_never_cuts_off_a_call_whose_object_was_complete() {
    let events = run(
        ConvertOptions::default(),
        &[
            call_start(0, "a", "alpha"),
            call_args(0, "{}"),
            call_start(1, "b", "beta"),
            call_args(1, "{\"x\": 1}"),
            finish("length"),
        ],
    );
    for index in [0, 1] {
        assert!(
            matches!(
                &events[seal_position(&events, index)],
                DeltaEvent::ToolcallEnd { arguments: None, .. }
            ),
            "{events:#?}"
        );
    }
}
