use super::*;
use crate::model::{ContentBlock, StopReason, ToolArguments, ToolCall, Usage, UserMessage};

/// A fragment of response `turn` with one call per id (also the incremental builder's tests').
pub(super) fn fragment(turn: &str, calls: &[&str], stop: StopReason, usage: u64) -> Message {
    Message::Assistant(AssistantMessage {
        turn_id: turn.into(),
        stop_reason: stop,
        content: calls
            .iter()
            .map(|id| {
                ContentBlock::ToolCall(ToolCall {
                    id: (*id).into(),
                    name: "t".into(),
                    arguments: ToolArguments::default(),
                    provider_async: false,
                })
            })
            .collect(),
        usage: Usage {
            input: usage,
            ..Usage::default()
        },
        model: None,
        error_message: None,
    })
}

/// Marks every call of an assistant `message` provider-async.
pub(super) fn mark_provider_async(message: &mut Message) {
    if let Message::Assistant(fragment) = message {
        for block in &mut fragment.content {
            if let ContentBlock::ToolCall(call) = block {
                call.provider_async = true;
            }
        }
    }
}

fn result(id: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "t".into(),
        content: vec![ContentBlock::text(id)],
        details: serde_json::Value::Null,
        is_error: false,
        terminate: false,
        ready_during: None,
    })
}

#[test]
fn fragments_merge_and_results_follow_in_call_order() {
    let log = vec![
        Message::User(UserMessage::new("go")),
        fragment("r0", &["c1"], StopReason::ToolUse, 0),
        fragment("r0", &["c2"], StopReason::ToolUse, 0),
        result("c2"),
        result("c1"),
        fragment("r0", &[], StopReason::ToolUse, 60),
        fragment("r1", &[], StopReason::Stop, 35),
    ];
    let context = model_context(&log);
    let roles: Vec<&str> = context.iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "tool_result", "tool_result", "assistant"]);
    let Message::Assistant(first) = &context[1] else {
        panic!()
    };
    let ids: Vec<&str> = first.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    assert_eq!(first.usage.total(), 60);
    let Message::ToolResult(r) = &context[2] else { panic!() };
    assert_eq!(r.tool_call_id, "c1");
}

/// The canonical context of `log` (messages with their requests), each result by its text, other messages by role.
fn shown(log: &[(Option<u32>, Message)]) -> Vec<String> {
    model_context_by_request(log.iter().map(|(request, message)| (*request, message)))
        .iter()
        .map(|message| match message {
            Message::ToolResult(_) => result_text(message),
            other => other.role().to_owned(),
        })
        .collect()
}

fn result_text(message: &Message) -> String {
    let Message::ToolResult(result) = message else {
        panic!("not a result: {message:?}")
    };
    result.text()
}

/// A result of call `id` saying `text`.
pub(super) fn result_with(id: &str, text: &str) -> Message {
    let Message::ToolResult(mut result) = result(id) else {
        unreachable!()
    };
    result.content = vec![ContentBlock::text(text)];
    Message::ToolResult(result)
}

#[test]
fn a_call_id_repeated_by_each_response_keeps_each_result_with_its_own_call() {
    let log = vec![
        (None, Message::User(UserMessage::new("go"))),
        (Some(0), fragment("r0", &["call_0"], StopReason::ToolUse, 1)),
        (Some(0), result_with("call_0", "first")),
        (Some(1), fragment("r1", &["call_0"], StopReason::ToolUse, 2)),
        (Some(1), fragment("r1", &[], StopReason::ToolUse, 2)),
        // Written after a later fragment of its own response.
        (Some(1), result_with("call_0", "second")),
        (Some(2), fragment("r2", &["call_0"], StopReason::ToolUse, 3)),
        (Some(2), result_with("call_0", "third")),
    ];
    let shape = shown(&log);
    assert_eq!(
        shape,
        [
            "user",
            "assistant",
            "first",
            "assistant",
            "second",
            "assistant",
            "third"
        ]
    );

    // The stored request decides, not the position: a stale result of request 0 written after response 1.
    let stale = [
        (Some(0), fragment("r0", &["call_0"], StopReason::ToolUse, 1)),
        (Some(1), fragment("r1", &["call_0"], StopReason::ToolUse, 2)),
        (Some(1), result_with("call_0", "of r1")),
        (Some(0), result_with("call_0", "of r0")),
    ];
    let context = model_context_by_request(stale.iter().map(|(request, message)| (*request, message)));
    let texts: Vec<String> = context.iter().skip(1).step_by(2).map(result_text).collect();
    assert_eq!(texts, ["of r0", "of r1"]);

    // Without requests, a result answers the most recent response before it with its id.
    let plain: Vec<Message> = log.into_iter().map(|(_, message)| message).collect();
    let texts: Vec<String> = model_context(&plain)
        .iter()
        .filter(|message| matches!(message, Message::ToolResult(_)))
        .map(result_text)
        .collect();
    assert_eq!(texts, ["first", "second", "third"]);
}

#[test]
fn one_turn_id_in_two_requests_is_two_responses() {
    let log = [
        (Some(0), fragment("same", &["call_0"], StopReason::ToolUse, 1)),
        (Some(0), result("call_0")),
        (Some(1), fragment("same", &[], StopReason::Stop, 2)),
    ];
    let roles: Vec<&str> = model_context_by_request(log.iter().map(|(request, message)| (*request, message)))
        .iter()
        .map(Message::role)
        .collect();
    assert_eq!(roles, ["assistant", "tool_result", "assistant"]);
}

#[test]
fn results_written_late_still_follow_their_response() {
    let log = vec![
        Message::User(UserMessage::new("go")),
        fragment("r0", &["c1"], StopReason::Error, 1),
        Message::User(UserMessage::new("again")),
        result("c1"),
        result("orphan"),
    ];
    let roles: Vec<&str> = model_context(&log).iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "tool_result", "user", "tool_result"]);
}

#[test]
fn a_provider_async_result_stays_where_it_was_written_once_a_later_message_came() {
    let mut asked = fragment("r0", &["a1", "s1"], StopReason::ToolUse, 1);
    mark_provider_async(&mut asked);
    let mut asked_again = fragment("r2", &["a2"], StopReason::ToolUse, 1);
    mark_provider_async(&mut asked_again);
    let log = [
        (None, Message::User(UserMessage::new("go"))),
        (Some(0), asked),
        (Some(0), result_with("s1", "sync")),
        (Some(1), fragment("r1", &[], StopReason::Stop, 1)),
        (Some(0), result_with("a1", "late")),
        (Some(2), asked_again),
        // Ready before anything else was written: it follows its call as usual.
        (Some(2), result_with("a2", "in time")),
        // The engine never writes a second result; the first one wins wherever it went.
        (Some(0), result_with("a1", "twice")),
    ];
    let shown = shown(&log);
    assert_eq!(
        shown,
        ["user", "assistant", "sync", "assistant", "late", "assistant", "in time"],
        "a1's result reached the model after r1, so it stays there; r0's own results keep their place"
    );
}

#[test]
fn a_result_ready_while_a_response_streamed_goes_after_that_response() {
    let mut asked = fragment("r0", &["a1"], StopReason::ToolUse, 1);
    mark_provider_async(&mut asked);
    let mut late = result_with("a1", "late");
    if let Message::ToolResult(result) = &mut late {
        result.ready_during = Some(1);
    }
    let log = [
        (None, Message::User(UserMessage::new("go"))),
        (Some(0), asked),
        // Written while request 1 streamed, before that response committed anything: the model of request 1 never
        // saw it, so it follows that response.
        (Some(0), late),
        (Some(1), fragment("r1", &["s1"], StopReason::ToolUse, 1)),
        (Some(1), result_with("s1", "sync")),
    ];
    let shown = shown(&log);
    assert_eq!(shown, ["user", "assistant", "assistant", "sync", "late"]);
}
