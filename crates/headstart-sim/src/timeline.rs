//! The timeline's data model: model requests and tool calls on one time axis, built from a stored session or from
//! a replay report, and the comparison with end-of-stream batching. Pure: no I/O, no clock.

use std::collections::HashMap;

use headstart::store::{StoredMessage, ToolRun};
use headstart::Message;

use crate::report::{Report, ReportError, TranscriptEntry};

/// Everything the picture shows. Times are milliseconds since the first request began.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// What the picture is of (a session id or a scenario name).
    pub title: String,
    /// Model requests, in order.
    pub requests: Vec<RequestSpan>,
    /// Admitted tool calls, in admission order.
    pub calls: Vec<CallSpan>,
    /// When the run ended (the last thing that happened).
    pub end_ms: f64,
}

/// One model request: its stream and the fragments it committed.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpan {
    /// 0-based request index.
    pub request: u32,
    /// When the request began.
    pub start_ms: f64,
    /// When the stream ended (its last fragment was committed), if it produced any.
    pub stream_end_ms: Option<f64>,
    /// When each fragment became durable, in commit order.
    pub fragments_ms: Vec<f64>,
    /// The response's stop reason (`tool_use`, `stop`, …), if known.
    pub stop_reason: Option<String>,
}

/// One admitted tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpan {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The model request whose response holds the call.
    pub request: u32,
    /// When it was admitted (committed with its fragment).
    pub admitted_ms: f64,
    /// When `execute` began, if it did.
    pub started_ms: Option<f64>,
    /// When its result was written, if it was (also for calls that never started).
    pub ended_ms: Option<f64>,
    /// How it ended, in the report's vocabulary (`finished`, `error`, …); `None` while unfinished.
    pub outcome: Option<String>,
}

impl CallSpan {
    /// `true` when `execute` began.
    pub fn executed(&self) -> bool {
        self.started_ms.is_some()
    }

    /// How long `execute` ran, for calls that started and ended.
    pub fn duration_ms(&self) -> Option<f64> {
        match (self.started_ms, self.ended_ms) {
            (Some(start), Some(end)) => Some((end - start).max(0.0)),
            _ => None,
        }
    }
}

/// One request compared with end-of-stream batching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSavings {
    /// The request index.
    pub request: u32,
    /// When its stream ended (its start when it produced nothing).
    pub stream_end_ms: f64,
    /// When the stream had ended and every call of the request had its result.
    pub actual_settle_ms: f64,
    /// When it would have settled with end-of-stream batching ([`Timeline::batching_run`]).
    pub batching_settle_ms: f64,
}

impl RequestSavings {
    /// Time early execution saved on this request (never negative).
    pub fn saved_ms(&self) -> f64 {
        (self.batching_settle_ms - self.actual_settle_ms).max(0.0)
    }
}

/// The whole run compared with end-of-stream batching.
#[derive(Debug, Clone, PartialEq)]
pub struct Savings {
    /// Per request, in order.
    pub requests: Vec<RequestSavings>,
    /// When the run actually ended.
    pub actual_end_ms: f64,
    /// When it would have ended with batching: every request's delay pushes the later requests back.
    pub batching_end_ms: f64,
}

impl Savings {
    /// Time saved over the whole run.
    pub fn saved_ms(&self) -> f64 {
        (self.batching_end_ms - self.actual_end_ms).max(0.0)
    }

    /// The saving as a share of the batching time, in percent.
    pub fn saved_percent(&self) -> f64 {
        if self.batching_end_ms > 0.0 {
            100.0 * self.saved_ms() / self.batching_end_ms
        } else {
            0.0
        }
    }
}

impl Timeline {
    /// Builds the timeline of a stored session from its durable log and its tool runs (`TranscriptStore::load_log`
    /// and `tool_runs`).
    ///
    /// Request starts are not stored; they are derived: a request starts at the latest time of anything written
    /// before its first fragment (request 0: the user message; request r > 0: the last fragment or result of
    /// request r − 1). Time 0 is the start of the first request.
    pub fn from_store(title: impl Into<String>, log: &[StoredMessage], runs: &[ToolRun]) -> Timeline {
        let mut requests: Vec<RequestSpan> = Vec::new();
        let mut index_of: HashMap<u32, usize> = HashMap::new();
        let mut latest_before: Option<i64> = None;
        let mut starts_us: Vec<i64> = Vec::new();
        let mut fragments_us: Vec<Vec<i64>> = Vec::new();
        for stored in log {
            if let (Message::Assistant(assistant), Some(request)) = (&stored.message, stored.request) {
                let slot = *index_of.entry(request).or_insert_with(|| {
                    requests.push(RequestSpan {
                        request,
                        start_ms: 0.0,
                        stream_end_ms: None,
                        fragments_ms: Vec::new(),
                        stop_reason: None,
                    });
                    starts_us.push(latest_before.unwrap_or(stored.at_us));
                    fragments_us.push(Vec::new());
                    requests.len() - 1
                });
                fragments_us[slot].push(stored.at_us);
                requests[slot].stop_reason = Some(assistant.stop_reason.as_str().to_owned());
            }
            latest_before = Some(latest_before.map_or(stored.at_us, |latest| latest.max(stored.at_us)));
        }
        let origin_us = starts_us
            .first()
            .copied()
            .or_else(|| log.first().map(|stored| stored.at_us))
            .or_else(|| runs.iter().map(|run| run.admitted_at_us).min())
            .unwrap_or(0);
        let ms = |us: i64| us_to_ms(us - origin_us);
        for ((span, start), fragments) in requests.iter_mut().zip(&starts_us).zip(&fragments_us) {
            span.start_ms = ms(*start);
            span.fragments_ms = fragments.iter().map(|&us| ms(us)).collect();
            span.stream_end_ms = span.fragments_ms.last().copied();
        }
        let calls: Vec<CallSpan> = runs
            .iter()
            .map(|run| CallSpan {
                id: run.call_id.clone(),
                name: run.tool_name.clone(),
                request: run.request,
                admitted_ms: ms(run.admitted_at_us),
                started_ms: run.started_at_us.map(ms),
                ended_ms: run.ended_at_us.map(ms),
                outcome: run.outcome.map(|outcome| outcome.as_str().to_owned()),
            })
            .collect();
        let end_ms = log
            .iter()
            .map(|stored| ms(stored.at_us))
            .chain(calls.iter().flat_map(CallSpan::times))
            .fold(0.0, f64::max);
        Timeline {
            title: title.into(),
            requests,
            calls,
            end_ms,
        }
    }

    /// Builds the timeline of a replay report (`headstart replay` output, `docs/scenario-format.md`).
    pub fn from_report_json(text: &str) -> Result<Timeline, ReportError> {
        Report::from_json(text).map(|report| Timeline::from_report(&report))
    }

    /// Builds the timeline of a replay report.
    pub fn from_report(report: &Report) -> Timeline {
        let mut fragments: HashMap<u32, Vec<f64>> = HashMap::new();
        let mut result_at: HashMap<&str, f64> = HashMap::new();
        for entry in &report.transcript {
            match entry {
                TranscriptEntry::Assistant {
                    request: Some(request),
                    at_ms,
                    ..
                } => fragments.entry(*request).or_default().push(at_ms.0),
                TranscriptEntry::ToolResult {
                    tool_call_id, at_ms, ..
                } => {
                    result_at.insert(tool_call_id, at_ms.0);
                }
                _ => {}
            }
        }
        let requests = report
            .requests
            .iter()
            .map(|request| {
                let fragments_ms = fragments.remove(&request.request).unwrap_or_default();
                RequestSpan {
                    request: request.request,
                    start_ms: request.started_ms.0,
                    stream_end_ms: request
                        .stream_end_ms
                        .map(|ms| ms.0)
                        .or_else(|| fragments_ms.last().copied()),
                    fragments_ms,
                    stop_reason: request.stop_reason.map(|reason| reason.as_str().to_owned()),
                }
            })
            .collect();
        let calls = report
            .tool_runs
            .iter()
            .map(|run| CallSpan {
                id: run.id.clone(),
                name: run.name.clone(),
                request: run.request,
                admitted_ms: run.admitted_ms.0,
                started_ms: run.started_ms.map(|ms| ms.0),
                ended_ms: run
                    .ended_ms
                    .map(|ms| ms.0)
                    .or_else(|| result_at.get(run.id.as_str()).copied()),
                outcome: run.outcome.map(|outcome| outcome.as_str().to_owned()),
            })
            .collect();
        Timeline {
            title: report.scenario.clone(),
            requests,
            calls,
            end_ms: report.end_ms.0,
        }
    }

    /// The calls of request `request`, in admission order.
    pub fn calls_of(&self, request: u32) -> impl Iterator<Item = &CallSpan> {
        self.calls.iter().filter(move |call| call.request == request)
    }

    /// The latest time anything in the timeline happened (at least `end_ms`).
    pub fn last_ms(&self) -> f64 {
        let requests = self
            .requests
            .iter()
            .flat_map(|request| std::iter::once(request.start_ms).chain(request.stream_end_ms));
        let calls = self.calls.iter().flat_map(CallSpan::times);
        requests.chain(calls).fold(self.end_ms, f64::max)
    }

    /// Where end-of-stream batching would have run `call` (start, end), when that differs from what happened: a
    /// call that started before its response's stream ended would have started at the stream end instead, with
    /// its measured duration.
    ///
    /// Calls keep their times (`None`) when they started at or after the stream end (sync calls, queued calls),
    /// never executed, were cut short by cancellation (their measured duration is not theirs), or belong to a
    /// response that ended in `error`/`aborted` (batching would not have run them at all).
    pub fn batching_run(&self, call: &CallSpan) -> Option<(f64, f64)> {
        let request = self.requests.iter().find(|request| request.request == call.request)?;
        if matches!(request.stop_reason.as_deref(), Some("error" | "aborted")) {
            return None;
        }
        if call.outcome.as_deref() == Some("cancelled") {
            return None;
        }
        let stream_end = request.stream_end_ms?;
        let (start, duration) = (call.started_ms?, call.duration_ms()?);
        (start < stream_end).then_some((stream_end, stream_end + duration))
    }

    /// Compares the run with end-of-stream batching computed from the same data.
    ///
    /// Per request, batching would start every early call at the stream end instead ([`Timeline::batching_run`]);
    /// every other call keeps its end, no earlier than the stream end. The request's settle time is the latest of
    /// the stream end and its calls' ends. Each request's delay pushes every later request back, so the batching
    /// run ends the sum of the per-request savings after the actual one.
    pub fn savings(&self) -> Savings {
        let requests: Vec<RequestSavings> = self
            .requests
            .iter()
            .map(|request| {
                let stream_end = request.stream_end_ms.unwrap_or(request.start_ms);
                let mut actual = stream_end;
                let mut batching = stream_end;
                for call in self.calls_of(request.request) {
                    let actual_end = call.ended_ms.or(call.started_ms).unwrap_or(call.admitted_ms);
                    actual = actual.max(actual_end);
                    let batching_end = match self.batching_run(call) {
                        Some((_, end)) => end,
                        None => actual_end.max(stream_end),
                    };
                    batching = batching.max(batching_end);
                }
                RequestSavings {
                    request: request.request,
                    stream_end_ms: stream_end,
                    actual_settle_ms: actual,
                    batching_settle_ms: batching.max(actual),
                }
            })
            .collect();
        let actual_end_ms = self.last_ms();
        let saved: f64 = requests.iter().map(RequestSavings::saved_ms).sum();
        Savings {
            requests,
            actual_end_ms,
            batching_end_ms: actual_end_ms + saved,
        }
    }
}

impl CallSpan {
    fn times(&self) -> impl Iterator<Item = f64> {
        std::iter::once(self.admitted_ms)
            .chain(self.started_ms)
            .chain(self.ended_ms)
    }
}

/// Microseconds to milliseconds.
fn us_to_ms(us: i64) -> f64 {
    // i64 → f64 is exact for any span a transcript can hold (< 2^53 µs ≈ 285 years).
    #[allow(clippy::cast_precision_loss)]
    let us = us as f64;
    us / 1000.0
}

/// Formats milliseconds for people: whole values without decimals, small values with up to two.
pub fn format_ms(ms: f64) -> String {
    let text = if ms.abs() >= 100.0 || ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else if ms.abs() >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    if text == "-0" {
        "0".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headstart::core::model::{AssistantMessage, ContentBlock, ToolResultMessage, Usage};
    use headstart::store::{RunOutcome, RunState};
    use headstart::{StopReason, UserMessage};
    use serde_json::Value;

    fn fragment(seq: u64, request: u32, at_us: i64, stop: StopReason) -> StoredMessage {
        StoredMessage {
            seq,
            request: Some(request),
            at_us,
            message: Message::Assistant(AssistantMessage {
                turn_id: format!("turn-{request}"),
                stop_reason: stop,
                content: vec![ContentBlock::text("x")],
                usage: Usage::default(),
                model: None,
                error_message: None,
            }),
        }
    }

    fn user(seq: u64, at_us: i64) -> StoredMessage {
        StoredMessage {
            seq,
            request: None,
            at_us,
            message: Message::User(UserMessage::new("go")),
        }
    }

    fn result(seq: u64, id: &str, at_us: i64) -> StoredMessage {
        StoredMessage {
            seq,
            request: None,
            at_us,
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: id.to_owned(),
                tool_name: "lookup".to_owned(),
                content: vec![ContentBlock::text("ok")],
                details: Value::Null,
                is_error: false,
                terminate: false,
            }),
        }
    }

    fn run(id: &str, request: u32, admitted: i64, started: Option<i64>, ended: Option<i64>) -> ToolRun {
        ToolRun {
            call_id: id.to_owned(),
            tool_name: "lookup".to_owned(),
            request,
            fragment_seq: 2,
            state: if ended.is_some() {
                RunState::Finished
            } else {
                RunState::Started
            },
            outcome: ended.map(|_| RunOutcome::Finished),
            admitted_at_us: admitted,
            started_at_us: started,
            ended_at_us: ended,
            result_seq: None,
        }
    }

    /// Scenario 01's shape on an absolute clock: the user message at 1 s, two early calls, a second request.
    fn two_request_session() -> (Vec<StoredMessage>, Vec<ToolRun>) {
        let base = 1_000_000;
        let log = vec![
            user(1, base),
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
    fn later_request_starts_at_a_result_written_after_the_stream_end() {
        let log = vec![
            user(1, 0),
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
        // A sync call runs after the stream end; an early call ran and partly overlapped the stream.
        let log = vec![user(1, 0), fragment(2, 0, 200_000, StopReason::ToolUse)];
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
        let log = vec![user(1, 0), fragment(2, 0, 10_000, StopReason::ToolUse)];
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
        let log = vec![user(1, 0), fragment(2, 0, 150_000, StopReason::ToolUse)];
        let mut cancelled = run("h1", 0, 10_000, Some(10_000), Some(150_000));
        cancelled.outcome = Some(RunOutcome::Cancelled);
        let timeline = Timeline::from_store("s", &log, &[cancelled]);
        assert_eq!(timeline.batching_run(&timeline.calls[0]), None);
        assert_eq!(timeline.savings().saved_ms(), 0.0);

        let log = vec![user(1, 0), fragment(2, 0, 100_000, StopReason::Error)];
        let runs = vec![run("c1", 0, 10_000, Some(10_000), Some(60_000))];
        let timeline = Timeline::from_store("s", &log, &runs);
        assert_eq!(timeline.batching_run(&timeline.calls[0]), None);
        assert_eq!(timeline.savings().saved_ms(), 0.0);
    }

    #[test]
    fn unfinished_and_unstarted_calls_do_not_break_the_comparison() {
        let log = vec![user(1, 0), fragment(2, 0, 50_000, StopReason::ToolUse)];
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
}
