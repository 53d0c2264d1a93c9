//! Unit and property tests of the accumulator (contract §2).
//!
//! The linear-time check lives in `tests/linear_time.rs`, where a counting global allocator can be installed.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Map, Value};

use super::*;
use crate::delta::DoneReason;

// ---------------------------------------------------------------------------------------------------------------
// Event builders and helpers
// ---------------------------------------------------------------------------------------------------------------

fn start() -> DeltaEvent {
    DeltaEvent::Start {
        model: None,
        response_id: None,
    }
}

fn text_start(index: usize) -> DeltaEvent {
    DeltaEvent::TextStart { index }
}

fn text_delta(index: usize, delta: &str) -> DeltaEvent {
    DeltaEvent::TextDelta {
        index,
        delta: delta.to_owned(),
    }
}

fn text_end(index: usize) -> DeltaEvent {
    DeltaEvent::TextEnd { index }
}

fn thinking_start(index: usize) -> DeltaEvent {
    DeltaEvent::ThinkingStart { index }
}

fn thinking_delta(index: usize, delta: &str) -> DeltaEvent {
    DeltaEvent::ThinkingDelta {
        index,
        delta: delta.to_owned(),
    }
}

fn thinking_end(index: usize, signature: Option<&str>) -> DeltaEvent {
    DeltaEvent::ThinkingEnd {
        index,
        signature: signature.map(str::to_owned),
    }
}

fn call_start(index: usize, id: &str, name: &str) -> DeltaEvent {
    DeltaEvent::ToolcallStart {
        index,
        id: id.to_owned(),
        name: name.to_owned(),
        early: false,
        provider_async: false,
    }
}

fn async_call_start(index: usize, id: &str, name: &str) -> DeltaEvent {
    DeltaEvent::ToolcallStart {
        index,
        id: id.to_owned(),
        name: name.to_owned(),
        early: true,
        provider_async: false,
    }
}

fn call_delta(index: usize, delta: &str) -> DeltaEvent {
    DeltaEvent::ToolcallDelta {
        index,
        delta: delta.to_owned(),
    }
}

fn call_end(index: usize) -> DeltaEvent {
    DeltaEvent::ToolcallEnd { index, arguments: None }
}

fn call_end_with(index: usize, arguments: Value) -> DeltaEvent {
    DeltaEvent::ToolcallEnd {
        index,
        arguments: Some(arguments),
    }
}

fn done(stop_reason: DoneReason) -> DeltaEvent {
    DeltaEvent::Done {
        stop_reason,
        usage: Usage::default(),
    }
}

fn error(stop_reason: ErrorReason, message: &str) -> DeltaEvent {
    DeltaEvent::Error {
        stop_reason,
        message: message.to_owned(),
        usage: None,
        kind: None,
    }
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// One event of every type, each addressed to `index` where it has one.
fn one_of_each(index: usize) -> Vec<DeltaEvent> {
    vec![
        start(),
        text_start(index),
        text_delta(index, "t"),
        text_end(index),
        thinking_start(index),
        thinking_delta(index, "r"),
        thinking_end(index, Some("sig")),
        call_start(index, "fresh", "tool"),
        call_delta(index, "{}"),
        call_end(index),
        call_end_with(index, json!({})),
        done(DoneReason::Stop),
        error(ErrorReason::Error, "boom"),
    ]
}

/// Applies `events`, panicking with the event's position if one is rejected.
fn feed_into(acc: &mut Accumulator, events: impl IntoIterator<Item = DeltaEvent>) {
    for event in events {
        let shown = format!("{event:?}");
        if let Err(err) = acc.apply(event) {
            panic!("{shown} was rejected: {err}");
        }
    }
}

fn feed(events: impl IntoIterator<Item = DeltaEvent>) -> Accumulator {
    let mut acc = Accumulator::new();
    feed_into(&mut acc, events);
    acc
}

/// Everything observable about an accumulator, to show that a rejected event changed nothing.
#[derive(Debug, PartialEq)]
struct State {
    position: usize,
    started: bool,
    len: usize,
    snapshot: AssistantMessage,
    ending: Option<Ending>,
    // Internals: the test module is a child of the accumulator module, so it can see them.
    phase: Phase,
    blocks: String,
    open: Vec<usize>,
    ids: Vec<String>,
    received: usize,
}

impl State {
    fn of(acc: &Accumulator) -> State {
        let mut ids: Vec<String> = acc.ids.iter().cloned().collect();
        ids.sort();
        State {
            position: acc.position(),
            started: acc.started(),
            len: acc.len(),
            snapshot: acc.snapshot(),
            ending: acc.ending().cloned(),
            phase: acc.phase,
            blocks: format!("{:?}", acc.blocks),
            open: acc.open.iter().copied().collect(),
            ids,
            received: acc.received,
        }
    }
}

/// Feeds `prefix` (all accepted), applies `bad`, and checks that it is rejected without changing anything.
fn reject(prefix: &[DeltaEvent], bad: DeltaEvent) -> AccumulatorError {
    let mut acc = feed(prefix.iter().cloned());
    let before = State::of(&acc);
    let snapshot = acc.snapshot();
    let position = acc.position();
    let Err(err) = acc.apply(bad.clone()) else {
        panic!("{bad:?} should be rejected")
    };
    assert_eq!(acc.snapshot(), snapshot, "snapshot changed by rejected {bad:?}");
    assert_eq!(acc.position(), position, "position changed by rejected {bad:?}");
    assert_eq!(State::of(&acc), before, "state changed by rejected {bad:?}");
    err
}

fn violation(position: usize, event: &'static str, violation: Violation) -> AccumulatorError {
    AccumulatorError {
        position,
        event,
        violation,
    }
}

fn object(value: Value) -> ToolArguments {
    match value {
        Value::Object(map) => ToolArguments::Valid(map),
        other => panic!("not an object: {other}"),
    }
}

fn invalid_raw(arguments: &ToolArguments) -> &str {
    match arguments {
        ToolArguments::Invalid { raw, .. } => raw,
        ToolArguments::Valid(map) => panic!("expected invalid arguments, got {map:?}"),
    }
}

/// The arguments of the single tool call at index 0 after `deltas` and `end`.
fn sealed_arguments(deltas: &[&str], end: DeltaEvent) -> ToolArguments {
    let mut events = vec![start(), call_start(0, "c1", "tool")];
    events.extend(deltas.iter().map(|d| call_delta(0, d)));
    events.push(end);
    events.push(done(DoneReason::ToolUse));
    let acc = feed(events);
    let message = acc.snapshot();
    let call = message.tool_calls().next().expect("one tool call").clone();
    assert_eq!(
        acc.tool_call(0).as_ref(),
        Some(&call),
        "tool_call() disagrees with snapshot()"
    );
    call.arguments
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Every contract §2 violation, with its exact variant, position and event name
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn any_event_before_start_is_rejected_at_position_zero() {
    for bad in one_of_each(0).into_iter().skip(1) {
        let name = bad.type_name();
        assert_eq!(reject(&[], bad), violation(0, name, Violation::BeforeStart));
    }
}

#[test]
fn a_second_start_is_rejected() {
    let prefix = [start(), text_start(0), text_delta(0, "hi")];
    assert_eq!(reject(&prefix, start()), violation(3, "start", Violation::SecondStart));
    let named = DeltaEvent::Start {
        model: Some("other".into()),
        response_id: Some("r2".into()),
    };
    assert_eq!(reject(&[start()], named), violation(1, "start", Violation::SecondStart));
}

#[test]
fn delta_or_end_for_a_never_opened_index_is_rejected() {
    let prefix = [start(), text_start(0), text_delta(0, "a")];
    let cases = [
        (text_delta(1, "x"), "text_delta", 1),
        (text_end(1), "text_end", 1),
        (thinking_delta(7, "x"), "thinking_delta", 7),
        (thinking_end(2, None), "thinking_end", 2),
        (call_delta(1, "{"), "toolcall_delta", 1),
        (call_end(3), "toolcall_end", 3),
        (call_end_with(1, json!({})), "toolcall_end", 1),
    ];
    for (bad, name, index) in cases {
        assert_eq!(reject(&prefix, bad), violation(3, name, Violation::NotOpen { index }));
    }
    // Nothing opened at all yet.
    assert_eq!(
        reject(&[start()], text_delta(0, "x")),
        violation(1, "text_delta", Violation::NotOpen { index: 0 })
    );
}

#[test]
fn delta_or_end_for_an_already_closed_index_is_rejected() {
    let prefix = [
        start(),
        text_start(0),
        text_delta(0, "a"),
        text_end(0),
        thinking_start(1),
        thinking_end(1, None),
        call_start(2, "c1", "tool"),
        call_delta(2, "{}"),
        call_end(2),
        text_start(3),
    ];
    let cases = [
        (text_delta(0, "x"), "text_delta", 0),
        (text_end(0), "text_end", 0),
        (thinking_delta(1, "x"), "thinking_delta", 1),
        (thinking_end(1, Some("s")), "thinking_end", 1),
        (call_delta(2, "x"), "toolcall_delta", 2),
        (call_end(2), "toolcall_end", 2),
        (call_end_with(2, json!({"a": 1})), "toolcall_end", 2),
    ];
    for (bad, name, index) in cases {
        assert_eq!(reject(&prefix, bad), violation(10, name, Violation::NotOpen { index }));
    }
}

#[test]
fn delta_or_end_of_another_kind_is_rejected() {
    // 0: text, 1: thinking, 2: tool call — all open.
    let prefix = [start(), text_start(0), thinking_start(1), call_start(2, "c1", "tool")];
    let wrong = |index, expected, found| Violation::WrongKind { index, expected, found };
    let cases = [
        (
            text_delta(2, "x"),
            "text_delta",
            wrong(2, BlockKind::Text, BlockKind::ToolCall),
        ),
        (
            call_end(0),
            "toolcall_end",
            wrong(0, BlockKind::ToolCall, BlockKind::Text),
        ),
        (
            thinking_end(0, Some("s")),
            "thinking_end",
            wrong(0, BlockKind::Thinking, BlockKind::Text),
        ),
        (
            thinking_delta(2, "x"),
            "thinking_delta",
            wrong(2, BlockKind::Thinking, BlockKind::ToolCall),
        ),
        (
            call_delta(1, "{"),
            "toolcall_delta",
            wrong(1, BlockKind::ToolCall, BlockKind::Thinking),
        ),
        (text_end(1), "text_end", wrong(1, BlockKind::Text, BlockKind::Thinking)),
        (
            call_end_with(1, json!({})),
            "toolcall_end",
            wrong(1, BlockKind::ToolCall, BlockKind::Thinking),
        ),
        (
            text_delta(1, "x"),
            "text_delta",
            wrong(1, BlockKind::Text, BlockKind::Thinking),
        ),
    ];
    for (bad, name, expected) in cases {
        assert_eq!(reject(&prefix, bad), violation(4, name, expected));
    }
}

#[test]
fn block_start_at_a_gap_index_is_rejected() {
    assert_eq!(
        reject(&[start()], text_start(1)),
        violation(1, "text_start", Violation::NotNextIndex { index: 1, expected: 0 })
    );
    let prefix = [start(), text_start(0), text_end(0)];
    let cases = [
        (text_start(2), "text_start", 2),
        (thinking_start(5), "thinking_start", 5),
        (call_start(2, "c1", "tool"), "toolcall_start", 2),
    ];
    for (bad, name, index) in cases {
        assert_eq!(
            reject(&prefix, bad),
            violation(3, name, Violation::NotNextIndex { index, expected: 1 })
        );
    }
}

#[test]
fn block_start_at_a_reused_index_is_rejected() {
    // Reusing a closed index.
    let closed = [
        start(),
        text_start(0),
        text_end(0),
        call_start(1, "c1", "t"),
        call_end(1),
    ];
    let cases = [
        (text_start(0), "text_start", 0),
        (thinking_start(1), "thinking_start", 1),
        (call_start(0, "c2", "t"), "toolcall_start", 0),
    ];
    for (bad, name, index) in cases {
        assert_eq!(
            reject(&closed, bad),
            violation(5, name, Violation::NotNextIndex { index, expected: 2 })
        );
    }
    // Reusing a still-open index.
    let open = [start(), thinking_start(0)];
    assert_eq!(
        reject(&open, thinking_start(0)),
        violation(2, "thinking_start", Violation::NotNextIndex { index: 0, expected: 1 })
    );
    assert_eq!(
        reject(&open, call_start(0, "c1", "t")),
        violation(2, "toolcall_start", Violation::NotNextIndex { index: 0, expected: 1 })
    );
}

#[test]
fn a_duplicate_tool_call_id_is_rejected() {
    // The first call with that id is closed.
    let prefix = [
        start(),
        call_start(0, "c1", "a"),
        call_end(0),
        text_start(1),
        text_end(1),
    ];
    assert_eq!(
        reject(&prefix, call_start(2, "c1", "b")),
        violation(5, "toolcall_start", Violation::DuplicateId { id: "c1".into() })
    );
    // The first call with that id is still open.
    let prefix = [start(), call_start(0, "c1", "a"), call_start(1, "c2", "a")];
    assert_eq!(
        reject(&prefix, async_call_start(2, "c2", "b")),
        violation(3, "toolcall_start", Violation::DuplicateId { id: "c2".into() })
    );
}

#[test]
fn a_rejected_call_start_does_not_claim_its_id() {
    let mut acc = feed([start()]);
    let err = acc.apply(call_start(3, "c1", "t")).unwrap_err();
    assert_eq!(err.violation, Violation::NotNextIndex { index: 3, expected: 0 });
    assert_eq!(acc.apply(call_start(0, "c1", "t")), Ok(Applied::Opened(0)));
}

#[test]
fn done_with_open_blocks_is_rejected_listing_them() {
    let prefix = [
        start(),
        text_start(0),
        call_start(1, "c1", "t"),
        thinking_start(2),
        text_start(3),
        text_end(0),
        text_end(3),
    ];
    assert_eq!(
        reject(&prefix, done(DoneReason::ToolUse)),
        violation(7, "done", Violation::DoneWithOpenBlocks { open: vec![1, 2] })
    );
    assert_eq!(
        reject(&[start(), text_start(0)], done(DoneReason::Stop)),
        violation(2, "done", Violation::DoneWithOpenBlocks { open: vec![0] })
    );
}

#[test]
fn any_event_after_done_is_rejected() {
    let prefix = [start(), text_start(0), text_end(0), done(DoneReason::Stop)];
    // Addressed both to the closed block and to what would be the next index.
    for index in [0, 1] {
        for bad in one_of_each(index) {
            let name = bad.type_name();
            assert_eq!(reject(&prefix, bad), violation(4, name, Violation::AfterEnd));
        }
    }
}

#[test]
fn any_event_after_error_is_rejected() {
    // An error may end the response with blocks still open.
    let prefix = [start(), text_start(0), error(ErrorReason::Aborted, "stop")];
    for index in [0, 1] {
        for bad in one_of_each(index) {
            let name = bad.type_name();
            assert_eq!(reject(&prefix, bad), violation(3, name, Violation::AfterEnd));
        }
    }
    for bad in one_of_each(0) {
        let name = bad.type_name();
        assert_eq!(
            reject(&[start(), error(ErrorReason::Error, "x")], bad),
            violation(2, name, Violation::AfterEnd)
        );
    }
}

#[test]
fn a_rejected_event_changes_nothing_and_the_next_event_takes_its_position() {
    let prefix = vec![
        DeltaEvent::Start {
            model: Some("m".into()),
            response_id: Some("r".into()),
        },
        text_start(0),
        text_delta(0, "hello"),
        thinking_start(1),
        thinking_delta(1, "hmm"),
        call_start(2, "c1", "tool"),
        call_delta(2, "{\"a\":"),
        call_start(3, "c2", "tool"),
        call_end(3),
    ];
    let bad_events = vec![
        start(),
        text_start(0),
        text_start(9),
        text_delta(3, "x"),
        text_delta(2, "x"),
        text_end(1),
        thinking_delta(0, "x"),
        thinking_end(2, Some("sig")),
        call_start(4, "c1", "tool"),
        call_start(9, "c9", "tool"),
        call_delta(0, "1}"),
        call_delta(3, "1}"),
        call_end(1),
        call_end_with(3, json!({"z": 1})),
        done(DoneReason::Stop),
    ];
    let mut acc = feed(prefix.clone());
    let before = State::of(&acc);
    for bad in bad_events {
        let Err(err) = acc.apply(bad.clone()) else {
            panic!("{bad:?} should be rejected")
        };
        assert_eq!(err.position, prefix.len(), "{bad:?}");
        assert_eq!(err.event, bad.type_name());
        assert_eq!(acc.snapshot(), before.snapshot, "{bad:?}");
        assert_eq!(acc.position(), before.position, "{bad:?}");
        assert_eq!(State::of(&acc), before, "{bad:?}");
    }
    // The stream can still go on, and the next accepted event takes the rejected events' position.
    assert_eq!(acc.apply(call_delta(2, "1}")), Ok(Applied::Appended(2)));
    assert_eq!(acc.position(), prefix.len() + 1);
    let err = acc.apply(done(DoneReason::Stop)).unwrap_err();
    assert_eq!(err.position, prefix.len() + 1);

    // After an end, too.
    let mut ended = feed([start(), done(DoneReason::Length)]);
    let before = State::of(&ended);
    assert!(ended.apply(text_start(0)).is_err());
    assert!(ended.apply(error(ErrorReason::Error, "late")).is_err());
    assert_eq!(State::of(&ended), before);
    assert_eq!(ended.ending().unwrap().stop_reason, StopReason::Length);
}

#[test]
fn errors_display_the_position_and_event() {
    let err = reject(&[start(), text_start(0)], done(DoneReason::Stop));
    assert_eq!(
        err.to_string(),
        "protocol violation at event 2 (done): done while blocks [0] are still open"
    );
    let err = reject(&[start()], call_end(4));
    assert_eq!(
        err.to_string(),
        "protocol violation at event 1 (toolcall_end): index 4 is not open"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Interleaved open blocks
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn interleaved_open_blocks_are_legal_and_accumulate_separately() {
    let mut acc = Accumulator::new();
    let steps = [
        (start(), Applied::Started),
        (call_start(0, "a", "read"), Applied::Opened(0)),
        (text_start(1), Applied::Opened(1)),
        (async_call_start(2, "b", "write"), Applied::Opened(2)),
        (call_delta(0, "{\"pa"), Applied::Appended(0)),
        (text_delta(1, "Hel"), Applied::Appended(1)),
        (call_delta(2, "{\"x\":"), Applied::Appended(2)),
        (call_delta(0, "th\":\"/a\"}"), Applied::Appended(0)),
        (text_delta(1, "lo"), Applied::Appended(1)),
        (call_delta(2, " [1, 2]}"), Applied::Appended(2)),
        (text_end(1), Applied::Closed(1)),
        (call_end(2), Applied::Sealed(2)),
    ];
    for (i, (event, expected)) in steps.into_iter().enumerate() {
        assert_eq!(acc.apply(event), Ok(expected), "step {i}");
    }
    // Block 0 is still open; 1 and 2 are closed.
    assert!(acc.is_open(0) && !acc.is_open(1) && !acc.is_open(2));
    assert_eq!(acc.tool_call(2).unwrap().arguments, object(json!({"x": [1, 2]})));
    // Mid-stream, the still-open call parses strictly as a sealed one would.
    assert_eq!(acc.tool_call(0).unwrap().arguments, object(json!({"path": "/a"})));
    assert_eq!(
        acc.apply(text_delta(0, "no")).unwrap_err().violation,
        Violation::WrongKind {
            index: 0,
            expected: BlockKind::Text,
            found: BlockKind::ToolCall
        }
    );
    assert_eq!(acc.apply(call_end(0)), Ok(Applied::Sealed(0)));
    assert_eq!(acc.apply(done(DoneReason::ToolUse)), Ok(Applied::Ended));

    let message = acc.snapshot();
    assert_eq!(
        message.content,
        vec![
            ContentBlock::ToolCall(ToolCall {
                id: "a".into(),
                name: "read".into(),
                arguments: object(json!({"path": "/a"})),
                provider_async: false,
            }),
            ContentBlock::text("Hello"),
            ContentBlock::ToolCall(ToolCall {
                id: "b".into(),
                name: "write".into(),
                arguments: object(json!({"x": [1, 2]})),
                provider_async: false,
            }),
        ]
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(acc.position(), 14, "the rejected event is not counted");
}

#[test]
fn interleaved_text_and_thinking_blocks() {
    let acc = feed([
        start(),
        thinking_start(0),
        text_start(1),
        thinking_start(2),
        text_delta(1, "a"),
        thinking_delta(2, "z"),
        thinking_delta(0, "x"),
        text_delta(1, "b"),
        thinking_delta(0, "y"),
        thinking_end(2, Some("s2")),
        text_end(1),
        thinking_end(0, None),
        done(DoneReason::Stop),
    ]);
    assert_eq!(
        acc.snapshot().content,
        vec![
            ContentBlock::Thinking {
                thinking: "xy".into(),
                signature: None
            },
            ContentBlock::text("ab"),
            ContentBlock::Thinking {
                thinking: "z".into(),
                signature: Some("s2".into())
            },
        ]
    );
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Arguments, metadata and accessors
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn no_argument_text_is_an_empty_object() {
    assert_eq!(sealed_arguments(&[], call_end(0)), ToolArguments::Valid(Map::new()));
}

#[test]
fn only_empty_argument_deltas_are_an_empty_object() {
    assert_eq!(
        sealed_arguments(&["", "", ""], call_end(0)),
        ToolArguments::Valid(Map::new())
    );
}

#[test]
fn argument_deltas_are_concatenated_and_parsed_at_the_end() {
    assert_eq!(
        sealed_arguments(&["{\"q\"", ": \"ru", "", "st\", \"n\": 3}"], call_end(0)),
        object(json!({"q": "rust", "n": 3}))
    );
}

#[test]
fn non_object_json_arguments_are_invalid_with_verbatim_text() {
    for (deltas, raw) in [
        (&["[1", "]"][..], "[1]"),
        (&["\"x\""][..], "\"x\""),
        (&["3"][..], "3"),
        (&[" [1, ", " 2] "][..], " [1,  2] "),
        (&["null"][..], "null"),
        (&["tr", "ue"][..], "true"),
    ] {
        let arguments = sealed_arguments(deltas, call_end(0));
        assert_eq!(
            arguments,
            ToolArguments::Invalid {
                raw: raw.into(),
                error: "arguments must be a JSON object".into()
            },
            "{raw}"
        );
    }
}

#[test]
fn partial_json_arguments_are_invalid_and_never_repaired() {
    for deltas in [
        &["{\"path\": \"/tm"][..],
        &["{\"a\":", " 1"][..],
        &["{\"a\": 1}", "{"][..],
        &["{\"a\": 1,}"][..],
        &["{", "\"a\""][..],
        &["not json"][..],
    ] {
        let raw = deltas.concat();
        let arguments = sealed_arguments(deltas, call_end(0));
        assert_eq!(invalid_raw(&arguments), raw);
        let ToolArguments::Invalid { error, .. } = &arguments else {
            unreachable!()
        };
        assert!(!error.is_empty());
        assert_ne!(
            error, "arguments must be a JSON object",
            "{raw} is not valid JSON at all"
        );
    }
}

#[test]
fn an_end_override_replaces_the_accumulated_text() {
    // A valid accumulated text is replaced.
    assert_eq!(
        sealed_arguments(&["{\"a\": 1}"], call_end_with(0, json!({"b": 2}))),
        object(json!({"b": 2}))
    );
    // An invalid (partial) accumulated text is replaced too.
    assert_eq!(
        sealed_arguments(&["{\"a\": "], call_end_with(0, json!({"b": [true]}))),
        object(json!({"b": [true]}))
    );
    // With no deltas at all.
    assert_eq!(
        sealed_arguments(&[], call_end_with(0, json!({}))),
        ToolArguments::Valid(Map::new())
    );
    // A non-object override makes the call invalid, whatever was accumulated; its own text is kept.
    for (override_value, raw) in [(json!([1, 2]), "[1,2]"), (json!("x"), "\"x\""), (json!(3), "3")] {
        assert_eq!(
            sealed_arguments(&["{\"a\": 1}"], call_end_with(0, override_value)),
            ToolArguments::Invalid {
                raw: raw.into(),
                error: "arguments must be a JSON object".into()
            }
        );
    }
}

#[test]
fn thinking_signature_is_kept() {
    let acc = feed([
        start(),
        thinking_start(0),
        thinking_delta(0, "step "),
        thinking_delta(0, "one"),
        thinking_end(0, Some("opaque-sig==")),
        thinking_start(1),
        thinking_end(1, None),
        done(DoneReason::Stop),
    ]);
    assert_eq!(
        acc.snapshot().content,
        vec![
            ContentBlock::Thinking {
                thinking: "step one".into(),
                signature: Some("opaque-sig==".into())
            },
            ContentBlock::Thinking {
                thinking: String::new(),
                signature: None
            },
        ]
    );
}

#[test]
fn start_exposes_model_and_response_id() {
    let mut acc = Accumulator::new();
    assert_eq!((acc.model(), acc.response_id()), (None, None));
    acc.apply(DeltaEvent::Start {
        model: Some("model-x".into()),
        response_id: Some("resp_1".into()),
    })
    .unwrap();
    assert_eq!(acc.model(), Some("model-x"));
    assert_eq!(acc.response_id(), Some("resp_1"));
    assert_eq!(acc.snapshot().model.as_deref(), Some("model-x"));

    let acc = feed([start()]);
    assert_eq!((acc.model(), acc.response_id()), (None, None));
    assert_eq!(acc.snapshot().model, None);
}

#[test]
fn call_flagged_async_and_call_name() {
    let acc = feed([
        start(),
        async_call_start(0, "a", "fetch"),
        text_start(1),
        call_start(2, "b", "write_file"),
        thinking_start(3),
    ]);
    assert_eq!(acc.call_flagged_async(0), Some(true));
    assert_eq!(acc.call_flagged_async(2), Some(false));
    assert_eq!(acc.call_flagged_async(1), None);
    assert_eq!(acc.call_flagged_async(3), None);
    assert_eq!(acc.call_flagged_async(4), None);
    assert_eq!(acc.call_name(0), Some("fetch"));
    assert_eq!(acc.call_name(2), Some("write_file"));
    assert_eq!(acc.call_name(1), None);
    assert_eq!(acc.call_name(3), None);
    assert_eq!(acc.call_name(99), None);
}

#[test]
fn tool_call_returns_sealed_and_unsealed_calls() {
    let mut acc = feed([start(), text_start(0), call_start(1, "c1", "look")]);
    assert_eq!(acc.tool_call(0), None, "a text block is not a tool call");
    assert_eq!(acc.tool_call(2), None, "out of range");
    // Unsealed, no text yet.
    assert_eq!(
        acc.tool_call(1),
        Some(ToolCall {
            id: "c1".into(),
            name: "look".into(),
            arguments: ToolArguments::Valid(Map::new()),
            provider_async: false,
        })
    );
    // Unsealed, partial text: parsed strictly, not repaired.
    feed_into(&mut acc, [call_delta(1, "{\"q\": \"a")]);
    assert_eq!(invalid_raw(&acc.tool_call(1).unwrap().arguments), "{\"q\": \"a");
    feed_into(&mut acc, [call_delta(1, "b\"}"), call_end(1)]);
    assert_eq!(acc.tool_call(1).unwrap().arguments, object(json!({"q": "ab"})));
    // A later delta to the sealed call is rejected and the call stays as sealed.
    assert!(acc.apply(call_delta(1, "x")).is_err());
    assert_eq!(acc.tool_call(1).unwrap().arguments, object(json!({"q": "ab"})));
}

#[test]
fn is_open_and_any_open_in_track_open_blocks() {
    let mut acc = feed([start()]);
    assert!(!acc.is_open(0));
    assert!(!acc.any_open_in(0..10));
    feed_into(&mut acc, [text_start(0), call_start(1, "a", "t"), thinking_start(2)]);
    assert!(acc.is_open(0) && acc.is_open(1) && acc.is_open(2) && !acc.is_open(3));
    feed_into(&mut acc, [call_end(1), text_end(0)]);
    assert!(!acc.is_open(0) && !acc.is_open(1) && acc.is_open(2));
    assert!(!acc.any_open_in(0..2));
    assert!(acc.any_open_in(0..3));
    assert!(acc.any_open_in(2..3));
    assert!(!acc.any_open_in(3..100));
    assert!(!acc.any_open_in(2..2), "an empty range holds nothing");
    assert!(acc.any_open_in(1..usize::MAX));
    feed_into(&mut acc, [thinking_end(2, None)]);
    assert!(!acc.any_open_in(0..usize::MAX));
    assert_eq!(acc.len(), 3);
    assert!(!acc.is_empty());
}

#[test]
fn len_content_and_is_empty() {
    let mut acc = feed([start()]);
    assert!(acc.is_empty());
    assert_eq!(acc.len(), 0);
    feed_into(
        &mut acc,
        [
            text_start(0),
            text_delta(0, "a"),
            call_start(1, "c", "t"),
            text_start(2),
            text_delta(2, "b"),
        ],
    );
    assert_eq!(acc.len(), 3);
    assert_eq!(
        acc.content(1..3),
        vec![
            ContentBlock::ToolCall(ToolCall {
                id: "c".into(),
                name: "t".into(),
                arguments: ToolArguments::Valid(Map::new()),
                provider_async: false,
            }),
            ContentBlock::text("b"),
        ]
    );
    assert_eq!(acc.content(0..1), vec![ContentBlock::text("a")]);
    assert!(acc.content(3..3).is_empty());
}

#[test]
fn applied_reports_what_each_event_did() {
    let mut acc = Accumulator::new();
    assert_eq!(acc.apply(start()), Ok(Applied::Started));
    assert_eq!(acc.apply(thinking_start(0)), Ok(Applied::Opened(0)));
    assert_eq!(acc.apply(thinking_delta(0, "x")), Ok(Applied::Appended(0)));
    assert_eq!(acc.apply(thinking_end(0, None)), Ok(Applied::Closed(0)));
    assert_eq!(acc.apply(text_start(1)), Ok(Applied::Opened(1)));
    assert_eq!(acc.apply(text_delta(1, "")), Ok(Applied::Appended(1)));
    assert_eq!(acc.apply(text_end(1)), Ok(Applied::Closed(1)));
    assert_eq!(acc.apply(call_start(2, "c", "t")), Ok(Applied::Opened(2)));
    assert_eq!(acc.apply(call_delta(2, "{}")), Ok(Applied::Appended(2)));
    assert_eq!(acc.apply(call_end(2)), Ok(Applied::Sealed(2)));
    assert_eq!(acc.apply(done(DoneReason::ToolUse)), Ok(Applied::Ended));
    assert_eq!(acc.position(), 11);
}

#[test]
fn ending_for_done_and_error() {
    let mut acc = feed([start(), text_start(0), text_delta(0, "hi"), text_end(0)]);
    assert_eq!(acc.ending(), None);
    acc.apply(DeltaEvent::Done {
        stop_reason: DoneReason::Length,
        usage: usage(10, 50, 3, 4),
    })
    .unwrap();
    let expected = Ending {
        stop_reason: StopReason::Length,
        usage: usage(10, 50, 3, 4),
        error_message: None,
    };
    assert_eq!(acc.ending(), Some(&expected));
    let message = acc.snapshot();
    assert_eq!(
        (message.stop_reason, message.usage, message.error_message),
        (StopReason::Length, usage(10, 50, 3, 4), None)
    );

    for (reason, stop_reason) in [
        (ErrorReason::Error, StopReason::Error),
        (ErrorReason::Aborted, StopReason::Aborted),
    ] {
        // With usage, and blocks still open (legal for error).
        let mut acc = feed([start(), text_start(0), text_delta(0, "partial")]);
        acc.apply(DeltaEvent::Error {
            stop_reason: reason,
            message: "overloaded".into(),
            usage: Some(usage(1, 2, 0, 0)),
            kind: None,
        })
        .unwrap();
        assert_eq!(
            acc.ending(),
            Some(&Ending {
                stop_reason,
                usage: usage(1, 2, 0, 0),
                error_message: Some("overloaded".into()),
            })
        );
        let message = acc.snapshot();
        assert_eq!(message.stop_reason, stop_reason);
        assert_eq!(message.error_message.as_deref(), Some("overloaded"));
        assert_eq!(message.content, vec![ContentBlock::text("partial")]);

        // Without usage: zero.
        let acc = feed([start(), error(reason, "gone")]);
        assert_eq!(
            acc.ending(),
            Some(&Ending {
                stop_reason,
                usage: Usage::default(),
                error_message: Some("gone".into()),
            })
        );
    }

    // The usage of done defaults to zero in the snapshot before the end.
    let acc = feed([start(), text_start(0)]);
    let message = acc.snapshot();
    assert_eq!((message.usage, message.error_message), (Usage::default(), None));
}

#[test]
fn done_each_stop_reason() {
    for (reason, stop_reason) in [
        (DoneReason::Stop, StopReason::Stop),
        (DoneReason::Length, StopReason::Length),
        (DoneReason::ToolUse, StopReason::ToolUse),
    ] {
        let acc = feed([start(), done(reason)]);
        assert_eq!(acc.ending().unwrap().stop_reason, stop_reason);
        assert_eq!(acc.snapshot().stop_reason, stop_reason);
        assert!(acc.snapshot().content.is_empty());
    }
}

#[test]
fn fail_before_start_ends_the_response() {
    let mut acc = Accumulator::new();
    assert!(!acc.started());
    acc.fail(ErrorReason::Error, "stream ended without a terminal event");
    assert_eq!(
        acc.ending(),
        Some(&Ending {
            stop_reason: StopReason::Error,
            usage: Usage::default(),
            error_message: Some("stream ended without a terminal event".into()),
        })
    );
    assert!(!acc.started(), "start was never accepted");
    assert_eq!(acc.position(), 0);
    // Ended: even start is now rejected.
    assert_eq!(
        acc.apply(start()).unwrap_err(),
        violation(0, "start", Violation::AfterEnd)
    );
    let message = acc.snapshot();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.content.is_empty());
}

#[test]
fn fail_while_streaming_ends_the_response_with_open_blocks_kept() {
    let mut acc = feed([
        start(),
        text_start(0),
        text_delta(0, "so far"),
        call_start(1, "c1", "t"),
        call_delta(1, "{\"a\":"),
    ]);
    acc.fail(ErrorReason::Aborted, "cancelled by user");
    assert!(acc.started());
    assert_eq!(
        acc.ending(),
        Some(&Ending {
            stop_reason: StopReason::Aborted,
            usage: Usage::default(),
            error_message: Some("cancelled by user".into()),
        })
    );
    let message = acc.snapshot();
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.content[0], ContentBlock::text("so far"));
    assert_eq!(
        invalid_raw(&message.content[1].as_tool_call().unwrap().arguments),
        "{\"a\":"
    );
    assert_eq!(
        acc.apply(call_delta(1, "1}")).unwrap_err(),
        violation(5, "toolcall_delta", Violation::AfterEnd)
    );
    // A second failure does not overwrite the first.
    acc.fail(ErrorReason::Error, "again");
    assert_eq!(
        acc.ending().unwrap().error_message.as_deref(),
        Some("cancelled by user")
    );
}

#[test]
fn fail_after_the_end_is_a_no_op() {
    let mut acc = feed([
        start(),
        DeltaEvent::Done {
            stop_reason: DoneReason::Stop,
            usage: usage(1, 1, 1, 1),
        },
    ]);
    let before = State::of(&acc);
    acc.fail(ErrorReason::Error, "late");
    assert_eq!(State::of(&acc), before);

    let mut acc = feed([start(), error(ErrorReason::Error, "first")]);
    let before = State::of(&acc);
    acc.fail(ErrorReason::Aborted, "second");
    assert_eq!(State::of(&acc), before);
    assert_eq!(acc.ending().unwrap().error_message.as_deref(), Some("first"));
}

#[test]
fn fail_after_a_protocol_error_ends_with_its_message() {
    // contract §2: a protocol error ends the response as `error` with the accumulator's message.
    let mut acc = feed([start(), text_start(0)]);
    let err = acc.apply(text_start(5)).unwrap_err();
    acc.fail(ErrorReason::Error, err.to_string());
    assert_eq!(acc.ending().unwrap().stop_reason, StopReason::Error);
    assert_eq!(
        acc.ending().unwrap().error_message.as_deref(),
        Some("protocol violation at event 2 (text_start): block started at index 5, expected the next unused index 1")
    );
}

#[test]
fn started_tracks_start() {
    let mut acc = Accumulator::new();
    assert!(!acc.started());
    assert!(acc.apply(text_start(0)).is_err());
    assert!(!acc.started());
    acc.apply(start()).unwrap();
    assert!(acc.started());
    acc.apply(done(DoneReason::Stop)).unwrap();
    assert!(acc.started());
}

// ---------------------------------------------------------------------------------------------------------------
// 5. Properties
// ---------------------------------------------------------------------------------------------------------------

/// A reference model of the contract §2 rules, independent of the accumulator's implementation.
#[derive(Default)]
struct Rules {
    started: bool,
    ended: bool,
    next: usize,
    open: BTreeMap<usize, BlockKind>,
    ids: HashSet<String>,
}

impl Rules {
    /// What `event` should do: the violation it commits, or `Ok` (and the model advances).
    fn step(&mut self, event: &DeltaEvent) -> Result<(), Violation> {
        if self.ended {
            return Err(Violation::AfterEnd);
        }
        if !self.started {
            return match event {
                DeltaEvent::Start { .. } => {
                    self.started = true;
                    Ok(())
                }
                _ => Err(Violation::BeforeStart),
            };
        }
        let addressed = |kind: BlockKind, index: usize, open: &BTreeMap<usize, BlockKind>| match open.get(&index) {
            None => Err(Violation::NotOpen { index }),
            Some(&found) if found != kind => Err(Violation::WrongKind {
                index,
                expected: kind,
                found,
            }),
            Some(_) => Ok(()),
        };
        match event {
            DeltaEvent::Start { .. } => Err(Violation::SecondStart),
            DeltaEvent::TextStart { index }
            | DeltaEvent::ThinkingStart { index }
            | DeltaEvent::ToolcallStart { index, .. } => {
                if *index != self.next {
                    return Err(Violation::NotNextIndex {
                        index: *index,
                        expected: self.next,
                    });
                }
                let kind = match event {
                    DeltaEvent::TextStart { .. } => BlockKind::Text,
                    DeltaEvent::ThinkingStart { .. } => BlockKind::Thinking,
                    _ => BlockKind::ToolCall,
                };
                if let DeltaEvent::ToolcallStart { id, .. } = event {
                    if !self.ids.insert(id.clone()) {
                        return Err(Violation::DuplicateId { id: id.clone() });
                    }
                }
                self.open.insert(*index, kind);
                self.next += 1;
                Ok(())
            }
            DeltaEvent::TextDelta { index, .. } => addressed(BlockKind::Text, *index, &self.open),
            DeltaEvent::ThinkingDelta { index, .. } => addressed(BlockKind::Thinking, *index, &self.open),
            DeltaEvent::ToolcallDelta { index, .. } => addressed(BlockKind::ToolCall, *index, &self.open),
            DeltaEvent::TextEnd { index }
            | DeltaEvent::ThinkingEnd { index, .. }
            | DeltaEvent::ToolcallEnd { index, .. } => {
                let kind = match event {
                    DeltaEvent::TextEnd { .. } => BlockKind::Text,
                    DeltaEvent::ThinkingEnd { .. } => BlockKind::Thinking,
                    _ => BlockKind::ToolCall,
                };
                addressed(kind, *index, &self.open)?;
                self.open.remove(index);
                Ok(())
            }
            DeltaEvent::Done { .. } => {
                if !self.open.is_empty() {
                    return Err(Violation::DoneWithOpenBlocks {
                        open: self.open.keys().copied().collect(),
                    });
                }
                self.ended = true;
                Ok(())
            }
            DeltaEvent::Error { .. } => {
                self.ended = true;
                Ok(())
            }
        }
    }
}

fn arb_usage() -> impl Strategy<Value = Usage> {
    (0u64..1000, 0u64..1000, 0u64..100, 0u64..100).prop_map(|(a, b, c, d)| usage(a, b, c, d))
}

fn arb_done_reason() -> impl Strategy<Value = DoneReason> {
    prop_oneof![
        Just(DoneReason::Stop),
        Just(DoneReason::Length),
        Just(DoneReason::ToolUse)
    ]
}

fn arb_error_reason() -> impl Strategy<Value = ErrorReason> {
    prop_oneof![Just(ErrorReason::Error), Just(ErrorReason::Aborted)]
}

/// Any event, valid or not in context: small indices, ids from a small set, short deltas.
fn arb_event() -> impl Strategy<Value = DeltaEvent> {
    let index = || 0usize..4;
    let delta = || "[a-z{}\":, \\[\\]0-9é]{0,4}";
    let id = prop::sample::select(vec!["a", "b", "c"]);
    let override_value = prop::option::of(prop_oneof![
        Just(json!({})),
        Just(json!({"k": 1})),
        Just(json!([1])),
        Just(json!("x")),
        Just(json!(3)),
    ]);
    prop_oneof![
        2 => (prop::option::of("[a-z]{1,3}"), prop::option::of("[a-z]{1,3}"))
            .prop_map(|(model, response_id)| DeltaEvent::Start { model, response_id }),
        3 => index().prop_map(|index| DeltaEvent::TextStart { index }),
        3 => (index(), delta()).prop_map(|(index, delta)| DeltaEvent::TextDelta { index, delta }),
        2 => index().prop_map(|index| DeltaEvent::TextEnd { index }),
        3 => index().prop_map(|index| DeltaEvent::ThinkingStart { index }),
        3 => (index(), delta()).prop_map(|(index, delta)| DeltaEvent::ThinkingDelta { index, delta }),
        2 => (index(), prop::option::of("[a-z]{0,3}"))
            .prop_map(|(index, signature)| DeltaEvent::ThinkingEnd { index, signature }),
        3 => (index(), id, "[a-z]{1,3}", any::<bool>()).prop_map(|(index, id, name, early)| {
            DeltaEvent::ToolcallStart { index, id: id.to_owned(), name, early, provider_async: false }
        }),
        3 => (index(), delta()).prop_map(|(index, delta)| DeltaEvent::ToolcallDelta { index, delta }),
        2 => (index(), override_value).prop_map(|(index, arguments)| DeltaEvent::ToolcallEnd { index, arguments }),
        1 => (arb_done_reason(), arb_usage()).prop_map(|(stop_reason, usage)| DeltaEvent::Done { stop_reason, usage }),
        1 => (arb_error_reason(), "[a-z ]{0,8}", prop::option::of(arb_usage()))
            .prop_map(|(stop_reason, message, usage)| DeltaEvent::Error { stop_reason, message, usage, kind: None }),
    ]
}

/// How a generated tool call gets its arguments.
#[derive(Debug, Clone)]
enum GenArgs {
    /// A JSON object, streamed as its serialized text.
    Object { value: Map<String, Value>, pretty: bool },
    /// Arbitrary text (mostly not a JSON object), streamed verbatim.
    Raw(String),
    /// Arbitrary streamed text, replaced by an object given at `toolcall_end`.
    Override {
        streamed: String,
        value: Map<String, Value>,
    },
}

#[derive(Debug, Clone)]
enum GenBlock {
    Text(String, Vec<Index>),
    Thinking(String, Vec<Index>, Option<String>),
    Call(String, bool, GenArgs, Vec<Index>),
}

#[derive(Debug, Clone)]
struct GenMessage {
    model: Option<String>,
    response_id: Option<String>,
    blocks: Vec<GenBlock>,
    end: DeltaEvent,
    /// At most this many blocks open at once (1 = no interleaving).
    max_open: usize,
    seed: u64,
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "(?s).{0,8}".prop_map(Value::String),
    ]
}

fn arb_object() -> impl Strategy<Value = Map<String, Value>> {
    let value = prop_oneof![
        3 => arb_leaf(),
        1 => prop::collection::vec(arb_leaf(), 0..3).prop_map(Value::Array),
    ];
    prop::collection::vec(("[a-z_]{1,6}", value), 0..4).prop_map(|pairs| pairs.into_iter().collect())
}

fn arb_cuts() -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..6)
}

fn arb_block() -> impl Strategy<Value = GenBlock> {
    let args = prop_oneof![
        3 => (arb_object(), any::<bool>()).prop_map(|(value, pretty)| GenArgs::Object { value, pretty }),
        1 => "[\\[\\]{}\":,0-9a-z ]{0,12}".prop_map(GenArgs::Raw),
        1 => ("[\\[\\]{}\":,0-9a-z ]{0,12}", arb_object())
            .prop_map(|(streamed, value)| GenArgs::Override { streamed, value }),
    ];
    prop_oneof![
        ("(?s).{0,40}", arb_cuts()).prop_map(|(text, cuts)| GenBlock::Text(text, cuts)),
        ("(?s).{0,20}", arb_cuts(), prop::option::of("[A-Za-z0-9+/=]{1,12}"))
            .prop_map(|(text, cuts, signature)| GenBlock::Thinking(text, cuts, signature)),
        ("[a-z_]{1,8}", any::<bool>(), args, arb_cuts())
            .prop_map(|(name, early, args, cuts)| GenBlock::Call(name, early, args, cuts)),
    ]
}

fn arb_end() -> impl Strategy<Value = DeltaEvent> {
    prop_oneof![
        3 => (arb_done_reason(), arb_usage()).prop_map(|(stop_reason, usage)| DeltaEvent::Done { stop_reason, usage }),
        1 => (arb_error_reason(), "[a-z ]{0,12}", prop::option::of(arb_usage()))
            .prop_map(|(stop_reason, message, usage)| DeltaEvent::Error { stop_reason, message, usage, kind: None }),
    ]
}

fn arb_message() -> impl Strategy<Value = GenMessage> {
    (
        prop::option::of("[a-z0-9-]{1,10}"),
        prop::option::of("[a-z0-9_]{1,10}"),
        prop::collection::vec(arb_block(), 0..7),
        arb_end(),
        1usize..4,
        any::<u64>(),
    )
        .prop_map(|(model, response_id, blocks, end, max_open, seed)| GenMessage {
            model,
            response_id,
            blocks,
            end,
            max_open,
            seed,
        })
}

/// Splits `text` at the char boundaries chosen by `cuts` (possibly producing empty pieces).
fn split(text: &str, cuts: &[Index]) -> Vec<String> {
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let mut points: Vec<usize> = cuts.iter().map(|cut| boundaries[cut.index(boundaries.len())]).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for point in points.into_iter().chain([text.len()]) {
        pieces.push(text[from..point].to_owned());
        from = point;
    }
    pieces
}

/// splitmix64, to interleave blocks deterministically from the generated seed.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The well-formed event stream for `message`, and the content it must accumulate to.
fn render(message: &GenMessage) -> (Vec<DeltaEvent>, Vec<ContentBlock>) {
    let mut queues: Vec<std::collections::VecDeque<DeltaEvent>> = Vec::new();
    let mut expected = Vec::new();
    for (index, block) in message.blocks.iter().enumerate() {
        let mut events = std::collections::VecDeque::new();
        match block {
            GenBlock::Text(text, cuts) => {
                events.push_back(text_start(index));
                events.extend(split(text, cuts).iter().map(|d| text_delta(index, d)));
                events.push_back(text_end(index));
                expected.push(ContentBlock::text(text.clone()));
            }
            GenBlock::Thinking(text, cuts, signature) => {
                events.push_back(thinking_start(index));
                events.extend(split(text, cuts).iter().map(|d| thinking_delta(index, d)));
                events.push_back(thinking_end(index, signature.as_deref()));
                expected.push(ContentBlock::Thinking {
                    thinking: text.clone(),
                    signature: signature.clone(),
                });
            }
            GenBlock::Call(name, early, args, cuts) => {
                let id = format!("call_{index}");
                events.push_back(DeltaEvent::ToolcallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                    early: *early,
                    provider_async: false,
                });
                let (streamed, end, arguments) = match args {
                    GenArgs::Object { value, pretty } => {
                        let value = Value::Object(value.clone());
                        let text = if *pretty {
                            serde_json::to_string_pretty(&value).unwrap()
                        } else {
                            value.to_string()
                        };
                        (text, call_end(index), object(value))
                    }
                    GenArgs::Raw(raw) => {
                        // Empty text is `{}` (contract §2); `ToolArguments::parse` also reads whitespace-only text so.
                        let arguments = if raw.trim().is_empty() {
                            ToolArguments::Valid(Map::new())
                        } else {
                            match serde_json::from_str::<Value>(raw) {
                                Ok(Value::Object(map)) => ToolArguments::Valid(map),
                                Ok(_) => ToolArguments::Invalid {
                                    raw: raw.clone(),
                                    error: "arguments must be a JSON object".into(),
                                },
                                Err(err) => ToolArguments::Invalid {
                                    raw: raw.clone(),
                                    error: err.to_string(),
                                },
                            }
                        };
                        (raw.clone(), call_end(index), arguments)
                    }
                    GenArgs::Override { streamed, value } => (
                        streamed.clone(),
                        call_end_with(index, Value::Object(value.clone())),
                        ToolArguments::Valid(value.clone()),
                    ),
                };
                events.extend(split(&streamed, cuts).iter().map(|d| call_delta(index, d)));
                events.push_back(end);
                expected.push(ContentBlock::ToolCall(ToolCall {
                    id,
                    name: name.clone(),
                    arguments,
                    provider_async: false,
                }));
            }
        }
        queues.push(events);
    }

    let mut stream = vec![DeltaEvent::Start {
        model: message.model.clone(),
        response_id: message.response_id.clone(),
    }];
    let mut rng = message.seed;
    let mut next_to_open = 0;
    let mut active: Vec<usize> = Vec::new();
    loop {
        let can_open = next_to_open < queues.len() && active.len() < message.max_open;
        let choices = active.len() + usize::from(can_open);
        if choices == 0 {
            break;
        }
        let choice = (next_random(&mut rng) % choices as u64) as usize;
        let block = if choice == active.len() {
            active.push(next_to_open);
            next_to_open += 1;
            next_to_open - 1
        } else {
            active[choice]
        };
        stream.push(queues[block].pop_front().expect("an active block has events left"));
        if queues[block].is_empty() {
            active.retain(|&b| b != block);
        }
    }
    stream.push(message.end.clone());
    (stream, expected)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary events never panic; each is accepted or rejected exactly as the contract §2 rules say, and a rejected
    /// event changes nothing.
    #[test]
    fn arbitrary_events_are_accepted_or_rejected_without_side_effects(
        lead_with_start in any::<bool>(),
        events in prop::collection::vec(arb_event(), 0..40),
    ) {
        let events: Vec<DeltaEvent> = if lead_with_start {
            std::iter::once(start()).chain(events).collect()
        } else {
            events
        };
        let mut acc = Accumulator::new();
        let mut rules = Rules::default();
        for event in events {
            let before = State::of(&acc);
            let expected = rules.step(&event);
            let name = event.type_name();
            match acc.apply(event.clone()) {
                Ok(_) => {
                    prop_assert_eq!(expected, Ok(()), "{:?} was accepted", event);
                    prop_assert_eq!(acc.position(), before.position + 1);
                }
                Err(err) => {
                    prop_assert_eq!(Err(err.violation.clone()), expected, "{:?}", event);
                    prop_assert_eq!(err.position, before.position);
                    prop_assert_eq!(err.event, name);
                    prop_assert_eq!(acc.snapshot(), before.snapshot.clone());
                    prop_assert_eq!(acc.position(), before.position);
                    prop_assert_eq!(State::of(&acc), before);
                }
            }
            prop_assert_eq!(acc.len(), rules.next);
            prop_assert_eq!(acc.started(), rules.started);
            prop_assert_eq!(acc.ending().is_some(), rules.ended);
            for index in 0..5 {
                prop_assert_eq!(acc.is_open(index), rules.open.contains_key(&index));
            }
        }
        // Whatever state it is in, the accumulator can still be snapshotted and failed.
        let _ = acc.snapshot();
        acc.fail(ErrorReason::Error, "stream ended without a terminal event");
        prop_assert!(acc.ending().is_some());
    }

    /// `apply_piece` on a delta's parts is `apply` on the delta: same outcome, same error (its event name
    /// included), same state after, for arbitrary streams.
    #[test]
    fn apply_piece_is_apply_on_the_delta(events in prop::collection::vec(arb_event(), 0..40)) {
        let mut by_event = Accumulator::new();
        let mut by_piece = Accumulator::new();
        for event in std::iter::once(start()).chain(events) {
            let piece = match &event {
                DeltaEvent::TextDelta { index, delta } => Some((BlockKind::Text, *index, delta.clone())),
                DeltaEvent::ThinkingDelta { index, delta } => Some((BlockKind::Thinking, *index, delta.clone())),
                DeltaEvent::ToolcallDelta { index, delta } => Some((BlockKind::ToolCall, *index, delta.clone())),
                _ => None,
            };
            let expected = by_event.apply(event.clone());
            let got = match piece {
                Some((kind, index, delta)) => {
                    prop_assert_eq!(&kind.delta(index, delta.clone()), &event);
                    by_piece.apply_piece(kind, index, &delta)
                }
                None => by_piece.apply(event),
            };
            prop_assert_eq!(got, expected);
            prop_assert_eq!(State::of(&by_piece), State::of(&by_event));
        }
    }

    /// A well-formed stream, with blocks split into random deltas and possibly interleaved, accumulates to exactly
    /// the message it was rendered from.
    #[test]
    fn well_formed_streams_round_trip(message in arb_message()) {
        let (events, expected_content) = render(&message);
        let mut acc = Accumulator::new();
        for (position, event) in events.iter().enumerate() {
            prop_assert_eq!(acc.position(), position);
            if let Err(err) = acc.apply(event.clone()) {
                return Err(TestCaseError::fail(format!("{event:?} rejected: {err}")));
            }
        }
        prop_assert_eq!(acc.position(), events.len());
        prop_assert!(!acc.any_open_in(0..usize::MAX));
        let (stop_reason, usage, error_message) = match &message.end {
            DeltaEvent::Done { stop_reason, usage } => (StopReason::from(*stop_reason), *usage, None),
            DeltaEvent::Error { stop_reason, message, usage, .. } => {
                (StopReason::from(*stop_reason), usage.unwrap_or_default(), Some(message.clone()))
            }
            other => unreachable!("not an end: {other:?}"),
        };
        let snapshot = acc.snapshot();
        prop_assert_eq!(&snapshot.content, &expected_content);
        prop_assert_eq!(snapshot.stop_reason, stop_reason);
        prop_assert_eq!(snapshot.usage, usage);
        prop_assert_eq!(&snapshot.error_message, &error_message);
        prop_assert_eq!(&snapshot.model, &message.model);
        prop_assert_eq!(acc.response_id(), message.response_id.as_deref());
        prop_assert_eq!(acc.content(0..acc.len()), expected_content.clone());
        for (index, block) in expected_content.iter().enumerate() {
            prop_assert_eq!(acc.tool_call(index), block.as_tool_call().cloned());
            if let GenBlock::Call(name, early, ..) = &message.blocks[index] {
                prop_assert_eq!(acc.call_name(index), Some(name.as_str()));
                prop_assert_eq!(acc.call_flagged_async(index), Some(*early));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Limits: a hostile stream cannot make a response hold unbounded memory
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn a_block_may_hold_exactly_the_limit_and_not_a_byte_more() {
    let half = "x".repeat(MAX_BLOCK_BYTES / 2);
    for (open, delta, kind) in [
        (
            text_start(0),
            text_delta as fn(usize, &str) -> DeltaEvent,
            BlockKind::Text,
        ),
        (thinking_start(0), thinking_delta, BlockKind::Thinking),
        (call_start(0, "c", "t"), call_delta, BlockKind::ToolCall),
    ] {
        let prefix = [start(), open.clone(), delta(0, &half), delta(0, &half)];
        let err = reject(&prefix, delta(0, "y"));
        let expected = violation(
            4,
            delta(0, "").type_name(),
            Violation::BlockTooLarge {
                index: 0,
                kind,
                limit: MAX_BLOCK_BYTES,
            },
        );
        assert_eq!(err, expected);
        // An empty delta still fits, and the block can be closed normally afterwards.
        let mut acc = feed(prefix);
        feed_into(&mut acc, [delta(0, "")]);
    }
    let err = reject(
        &[start(), call_start(0, "c", "t")],
        call_delta(0, &"x".repeat(MAX_BLOCK_BYTES + 1)),
    );
    assert_eq!(
        err.to_string(),
        format!(
            "protocol violation at event 2 (toolcall_delta): tool call arguments at index 0 would exceed the limit of \
             {MAX_BLOCK_BYTES} bytes"
        )
    );
}

#[test]
fn an_oversized_argument_override_is_rejected_without_serializing_it_whole() {
    let big = Value::String("x".repeat(MAX_BLOCK_BYTES));
    let err = reject(
        &[start(), call_start(0, "c", "t")],
        call_end_with(0, json!({ "a": big })),
    );
    assert_eq!(
        err.violation,
        Violation::BlockTooLarge {
            index: 0,
            kind: BlockKind::ToolCall,
            limit: MAX_BLOCK_BYTES
        }
    );
    // A large override within the limit is accepted and counted against the response.
    let fits = Value::String("x".repeat(MAX_BLOCK_BYTES / 2));
    let acc = feed([start(), call_start(0, "c", "t"), call_end_with(0, json!({ "a": fits }))]);
    assert!(acc.received > MAX_BLOCK_BYTES / 2);
}

#[test]
fn the_whole_response_is_bounded_across_blocks() {
    let chunk = "x".repeat(MAX_BLOCK_BYTES);
    let blocks = MAX_RESPONSE_BYTES / MAX_BLOCK_BYTES;
    let mut acc = feed([start()]);
    for index in 0..blocks {
        feed_into(
            &mut acc,
            [text_start(index), text_delta(index, &chunk), text_end(index)],
        );
    }
    feed_into(&mut acc, [text_start(blocks)]);
    let before = State::of(&acc);
    let err = acc.apply(text_delta(blocks, "y")).unwrap_err();
    assert_eq!(
        err.violation,
        Violation::ResponseTooLarge {
            limit: MAX_RESPONSE_BYTES
        }
    );
    assert_eq!(State::of(&acc), before);
    assert!(err
        .to_string()
        .contains("the response's content would exceed the limit of 67108864 bytes"));
    // Ids, names and signatures count too.
    let err = acc.apply(call_start(blocks + 1, "c", "t")).unwrap_err();
    assert_eq!(
        err.violation,
        Violation::ResponseTooLarge {
            limit: MAX_RESPONSE_BYTES
        }
    );
    assert!(!acc.ids.contains("c"), "a rejected call start does not claim its id");
}

#[test]
fn the_number_of_blocks_is_bounded() {
    let mut acc = feed([start()]);
    for index in 0..MAX_BLOCKS {
        feed_into(&mut acc, [text_start(index), text_end(index)]);
    }
    for bad in [
        text_start(MAX_BLOCKS),
        thinking_start(MAX_BLOCKS),
        call_start(MAX_BLOCKS, "c", "t"),
    ] {
        let err = acc.apply(bad).unwrap_err();
        assert_eq!(err.violation, Violation::TooManyBlocks { limit: MAX_BLOCKS });
        assert!(err
            .to_string()
            .ends_with("the response would have more than 100000 content blocks"));
    }
    feed_into(&mut acc, [done(DoneReason::Stop)]);
}
