//! The human view of a session: headers, calls with their runs and results, unfinished calls, cut text.

use super::*;
use headstart::store::RunOutcome;
use headstart::StopReason;
use headstart_testkit::fixtures::stored::{self, fragment, tool_call, tool_run, user, with_usage};
use serde_json::{json, Value};

/// The terminal fragment carries the response's usage.
fn terminal(stored: StoredMessage) -> StoredMessage {
    let usage = Usage {
        input: 10,
        output: 50,
        cache_read: 0,
        cache_write: 0,
    };
    with_usage(stored, usage)
}

fn call(id: &str, arguments: Value) -> ContentBlock {
    ContentBlock::ToolCall(tool_call(id, arguments))
}

fn result(seq: u64, id: &str, at_us: i64, text: &str, is_error: bool) -> StoredMessage {
    stored::result(seq, at_us, id, text, is_error)
}

fn run(id: &str, started: Option<i64>, ended: Option<i64>, outcome: Option<RunOutcome>) -> ToolRun {
    tool_run(id, 0, 2, 30_000, started, ended, outcome)
}

fn session() -> (Vec<StoredMessage>, Vec<ToolRun>, Vec<UnfinishedCall>) {
    let log = vec![
        user(1, 0, "compare rust and tokio"),
        fragment(
            2,
            0,
            30_000,
            StopReason::ToolUse,
            vec![
                ContentBlock::text("Checking both."),
                call("call_1", json!({"q": "rust"})),
                call("call_2", json!({"q": "tokio"})),
                call("call_3", json!({})),
                call("call_4", json!({})),
            ],
        ),
        result(3, "call_2", 130_000, "no such crate\nsecond line\nthird", true),
        result(4, "call_1", 330_000, &"x".repeat(500), false),
        terminal(fragment(
            5,
            0,
            400_000,
            StopReason::ToolUse,
            vec![ContentBlock::text("Waiting.")],
        )),
    ];
    let runs = vec![
        run("call_1", Some(30_000), Some(330_000), Some(RunOutcome::Finished)),
        run("call_2", Some(30_000), Some(130_000), Some(RunOutcome::Error)),
        run("call_3", Some(35_000), None, None),
        run("call_4", None, None, None),
    ];
    let unfinished = ["call_3", "call_4"]
        .iter()
        .map(|id| UnfinishedCall {
            run: runs.iter().find(|run| run.call_id == *id).cloned().expect("run"),
            call: ToolCall {
                id: (*id).to_owned(),
                name: "lookup".to_owned(),
                arguments: ToolArguments::default(),
                provider_async: false,
            },
        })
        .collect();
    (log, runs, unfinished)
}

#[test]
fn groups_fragments_by_request_with_a_header() {
    let (log, runs, unfinished) = session();
    let text = render(&log, &runs, &unfinished);
    assert!(
        text.contains("── request 0 · response turn-0 · stop tool_use · usage 10 in / 50 out (total 60) · 2 fragments"),
        "{text}"
    );
    assert_eq!(text.matches("── request").count(), 1);
    assert!(text.contains("#2       +30 ms  fragment 1/2"), "{text}");
    assert!(text.contains("#5      +400 ms  fragment 2/2"), "{text}");
    assert!(
        text.contains("#1        +0 ms  user: compare rust and tokio\n"),
        "{text}"
    );
    assert!(text.contains("#5      +400 ms  fragment 2/2 (terminal)\n"), "{text}");
}

#[test]
fn results_sit_under_their_calls_with_durations() {
    let (log, runs, unfinished) = session();
    let text = render(&log, &runs, &unfinished);
    let call_1 = text.find("call call_1 lookup {\"q\":\"rust\"}").expect("call_1 shown");
    let call_2 = text.find("call call_2 lookup").expect("call_2 shown");
    let finished = text
        .find("finished · admitted +30 ms · ran +30 ms → +330 ms (300 ms)")
        .expect("run");
    let result_1 = text.find("result #4 +330 ms: xxx").expect("result under call_1");
    assert!(call_1 < finished && finished < result_1 && result_1 < call_2, "{text}");
    // Results are not repeated at their write position.
    assert_eq!(text.matches("result #4").count(), 1);
    // Long results are cut.
    assert!(text.contains(&format!("{}…", "x".repeat(MAX_LINE - 1))));
    assert!(!text.contains(&"x".repeat(MAX_LINE + 1)));
    // Error marker and multi-line results indented under the call.
    assert!(
        text.contains("error · admitted +30 ms · ran +30 ms → +130 ms (100 ms)"),
        "{text}"
    );
    assert!(text.contains("result #3 +130 ms ERROR:\n"), "{text}");
    assert!(
        text.contains(&format!("{:w$}no such crate\n", "", w = GUTTER + 4)),
        "{text}"
    );
}

#[test]
fn a_terminal_fragment_without_usage_is_a_stream_end() {
    // A provider that reports no usage: the terminal fragment after the prefix carries zero, as prefixes do.
    let (mut log, runs, unfinished) = session();
    if let Message::Assistant(last) = &mut log[4].message {
        last.usage = Usage::default();
    }
    let text = render(&log, &runs, &unfinished);
    assert!(text.contains("stop tool_use · usage 0 in / 0 out (total 0)"), "{text}");
    assert!(!text.contains("cut off"), "{text}");
    // Empty (every call was committed early) is a terminal fragment too.
    if let Message::Assistant(last) = &mut log[4].message {
        last.content.clear();
    }
    assert!(!render(&log, &runs, &unfinished).contains("cut off"));
}

#[test]
fn unfinished_calls_are_flagged() {
    let (mut log, runs, unfinished) = session();
    let text = render(&log, &runs, &unfinished);
    assert!(
        text.contains("stop tool_use · usage 10 in / 50 out (total 60)"),
        "{text}"
    );
    // Without its terminal fragment the request's stream was cut off.
    log.truncate(4);
    let cut = render(&log, &runs, &unfinished);
    assert!(
        cut.contains(
            "── request 0 · response turn-0 · 1 fragment · ends with a call and no usage: a prefix whose stream was \
             cut off, or a terminal fragment without usage · last fragment +30 ms"
        ),
        "{cut}"
    );
    assert!(
        text.contains("UNFINISHED (started, no result) · admitted +30 ms · started +35 ms"),
        "{text}"
    );
    assert!(
        text.contains("UNFINISHED (admitted, never started, no result) · admitted +30 ms\n"),
        "{text}"
    );
    assert!(text.contains("· 2 UNFINISHED\n"), "{text}");
    assert!(text.contains(
        "! 2 UNFINISHED calls (admitted, no result): call_3 lookup (started), call_4 lookup (admitted, never started)"
    ));
}

#[test]
fn no_unfinished_section_when_everything_finished() {
    let (log, runs, _) = session();
    let runs: Vec<ToolRun> = runs.into_iter().take(2).collect();
    let log: Vec<StoredMessage> = log
        .into_iter()
        .map(|mut stored| {
            if let Message::Assistant(assistant) = &mut stored.message {
                assistant.content.retain(|block| {
                    block
                        .as_tool_call()
                        .is_none_or(|call| call.id == "call_1" || call.id == "call_2")
                });
            }
            stored
        })
        .collect();
    let text = render(&log, &runs, &[]);
    assert!(!text.contains("UNFINISHED"), "{text}");
}

#[test]
fn calls_never_admitted_and_invalid_arguments_are_described() {
    let log = vec![
        fragment(
            1,
            0,
            0,
            StopReason::Stop,
            vec![ContentBlock::ToolCall(ToolCall {
                id: "w1".to_owned(),
                name: "write".to_owned(),
                arguments: ToolArguments::parse("{\"path\": "),
                provider_async: false,
            })],
        ),
        result(2, "w1", 1_000, "not executed", true),
    ];
    let text = render(&log, &[], &[]);
    assert!(text.contains("call w1 write (invalid arguments) {\"path\":"), "{text}");
    assert!(text.contains("not executed (never admitted)"), "{text}");
    assert!(text.contains("result #2 +1 ms ERROR: not executed"), "{text}");
    assert!(text.contains("fragment 1/1 (terminal)"), "{text}");
}

#[test]
fn skipped_calls_never_started() {
    let log = vec![
        fragment(1, 0, 0, StopReason::ToolUse, vec![call("k1", json!({}))]),
        result(2, "k1", 2_000, "cancelled", true),
    ];
    let runs = vec![run("k1", None, Some(2_000), Some(RunOutcome::Skipped))];
    let text = render(&log, &runs, &[]);
    assert!(text.contains("skipped · admitted +30 ms · never started"), "{text}");
}

#[test]
fn long_text_is_cut_by_lines() {
    let mut out = String::new();
    let text: Vec<String> = (0..30).map(|n| format!("line {n}")).collect();
    push_text(&mut out, 2, &text.join("\n"), TEXT_LINES);
    assert!(out.contains("  line 19\n"));
    assert!(!out.contains("line 20"));
    assert!(out.ends_with("  … (10 more lines)\n"), "{out}");
}
