//! Builders of the records the suite writes, shared with the backends' own tests.

use headstart_core::model::{
    AssistantMessage, ContentBlock, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage, UserMessage,
};
use serde_json::Value;

use crate::types::{AdmittedCall, CallKey, RunEnd, RunOutcome, RunState, SessionId};
use crate::{StoreError, TranscriptStore};

/// A call `id` to tool `name`, with arguments `{"q": id}`.
pub fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: ToolArguments::parse(&format!(r#"{{"q": "{id}"}}"#)),
        provider_async: false,
    }
}

/// An assistant fragment: `text`, then `calls`.
pub fn fragment(
    turn_id: &str,
    stop_reason: StopReason,
    text: &str,
    calls: &[ToolCall],
    usage: Usage,
) -> AssistantMessage {
    let mut content = vec![ContentBlock::text(text)];
    content.extend(calls.iter().cloned().map(ContentBlock::ToolCall));
    AssistantMessage {
        turn_id: turn_id.to_owned(),
        stop_reason,
        content,
        usage,
        model: None,
        error_message: None,
    }
}

/// A prefix fragment (zero usage, stopped for tool use).
pub fn prefix(turn_id: &str, text: &str, calls: &[ToolCall]) -> AssistantMessage {
    fragment(turn_id, StopReason::ToolUse, text, calls, Usage::default())
}

/// The admission records of `calls`, in that order.
pub fn admit(calls: &[&ToolCall]) -> Vec<AdmittedCall> {
    calls
        .iter()
        .map(|call| AdmittedCall {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            sealed_at_us: None,
        })
        .collect()
}

/// The key of call `id` of request 0, where [`commit_one`] and [`commit_two`] put their calls.
pub fn key(id: &str) -> CallKey {
    CallKey::new(0, id)
}

/// A successful result of `call` with `text`.
pub fn result(call: &ToolCall, text: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: vec![ContentBlock::text(text)],
        details: Value::Null,
        is_error: false,
        terminate: false,
        ready_during: None,
    }
}

/// The run end of a call that finished, having started at `started_at_us`.
pub fn finished(started_at_us: Option<i64>) -> Option<RunEnd> {
    Some(RunEnd {
        state: RunState::Finished,
        outcome: RunOutcome::Finished,
        started_at_us,
    })
}

/// A new session holding the user prompt "go" (seq 1).
pub async fn store_with_session<S: TranscriptStore + ?Sized>(store: &S) -> SessionId {
    let session = store.create_session(1).await.expect("create session");
    store
        .append_user(&session, &UserMessage::new("go"), 2)
        .await
        .expect("append user");
    session
}

/// Commits a prefix fragment of request 0 holding call `id` (tool `lookup`), admitting it.
pub async fn commit_one<S: TranscriptStore + ?Sized>(
    store: &S,
    session: &SessionId,
    id: &str,
) -> Result<u64, StoreError> {
    let c = call(id, "lookup");
    store
        .commit_fragment(
            session,
            0,
            &prefix("turn-x", "t", std::slice::from_ref(&c)),
            &admit(&[&c]),
            10,
        )
        .await
}

/// Commits a prefix fragment of request 0 holding calls `a` and `b` (tool `lookup`), admitting both; returns them.
pub async fn commit_two<S: TranscriptStore + ?Sized>(store: &S, session: &SessionId) -> (ToolCall, ToolCall) {
    let (a, b) = (call("a", "lookup"), call("b", "lookup"));
    store
        .commit_fragment(
            session,
            0,
            &prefix("t", "x", &[a.clone(), b.clone()]),
            &admit(&[&a, &b]),
            10,
        )
        .await
        .expect("commit");
    (a, b)
}
