//! The timeline's data: built from a stored session (request starts derived from what was written before them) or
//! from a replay report, and compared with end-of-stream batching.

use headstart::core::model::ContentBlock;
use headstart::store::{RunOutcome, StoredMessage, ToolRun};
use headstart::StopReason;
use headstart_testkit::fixtures::stored::{self, tool_run, user};
use headstart_timeline::{format_ms, Timeline};

fn fragment(seq: u64, request: u32, at_us: i64, stop: StopReason) -> StoredMessage {
    stored::fragment(seq, request, at_us, stop, vec![ContentBlock::text("x")])
}

fn result(seq: u64, id: &str, at_us: i64) -> StoredMessage {
    stored::result(seq, at_us, id, "ok", false)
}

/// A finished (or, without an end, still running) call of request `request`, owned by fragment #2.
fn run(id: &str, request: u32, admitted: i64, started: Option<i64>, ended: Option<i64>) -> ToolRun {
    tool_run(
        id,
        request,
        2,
        admitted,
        started,
        ended,
        ended.map(|_| RunOutcome::Finished),
    )
}

/// Scenario 01's shape on an absolute clock: the user message at 1 s, two early calls, a second request.
fn two_request_session() -> (Vec<StoredMessage>, Vec<ToolRun>) {
    let base = 1_000_000;
    let log = vec![
        user(1, base, "go"),
        fragment(2, 0, base + 30_000, StopReason::ToolUse),
        fragment(3, 0, base + 120_000, StopReason::ToolUse),
        result(4, "call_2", base + 220_000),
        result(5, "call_1", base + 330_000),
        fragment(6, 0, base + 400_000, StopReason::ToolUse),
        fragment(7, 1, base + 450_000, StopReason::Stop),
    ];
    let runs = vec![
        run("call_1", 0, base + 30_000, Some(base + 30_000), Some(base + 330_000)),
        run("call_2", 0, base + 120_000, Some(base + 120_000), Some(base + 220_000)),
    ];
    (log, runs)
}

#[test]
fn store_timeline_derives_request_starts_and_stream_ends() {
    let (log, runs) = two_request_session();
    let timeline = Timeline::from_store("s", &log, &runs);
    assert_eq!(timeline.requests.len(), 2);
    let first = &timeline.requests[0];
    assert_eq!(first.start_ms, 0.0, "request 0 starts at the user message");
    assert_eq!(first.fragments_ms, vec![30.0, 120.0, 400.0]);
    assert_eq!(first.stream_end_ms, Some(400.0));
    assert_eq!(first.stop_reason.as_deref(), Some("tool_use"));
    let second = &timeline.requests[1];
    assert_eq!(
        second.start_ms, 400.0,
        "request 1 starts at the last fragment/result of request 0"
    );
    assert_eq!(second.stream_end_ms, Some(450.0));
    assert_eq!(second.stop_reason.as_deref(), Some("stop"));
    assert_eq!(timeline.calls[0].started_ms, Some(30.0));
    assert_eq!(timeline.calls[0].ended_ms, Some(330.0));
    assert_eq!(timeline.calls[1].duration_ms(), Some(100.0));
    assert_eq!(timeline.calls[0].outcome.as_deref(), Some("finished"));
    assert_eq!(timeline.end_ms, 450.0);
}

#[test]
fn stored_seal_times_give_each_call_its_headroom_and_overlap() {
    let (log, mut runs) = two_request_session();
    let base = 1_000_000;
    runs[0].sealed_at_us = Some(base + 25_000);
    let timeline = Timeline::from_store("s", &log, &runs);
    assert_eq!(timeline.calls[0].sealed_ms, Some(25.0), "on the timeline's axis");
    assert_eq!(timeline.calls[1].sealed_ms, None, "not recorded");
    let figures = timeline.figures();
    let first = &figures.calls[0];
    assert_eq!(
        (
            first.headroom_ms,
            first.seal_to_start_ms,
            first.run_ms,
            first.overlap_ms
        ),
        (Some(375.0), Some(5.0), Some(300.0), Some(300.0))
    );
    assert_eq!(figures.calls[1].headroom_ms, None);
    assert_eq!(figures.calls[1].overlap_ms, Some(100.0));
    assert_eq!(
        (
            figures.responses[0].tool_round_ms,
            figures.responses[0].batching_round_ms
        ),
        (0.0, 300.0)
    );
}

#[test]
fn later_request_starts_at_a_result_written_after_the_stream_end() {
    let log = vec![
        user(1, 0, "go"),
        fragment(2, 0, 100_000, StopReason::ToolUse),
        result(3, "s1", 250_000),
        fragment(4, 1, 300_000, StopReason::Stop),
    ];
    let runs = vec![run("s1", 0, 100_000, Some(100_000), Some(250_000))];
    let timeline = Timeline::from_store("s", &log, &runs);
    assert_eq!(timeline.requests[1].start_ms, 250.0);
}

#[test]
fn batching_starts_early_calls_at_the_stream_end() {
    let (log, runs) = two_request_session();
    let savings = Timeline::from_store("s", &log, &runs).savings();
    let first = savings.requests[0];
    let timeline = Timeline::from_store("s", &log, &runs);
    assert_eq!(timeline.batching_run(&timeline.calls[0]), Some((400.0, 700.0)));
    assert_eq!(timeline.batching_run(&timeline.calls[1]), Some((400.0, 500.0)));
    assert_eq!(first.stream_end_ms, 400.0);
    assert_eq!(
        first.actual_settle_ms, 400.0,
        "both results landed before the stream ended"
    );
    assert_eq!(
        first.batching_settle_ms, 700.0,
        "stream end + the longest call (300 ms)"
    );
    assert_eq!(first.saved_ms(), 300.0);
    assert_eq!(savings.requests[1].saved_ms(), 0.0);
    assert_eq!(savings.actual_end_ms, 450.0);
    assert_eq!(savings.batching_end_ms, 750.0);
    assert_eq!(savings.saved_ms(), 300.0);
    assert!((savings.saved_percent() - 40.0).abs() < 1e-9);
}

#[test]
fn calls_started_after_the_stream_end_keep_their_times() {
    // A sync call runs after the stream end; an early call ran early and partly overlapped the stream.
    let log = vec![user(1, 0, "go"), fragment(2, 0, 200_000, StopReason::ToolUse)];
    let runs = vec![
        run("a1", 0, 20_000, Some(20_000), Some(270_000)),
        run("s1", 0, 100_000, Some(200_000), Some(300_000)),
    ];
    let savings = Timeline::from_store("s", &log, &runs).savings();
    let first = savings.requests[0];
    assert_eq!(first.actual_settle_ms, 300.0);
    assert_eq!(first.batching_settle_ms, 450.0, "a1 would run 200 → 450");
    assert_eq!(first.saved_ms(), 150.0);
}

#[test]
fn savings_are_never_negative() {
    // Sequential calls after the stream end: batching cannot be faster than what happened.
    let log = vec![user(1, 0, "go"), fragment(2, 0, 10_000, StopReason::ToolUse)];
    let runs = vec![
        run("c1", 0, 10_000, Some(10_000), Some(110_000)),
        run("c2", 0, 10_000, Some(110_000), Some(210_000)),
    ];
    let savings = Timeline::from_store("s", &log, &runs).savings();
    assert_eq!(savings.requests[0].saved_ms(), 0.0);
    assert_eq!(savings.requests[0].batching_settle_ms, 210.0);
    assert_eq!(savings.saved_ms(), 0.0);
}

#[test]
fn cancelled_calls_and_abnormal_responses_claim_no_savings() {
    let log = vec![user(1, 0, "go"), fragment(2, 0, 150_000, StopReason::ToolUse)];
    let mut cancelled = run("h1", 0, 10_000, Some(10_000), Some(150_000));
    cancelled.outcome = Some(RunOutcome::Cancelled);
    let timeline = Timeline::from_store("s", &log, &[cancelled]);
    assert_eq!(timeline.batching_run(&timeline.calls[0]), None);
    assert_eq!(timeline.savings().saved_ms(), 0.0);

    let log = vec![user(1, 0, "go"), fragment(2, 0, 100_000, StopReason::Error)];
    let runs = vec![run("c1", 0, 10_000, Some(10_000), Some(60_000))];
    let timeline = Timeline::from_store("s", &log, &runs);
    assert_eq!(timeline.batching_run(&timeline.calls[0]), None);
    assert_eq!(timeline.savings().saved_ms(), 0.0);
}

#[test]
fn unfinished_and_unstarted_calls_do_not_break_the_comparison() {
    let log = vec![user(1, 0, "go"), fragment(2, 0, 50_000, StopReason::ToolUse)];
    let mut skipped = run("k1", 0, 50_000, None, Some(60_000));
    skipped.outcome = Some(RunOutcome::Skipped);
    let runs = vec![run("h1", 0, 10_000, Some(10_000), None), skipped];
    let timeline = Timeline::from_store("s", &log, &runs);
    assert!(timeline.calls[0].executed());
    assert_eq!(timeline.calls[0].duration_ms(), None);
    assert_eq!(timeline.calls[0].outcome, None);
    assert!(!timeline.calls[1].executed());
    let savings = timeline.savings();
    assert_eq!(savings.requests[0].actual_settle_ms, 60.0);
    assert_eq!(savings.saved_ms(), 0.0);
}

#[test]
fn report_timeline_reads_requests_fragments_and_runs() {
    let report = serde_json::json!({
        "scenario": "two",
        "error": null,
        "requests": [
            {"request": 0, "started_ms": 0, "stream_end_ms": 400, "settled_ms": 400, "stop_reason": "tool_use",
             "error": null},
            {"request": 1, "started_ms": 400, "stream_end_ms": 450, "settled_ms": 450, "stop_reason": "stop",
             "error": null}
        ],
        "transcript": [
            {"seq": 1, "role": "user", "text": "go", "at_ms": 0},
            {"seq": 2, "role": "assistant", "request": 0, "turn_id": "t", "stop_reason": "tool_use",
             "content": [], "usage": {}, "at_ms": 30},
            {"seq": 3, "role": "tool_result", "tool_call_id": "b1", "tool_name": "x", "is_error": true,
             "text": "blocked", "terminate": false, "at_ms": 35},
            {"seq": 4, "role": "assistant", "request": 0, "turn_id": "t", "stop_reason": "tool_use",
             "content": [], "usage": {}, "at_ms": 400},
            {"seq": 5, "role": "assistant", "request": 1, "turn_id": "u", "stop_reason": "stop",
             "content": [], "usage": {}, "at_ms": 450.5}
        ],
        "tool_runs": [
            {"id": "call_1", "name": "lookup", "request": 0, "admitted_ms": 30, "started_ms": 30,
             "ended_ms": 330, "outcome": "finished"},
            {"id": "b1", "name": "x", "request": 0, "admitted_ms": 30, "started_ms": null, "ended_ms": null,
             "outcome": "blocked"}
        ],
        "events": [],
        "end_ms": 450.5
    });
    let timeline = Timeline::from_report_json(&report.to_string()).expect("parses");
    assert_eq!(timeline.title, "two");
    assert_eq!(timeline.requests[0].fragments_ms, vec![30.0, 400.0]);
    assert_eq!(timeline.requests[1].fragments_ms, vec![450.5]);
    assert_eq!(timeline.requests[1].start_ms, 400.0);
    assert_eq!(timeline.calls.len(), 2);
    assert_eq!(
        timeline.calls[1].ended_ms,
        Some(35.0),
        "result time of a call that never started"
    );
    assert_eq!(timeline.calls[1].outcome.as_deref(), Some("blocked"));
    assert_eq!(timeline.end_ms, 450.5);
    assert_eq!(timeline.savings().saved_ms(), 300.0);
}

#[test]
fn report_parse_errors_are_reported() {
    let error = Timeline::from_report_json("{\"requests\": 3}").unwrap_err().to_string();
    assert!(error.starts_with("not a replay report"), "{error}");
}

#[test]
fn formats_milliseconds() {
    assert_eq!(format_ms(0.0), "0");
    assert_eq!(format_ms(300.0), "300");
    assert_eq!(format_ms(1234.567), "1235");
    assert_eq!(format_ms(12.34), "12.3");
    assert_eq!(format_ms(1.5), "1.5");
    assert_eq!(format_ms(0.126), "0.13");
    assert_eq!(format_ms(-0.0001), "0");
}
