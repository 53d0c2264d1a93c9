//! Each invariant breaks on a session made to break it, and a sound session breaks none, checked from the store, a
//! wrapped response and a report.

use std::sync::Arc;

use headstart::core::model::{ContentBlock, Usage};
use headstart::store::{RunOutcome, RunState};
use headstart::{AgentStop, Message, ResponseOutcome, Role, StopReason};
use headstart_timeline::report::{EventReport, Ms, ToolRunReport, TranscriptEntry};
use serde_json::json;

use super::*;
use crate::fixtures::stored::{self, tool_call, tool_run, user, with_usage};

fn fragment(seq: u64, at_us: i64, calls: &[&str], input_tokens: u64) -> StoredMessage {
    let content = calls
        .iter()
        .map(|id| ContentBlock::ToolCall(tool_call(id, json!({}))))
        .collect();
    let usage = Usage {
        input: input_tokens,
        ..Usage::default()
    };
    with_usage(stored::fragment(seq, 0, at_us, StopReason::ToolUse, content), usage)
}

fn result(seq: u64, at_us: i64, id: &str) -> StoredMessage {
    stored::result(seq, at_us, id, "ok", false)
}

fn run(id: &str, fragment_seq: u64, started_at_us: Option<i64>, result_seq: u64) -> ToolRun {
    let outcome = if started_at_us.is_some() {
        RunOutcome::Finished
    } else {
        RunOutcome::Skipped
    };
    ToolRun {
        result_seq: Some(result_seq),
        ..tool_run(id, 0, fragment_seq, 10_000, started_at_us, Some(50_000), Some(outcome))
    }
}

/// A response that stored c1 early (executed) and c2 in its terminal fragment (never executed).
fn session() -> (Vec<StoredMessage>, Vec<ToolRun>) {
    let log = vec![
        user(1, 0, "go"),
        fragment(2, 10_000, &["c1"], 0),
        result(3, 50_000, "c1"),
        fragment(4, 60_000, &["c2"], 5),
        result(5, 61_000, "c2"),
    ];
    let runs = vec![run("c1", 2, Some(10_000), 3), run("c2", 4, None, 5)];
    (log, runs)
}

fn message_end(stored: &StoredMessage) -> [AgentEvent; 2] {
    [
        AgentEvent::MessageStart {
            role: Role::of(&stored.message),
        },
        AgentEvent::MessageEnd {
            seq: Some(stored.seq),
            message: Arc::new(stored.message.clone()),
        },
    ]
}

fn start(id: &str) -> AgentEvent {
    AgentEvent::ToolExecutionStart {
        call: Arc::new(tool_call(id, json!({}))),
    }
}

fn end(id: &str) -> AgentEvent {
    AgentEvent::ToolExecutionEnd {
        tool_call_id: id.to_owned(),
        is_error: false,
        outcome: None,
    }
}

/// The events of [`session`] as `Engine::wrap` emits them: 0 `turn_start`; 1–2 fragment #2; 3 start c1; 4–5
/// fragment #4; 6 start c2, 7 end c2, 8–9 its result; 10 end c1, 11–12 its result; 13 `turn_end`.
fn turn_events(log: &[StoredMessage]) -> Vec<AgentEvent> {
    let mut events = vec![AgentEvent::ResponseStart { request: 0 }];
    events.extend(message_end(&log[1]));
    events.push(start("c1"));
    events.extend(message_end(&log[3]));
    events.push(start("c2"));
    events.push(end("c2"));
    events.extend(message_end(&log[4]));
    events.push(end("c1"));
    events.extend(message_end(&log[2]));
    events.push(AgentEvent::ResponseEnd {
        request: 0,
        outcome: {
            let mut outcome = ResponseOutcome::new(StopReason::ToolUse, 2);
            outcome.committed_prefixes = 1;
            outcome
        },
    });
    events
}

fn report_of(log: &[StoredMessage], runs: &[ToolRun], events: &[AgentEvent]) -> Report {
    let mut report = Report::failed("s", "unused");
    report.error = None;
    report.transcript = log
        .iter()
        .map(|stored| TranscriptEntry::from_stored(stored, true))
        .collect();
    report.tool_runs = runs.iter().map(|run| ToolRunReport::from_run(run, true)).collect();
    report.events = events
        .iter()
        .map(|event| EventReport::from_event(event, Ms(0.0)))
        .collect();
    report
}

#[test]
fn a_sound_session_breaks_nothing() {
    let (log, runs) = session();
    let events = turn_events(&log);
    assert_eq!(check_log(&log, &runs), []);
    assert_eq!(check_turn(&log, &runs, &events), []);
    let mut run_events = events;
    run_events.push(AgentEvent::AgentEnd {
        stop: AgentStop::Completed,
    });
    assert_eq!(check_report(&report_of(&log, &runs, &run_events)), []);
}

#[test]
fn each_transcript_rule_can_fail() {
    type Break = fn(&mut Vec<StoredMessage>, &mut Vec<ToolRun>);
    let cases: [(Break, InvariantViolation); 11] = [
        (
            |log, _| log[2].seq = 7,
            InvariantViolation::SequenceGap { position: 2, seq: 7 },
        ),
        (
            |_, runs| runs[0].started_at_us = Some(9_000),
            InvariantViolation::StartedBeforeOwner {
                call_id: "c1".into(),
                started_ms: 9.0,
                owner_ms: 10.0,
            },
        ),
        (
            |_, runs| runs[0].fragment_seq = 4,
            InvariantViolation::WrongOwner {
                call_id: "c1".into(),
                recorded: 4,
                holder: 2,
            },
        ),
        (
            |log, _| log[3] = fragment(4, 60_000, &["c2", "c1"], 5),
            InvariantViolation::CallStoredTwice { call_id: "c1".into() },
        ),
        (
            |log, _| log[4] = result(5, 61_000, "c1"),
            InvariantViolation::ResultCount {
                call_id: "c1".into(),
                results: 2,
            },
        ),
        (
            |log, _| log.swap(1, 2),
            InvariantViolation::ResultWithoutCall { call_id: "c1".into() },
        ),
        (
            |_, runs| runs.push(run("c2", 4, None, 5)),
            InvariantViolation::AdmittedTwice { call_id: "c2".into() },
        ),
        (
            |_, runs| runs.push(run("c9", 4, None, 5)),
            InvariantViolation::AdmittedWithoutOwner { call_id: "c9".into() },
        ),
        (
            |_, runs| runs[1].state = RunState::Admitted,
            InvariantViolation::Unsettled { call_id: "c2".into() },
        ),
        (
            |_, runs| runs[1].result_seq = None,
            InvariantViolation::RunResultMismatch {
                call_id: "c2".into(),
                recorded: None,
                stored: 5,
            },
        ),
        (
            |log, _| log[1] = fragment(2, 10_000, &["c1"], 3),
            InvariantViolation::PrefixUsage {
                request: Some(0),
                seq: 2,
                total: 3,
            },
        ),
    ];
    for (break_it, expected) in cases {
        let (mut log, mut runs) = session();
        break_it(&mut log, &mut runs);
        let found = check_log(&log, &runs);
        assert!(found.contains(&expected), "expected {expected} among {found:?}");
    }
}

#[test]
fn a_started_call_without_owner_and_a_second_turn_id_are_found() {
    let (mut log, mut runs) = session();
    runs.push(run("c9", 2, Some(20_000), 5));
    if let Message::Assistant(fragment) = &mut log[3].message {
        fragment.turn_id = "turn-x".to_owned();
    }
    let found = check_log(&log, &runs);
    assert!(found.contains(&InvariantViolation::StartedWithoutOwner { call_id: "c9".into() }));
    assert!(found.contains(&InvariantViolation::TurnIds {
        request: Some(0),
        turn_ids: vec!["turn-0".into(), "turn-x".into()],
    }));
}

#[test]
fn each_event_rule_can_fail() {
    type Break = fn(&mut Vec<AgentEvent>);
    let cases: [(Break, InvariantViolation); 8] = [
        (
            |events| {
                events.remove(0);
            },
            InvariantViolation::EventNotFirst {
                event: "turn_start",
                first: Some("message_start".into()),
            },
        ),
        (
            |events| events.push(AgentEvent::ResponseStart { request: 1 }),
            InvariantViolation::EventCount {
                event: "turn_start",
                count: 2,
            },
        ),
        (
            |events| {
                events.pop();
            },
            InvariantViolation::EventNotLast {
                event: "turn_end",
                last: Some("message_end".into()),
            },
        ),
        (
            |events| events.insert(4, end("c1")),
            InvariantViolation::ToolEventCount {
                call_id: "c1".into(),
                starts: 1,
                ends: 2,
            },
        ),
        (
            |events| events.swap(3, 10),
            InvariantViolation::EndBeforeStart {
                call_id: "c1".into(),
                start: 10,
                end: 3,
            },
        ),
        (
            |events| events.swap(10, 12),
            InvariantViolation::ResultNotAfterEnd {
                call_id: "c1".into(),
                end: 12,
            },
        ),
        (
            |events| {
                let moved = events.remove(3);
                events.insert(2, moved);
            },
            InvariantViolation::StartedBeforeMessageEnd { call_id: "c1".into() },
        ),
        (
            |events| events.swap(7, 8),
            InvariantViolation::NotExecutedApart {
                call_id: "c2".into(),
                start: 6,
                end: 8,
            },
        ),
    ];
    let (log, runs) = session();
    for (break_it, expected) in cases {
        let mut events = turn_events(&log);
        break_it(&mut events);
        let found = check_turn(&log, &runs, &events);
        assert!(found.contains(&expected), "expected {expected} among {found:?}");
    }
}

#[test]
fn a_report_needs_a_single_last_agent_end() {
    let (log, runs) = session();
    let events = turn_events(&log);
    let found = check_report(&report_of(&log, &runs, &events));
    assert!(found.contains(&InvariantViolation::EventCount {
        event: "agent_end",
        count: 0,
    }));
    assert!(found.contains(&InvariantViolation::EventNotLast {
        event: "agent_end",
        last: Some("turn_end".into()),
    }));
}

#[test]
fn a_result_delivered_twice_or_moved_is_found_and_a_provider_async_one_delivered_late_is_not() {
    let call = |seq, request, id: &str, provider_async| {
        let mut call = tool_call(id, json!({}));
        call.provider_async = provider_async;
        stored::fragment(seq, request, 0, StopReason::ToolUse, vec![ContentBlock::ToolCall(call)])
    };
    let answered = |seq, request, id| StoredMessage {
        request: Some(request),
        ..stored::result(seq, 0, id, "ok", false)
    };
    let text = |seq, request| stored::fragment(seq, request, 0, StopReason::Stop, vec![ContentBlock::text("hi")]);
    // c1's result comes after requests 1 and 2 began: request 3 would find it beside c1, before request 1's answer,
    // where request 2 saw that answer.
    for (provider_async, broken) in [(false, true), (true, false)] {
        let log = vec![
            user(1, 0, "go"),
            call(2, 0, "c1", provider_async),
            text(3, 1),
            text(4, 2),
            answered(5, 0, "c1"),
            text(6, 3),
        ];
        let violations = check_delivery(&log);
        let expected = if broken {
            vec![InvariantViolation::ContextRewritten { request: 3, at: 2 }]
        } else {
            vec![]
        };
        assert_eq!(violations, expected, "provider-async: {provider_async}");
    }
}
