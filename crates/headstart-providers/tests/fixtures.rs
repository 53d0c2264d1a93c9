//! Every recorded provider stream in `tests/fixtures/providers/` through its adapter: the delta events, the tool
//! calls, where each call is sealed (relative to the wire events and to the terminal event), stop reasons and
//! usage; and every produced log through `headstart_core::Accumulator` and the delta-log writer/reader.

use std::path::PathBuf;

use headstart_core::delta_log::{read_delta_log, write_delta_log, TimedDelta};
use headstart_core::{
    Accumulator, AssistantMessage, ContentBlock, DeltaEvent, DoneReason, StopReason, ToolArguments, Usage,
};
use headstart_providers::{
    convert_capture, parse_sse_text, read_capture, ConvertOptions, SealAt, SseEvent, WireFormat,
};
use serde_json::{json, Value};

const FIXTURES: [(&str, WireFormat); 6] = [
    ("anthropic__multi_turn_streaming_tools.yaml", WireFormat::Anthropic),
    (
        "openai_chat__streaming_gpt41_parallel_model.yaml",
        WireFormat::OpenAiChat,
    ),
    (
        "deepseek_chat__streaming_parallel_calls_keep_the_complete_one.yaml",
        WireFormat::OpenAiChat,
    ),
    (
        "openai_responses__parallel_tool_calls.yaml",
        WireFormat::OpenAiResponses,
    ),
    (
        "openai_responses__incomplete_mid_tool_call.yaml",
        WireFormat::OpenAiResponses,
    ),
    ("gemini__parallel_function_calls.yaml", WireFormat::Gemini),
];

fn fixture_dir() -> PathBuf {
    // The repository's `tests/fixtures/providers/` (crates/headstart-providers → repository root).
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/providers")
}

fn fixture(name: &str) -> String {
    let path = fixture_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read fixture {}: {err}", path.display()))
}

fn default_options() -> ConvertOptions {
    ConvertOptions::default()
}

fn sealed_at(seal_at: SealAt) -> ConvertOptions {
    ConvertOptions {
        seal_at,
        ..ConvertOptions::default()
    }
}

fn logs(name: &str, format: WireFormat, options: &ConvertOptions) -> Vec<Vec<TimedDelta>> {
    convert_capture(format, &fixture(name), options).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// The SSE events of exchange `exchange` of a fixture.
fn wire_events(name: &str, exchange: usize) -> Vec<SseEvent> {
    let exchanges = read_capture(&fixture(name)).unwrap();
    parse_sse_text(&exchanges[exchange].body).unwrap()
}

/// Positions of the wire events whose JSON data satisfies `matches`.
fn wire_positions(events: &[SseEvent], matches: impl Fn(&str, &Value) -> bool) -> Vec<u64> {
    events
        .iter()
        .enumerate()
        .filter(|(_, event)| {
            let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
            matches(&event.event, &data)
        })
        .map(|(position, _)| position as u64)
        .collect()
}

/// Applies every event to a fresh accumulator (each must be accepted) and returns the message.
fn accumulate(log: &[TimedDelta]) -> AssistantMessage {
    let mut accumulator = Accumulator::new();
    for (position, timed) in log.iter().enumerate() {
        if let Err(err) = accumulator.apply(timed.event.clone()) {
            panic!("event {position} rejected: {err}\nlog: {log:#?}");
        }
    }
    assert!(accumulator.ending().is_some(), "the log has no terminal event");
    accumulator.snapshot()
}

/// (event position, at_ms, arguments override) of the `toolcall_end` for content index `index`.
fn seal(log: &[TimedDelta], index: usize) -> (usize, u64, Option<Value>) {
    log.iter()
        .enumerate()
        .find_map(|(position, timed)| match &timed.event {
            DeltaEvent::ToolcallEnd { index: i, arguments } if *i == index => {
                Some((position, timed.at_ms, arguments.clone()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no toolcall_end for index {index}: {log:#?}"))
}

/// (event position, at_ms) of the event satisfying `matches`.
fn find(log: &[TimedDelta], matches: impl Fn(&DeltaEvent) -> bool) -> (usize, u64) {
    log.iter()
        .enumerate()
        .find(|(_, timed)| matches(&timed.event))
        .map(|(position, timed)| (position, timed.at_ms))
        .unwrap_or_else(|| panic!("event not found in {log:#?}"))
}

fn terminal(log: &[TimedDelta]) -> (usize, u64) {
    find(log, DeltaEvent::is_terminal)
}

fn tool_calls(message: &AssistantMessage) -> Vec<(String, String, ToolArguments)> {
    message
        .tool_calls()
        .map(|call| (call.id.clone(), call.name.clone(), call.arguments.clone()))
        .collect()
}

fn valid(value: Value) -> ToolArguments {
    match value {
        Value::Object(map) => ToolArguments::Valid(map),
        other => panic!("not an object: {other}"),
    }
}

fn usage(input: u64, output: u64, cache_read: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write: 0,
    }
}

fn start_of(log: &[TimedDelta]) -> (Option<String>, Option<String>) {
    match &log[0].event {
        DeltaEvent::Start { model, response_id } => (model.clone(), response_id.clone()),
        other => panic!("first event is {other:?}"),
    }
}

#[test]
fn every_fixture_converts_to_a_log_the_accumulator_and_the_delta_log_format_accept() {
    for (name, format) in FIXTURES {
        for options in SealAt::ALL.map(sealed_at) {
            let logs = logs(name, format, &options);
            assert!(!logs.is_empty(), "{name}");
            for log in &logs {
                accumulate(log);
                assert!(matches!(log[0].event, DeltaEvent::Start { .. }), "{name}: {log:#?}");
                assert_eq!(
                    terminal(log).0,
                    log.len() - 1,
                    "{name}: the terminal event must be last"
                );
                assert!(
                    log.windows(2).all(|pair| pair[0].at_ms <= pair[1].at_ms),
                    "{name}: at_ms decreases"
                );
                let mut written = Vec::new();
                write_delta_log(&mut written, log).unwrap();
                assert_eq!(
                    &read_delta_log(written.as_slice()).unwrap(),
                    log,
                    "{name}: delta-log round trip"
                );
            }
        }
    }
}

#[test]
fn anthropic_calls_are_sealed_at_their_content_block_stop_before_the_stream_ends() {
    let name = "anthropic__multi_turn_streaming_tools.yaml";
    let logs = logs(name, WireFormat::Anthropic, &default_options());
    assert_eq!(logs.len(), 4);

    // Exchange 1: text + two calls.
    let log = &logs[0];
    assert_eq!(
        start_of(log),
        (Some("claude-sonnet-4-6".into()), Some("msg_REDACTED_1".into()))
    );
    let message = accumulate(log);
    assert_eq!(
        message.content[0],
        ContentBlock::text(
            "I'll solve this step by step! Let me start by computing the two independent sub-expressions \
             **(10 - 4)** and **(3 + 5)** simultaneously first."
        )
    );
    assert_eq!(
        tool_calls(&message),
        vec![
            (
                "toolu_REDACTED_1".into(),
                "subtract".into(),
                valid(json!({"x": 10, "y": 4}))
            ),
            ("toolu_REDACTED_2".into(), "add".into(), valid(json!({"x": 3, "y": 5}))),
        ]
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.usage, usage(1001, 161, 0));

    let wire = wire_events(name, 0);
    let stops = wire_positions(&wire, |event, _| event == "content_block_stop");
    let message_stop = wire_positions(&wire, |event, _| event == "message_stop");
    assert_eq!(stops.len(), 3);
    let (first_position, first_at, first_override) = seal(log, 1);
    let (second_position, second_at, second_override) = seal(log, 2);
    // Each call is sealed by its own content_block_stop (wire event position = at_ms) ...
    assert_eq!(first_at, stops[1]);
    assert_eq!(second_at, stops[2]);
    assert_eq!((first_override, second_override), (None, None));
    // ... the first one before the second call even starts, and both before the stream's end.
    let (second_start, _) = find(log, |e| matches!(e, DeltaEvent::ToolcallStart { index: 2, .. }));
    assert!(first_position < second_start);
    let (done_position, done_at) = terminal(log);
    assert!(second_position < done_position);
    assert!(second_at < done_at);
    assert_eq!(done_at, message_stop[0]);

    // Exchanges 2 and 3: one call each, sealed at its content_block_stop; exchange 4: the final answer.
    for (exchange, id, tool, args, out) in [
        (1, "toolu_REDACTED_3", "multiply", json!({"x": 6, "y": 8}), 85),
        (2, "toolu_REDACTED_4", "divide", json!({"x": 48, "y": 3}), 86),
    ] {
        let log = &logs[exchange];
        let message = accumulate(log);
        assert_eq!(tool_calls(&message), vec![(id.into(), tool.into(), valid(args))]);
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!(message.usage.output, out);
        let wire = wire_events(name, exchange);
        let stops = wire_positions(&wire, |event, _| event == "content_block_stop");
        assert_eq!(seal(log, 1).1, stops[1]);
        assert!(seal(log, 1).1 < terminal(log).1);
    }
    let message = accumulate(&logs[3]);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(tool_calls(&message), vec![]);
    assert!(message.content[0]
        .as_text()
        .unwrap()
        .starts_with("**The result is 16.**"));
    assert_eq!(message.usage, usage(1420, 110, 0));
}

#[test]
fn openai_chat_calls_are_sealed_when_their_json_completes_and_done_carries_the_usage_chunk() {
    let name = "openai_chat__streaming_gpt41_parallel_model.yaml";
    let wire = wire_events(name, 0);
    let finish = wire_positions(&wire, |_, data| data["choices"][0]["finish_reason"].is_string());
    let beta_start = wire_positions(&wire, |_, data| {
        data["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "beta"
    });
    let last_alpha_fragment = wire_positions(&wire, |_, data| {
        data["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    })
    .into_iter()
    .max()
    .unwrap();
    let done_position = wire.iter().position(|event| event.data == "[DONE]").unwrap() as u64;

    let expected_calls = vec![
        (
            "call_REDACTED_1".to_owned(),
            "alpha".to_owned(),
            valid(json!({"value": "red"})),
        ),
        (
            "call_REDACTED_2".to_owned(),
            "beta".to_owned(),
            valid(json!({"value": "blue"})),
        ),
    ];

    let last_beta_fragment = wire_positions(&wire, |_, data| {
        data["choices"][0]["delta"]["tool_calls"][0]["index"] == 1
    })
    .into_iter()
    .max()
    .unwrap();

    // Default: each call is sealed by the fragment that completes its JSON object, long before finish_reason.
    let log = &logs(name, WireFormat::OpenAiChat, &default_options())[0];
    assert_eq!(
        start_of(log),
        (
            Some("gpt-4.1-mini-2025-04-14".into()),
            Some("chatcmpl-REDACTED_1".into())
        )
    );
    let message = accumulate(log);
    assert_eq!(tool_calls(&message), expected_calls);
    assert_eq!(seal(log, 0).1, last_alpha_fragment);
    assert!(last_alpha_fragment < beta_start[0]);
    assert_eq!(seal(log, 1).1, last_beta_fragment);
    assert!(last_beta_fragment < finish[0]);
    assert_eq!(
        terminal(log).1,
        done_position,
        "done waits for the usage chunk and [DONE]"
    );
    assert!(matches!(
        log.last().unwrap().event,
        DeltaEvent::Done {
            stop_reason: DoneReason::ToolUse,
            ..
        }
    ));
    assert_eq!(message.usage, usage(90, 42, 0));

    // next-index: alpha is sealed by beta's first chunk, right before beta starts; beta waits for finish_reason.
    let log = &logs(name, WireFormat::OpenAiChat, &sealed_at(SealAt::NextIndex))[0];
    let message = accumulate(log);
    assert_eq!(tool_calls(&message), expected_calls);
    let (alpha_seal, alpha_at, _) = seal(log, 0);
    assert_eq!(alpha_at, beta_start[0]);
    let (beta_start_position, _) = find(log, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
    assert_eq!(alpha_seal + 1, beta_start_position);
    assert_eq!(seal(log, 1).1, finish[0]);

    // finish: both calls wait for finish_reason, although alpha's JSON was complete long before.
    let log = &logs(name, WireFormat::OpenAiChat, &sealed_at(SealAt::Finish))[0];
    assert_eq!(tool_calls(&accumulate(log)), expected_calls);
    assert_eq!(seal(log, 0).1, finish[0]);
    assert_eq!(seal(log, 1).1, finish[0]);
}

#[test]
fn deepseek_truncated_call_is_invalid_and_the_complete_one_is_valid() {
    let name = "deepseek_chat__streaming_parallel_calls_keep_the_complete_one.yaml";
    let wire = wire_events(name, 0);
    let finish = wire_positions(&wire, |_, data| data["choices"][0]["finish_reason"] == "length");
    let second_start = wire_positions(&wire, |_, data| {
        data["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "file_report"
    });
    let first_complete = wire_positions(&wire, |_, data| {
        data["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    })
    .into_iter()
    .max()
    .unwrap();
    let rules = [
        (SealAt::Complete, first_complete),
        (SealAt::NextIndex, second_start[0]),
        (SealAt::Finish, finish[0]),
    ];
    for (rule, first_sealed_at) in rules {
        let options = sealed_at(rule);
        let log = &logs(name, WireFormat::OpenAiChat, &options)[0];
        assert_eq!(
            start_of(log),
            (Some("deepseek-v4-flash".into()), Some("chatcmpl-REDACTED_1".into()))
        );
        let message = accumulate(log);
        let calls = tool_calls(&message);
        assert_eq!(calls.len(), 2);
        // The complete call keeps its arguments: it runs.
        assert_eq!(
            calls[0],
            (
                "call_REDACTED_1".into(),
                "page_oncall".into(),
                valid(json!({"team": "platform"}))
            )
        );
        let (_, at, arguments) = seal(log, 0);
        assert_eq!((at, arguments), (first_sealed_at, None));
        // The cut-off call is sealed with a non-object override holding its raw text: invalid, never executed.
        assert_eq!(
            (calls[1].0.as_str(), calls[1].1.as_str()),
            ("call_REDACTED_2", "file_report")
        );
        assert!(matches!(calls[1].2, ToolArguments::Invalid { .. }), "{:?}", calls[1].2);
        let (_, at, arguments) = seal(log, 1);
        assert_eq!(at, finish[0]);
        assert_eq!(arguments, Some(Value::String("{\"summary\": ".into())));
        assert_eq!(message.stop_reason, StopReason::Length);
        // Cached prompt tokens are split out of prompt_tokens.
        assert_eq!(message.usage, usage(50, 56, 384));
        assert_eq!(message.usage.total(), 490);
    }
}

#[test]
fn responses_calls_are_sealed_at_their_completed_output_item_done() {
    let name = "openai_responses__parallel_tool_calls.yaml";
    let wire = wire_events(name, 0);
    let item_done = wire_positions(&wire, |event, _| event == "response.output_item.done");
    let completed = wire_positions(&wire, |event, _| event == "response.completed");
    let arguments_done = wire_positions(&wire, |event, _| event == "response.function_call_arguments.done");
    let log = &logs(name, WireFormat::OpenAiResponses, &default_options())[0];
    assert_eq!(
        start_of(log),
        (Some("gpt-5.6-sol".into()), Some("resp_REDACTED_1".into()))
    );
    let message = accumulate(log);
    assert_eq!(
        tool_calls(&message),
        vec![
            ("call_REDACTED_1".into(), "lookup_harbor_label".into(), valid(json!({}))),
            (
                "call_REDACTED_2".into(),
                "lookup_orchard_label".into(),
                valid(json!({}))
            ),
        ]
    );
    for (index, position) in [(0, item_done[0]), (1, item_done[1])] {
        let (_, at, arguments) = seal(log, index);
        assert_eq!((at, arguments), (position, None));
        // Not at `.arguments.done`: only the item's completed status seals.
        assert!(at > arguments_done[index]);
        assert!(at < terminal(log).1);
    }
    assert_eq!(terminal(log).1, completed[0]);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.usage, usage(160, 49, 0));
}

#[test]
fn responses_incomplete_call_is_sealed_invalid() {
    let name = "openai_responses__incomplete_mid_tool_call.yaml";
    let wire = wire_events(name, 0);
    let item_done = wire_positions(&wire, |event, _| event == "response.output_item.done");
    let log = &logs(name, WireFormat::OpenAiResponses, &default_options())[0];
    let message = accumulate(log);
    let calls = tool_calls(&message);
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].0.as_str(), calls[0].1.as_str()), ("call_REDACTED_1", "add"));
    assert!(matches!(calls[0].2, ToolArguments::Invalid { .. }));
    let (_, at, arguments) = seal(log, 0);
    assert_eq!(at, item_done[0]);
    assert_eq!(arguments, Some(Value::String("{\"x\":48151".into())));
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.usage, usage(83, 16, 0));
}

#[test]
fn gemini_whole_function_calls_are_sealed_at_once_with_generated_ids() {
    let name = "gemini__parallel_function_calls.yaml";
    let log = &logs(name, WireFormat::Gemini, &default_options())[0];
    assert_eq!(
        start_of(log),
        (Some("gemini-2.5-flash".into()), Some("id_REDACTED_1".into()))
    );
    let message = accumulate(log);
    assert_eq!(
        tool_calls(&message),
        vec![
            (
                "gemini-call-id_REDACTED_1-0".into(),
                "lookup_harbor_label".into(),
                valid(json!({}))
            ),
            (
                "gemini-call-id_REDACTED_1-1".into(),
                "lookup_orchard_label".into(),
                valid(json!({}))
            ),
        ]
    );
    // One chunk carries both calls and the finish: each call is sealed right after its own start, in order.
    let (first_seal, _, _) = seal(log, 0);
    let (second_start, _) = find(log, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
    assert!(first_seal < second_start);
    assert!(seal(log, 1).0 < terminal(log).0);
    // Gemini says STOP for function calls: mapped to tool_use.
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.usage, usage(170, 26, 0));
}

#[test]
fn a_fixture_cut_mid_stream_ends_as_error_and_seals_nothing_more() {
    // The first Anthropic exchange, cut right after the first call's last fragment (before its content_block_stop).
    let exchanges = read_capture(&fixture("anthropic__multi_turn_streaming_tools.yaml")).unwrap();
    let body = &exchanges[0].body;
    let cut = body.find("\" 4}").unwrap();
    let cut = cut + body[cut..].find("\n\n").unwrap() + 2;
    let events = parse_sse_text(&body[..cut]).unwrap();
    let log = headstart_providers::convert_events(WireFormat::Anthropic, &events, &default_options());
    let last = &log.last().unwrap().1;
    assert!(
        matches!(last, DeltaEvent::Error { message, .. } if message.contains("before message_stop")),
        "{last:?}"
    );
    assert!(!log.iter().any(|(_, e)| matches!(e, DeltaEvent::ToolcallEnd { .. })));
}
