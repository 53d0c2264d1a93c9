use headstart_core::{AssistantMessage, ContentBlock, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage};
use headstart_core::{Message, UserMessage};
use headstart_store::SqliteStore;

use super::*;

fn fragment(turn: &str, call: Option<&str>, stop: StopReason) -> AssistantMessage {
    let mut content = vec![ContentBlock::text(format!("text of {turn}"))];
    content.extend(call.map(|id| {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: ToolArguments::default(),
            provider_async: false,
        })
    }));
    AssistantMessage {
        turn_id: turn.into(),
        stop_reason: stop,
        content,
        usage: Usage::default(),
        model: None,
        error_message: None,
    }
}

fn result(id: &str, text: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "t".into(),
        content: vec![ContentBlock::text(text)],
        details: serde_json::Value::Null,
        is_error: false,
        terminate: false,
        ready_during: None,
    }
}

/// The cached context brought up to date, checked against a fresh read of the whole log.
async fn checked(
    cached: Option<SessionContext>,
    store: &SqliteStore,
    session: &SessionId,
    expected_next: u32,
) -> SessionContext {
    let context = SessionContext::refreshed(cached, store, session)
        .await
        .expect("refresh");
    let fresh = store.model_context(session).await.expect("fresh read");
    assert_eq!(context.context().to_vec(), fresh);
    assert_eq!(context.next_request(), expected_next);
    context
}

/// After every write, the cached context brought up to date equals a fresh read of the whole log, and its next
/// request number is one past the highest stored: through responses with early results, a user prompt, and a result
/// written late for an older response (what recovery writes), which the cache cannot extend in place.
#[tokio::test]
async fn the_cached_context_equals_a_fresh_read_after_every_write() {
    let store = SqliteStore::open_in_memory().expect("store");
    let session = store.create_session(0).await.expect("session");
    let mut cached = checked(None, &store, &session, 0).await;
    store
        .append_user(&session, &UserMessage::new("go"), 1)
        .await
        .expect("prompt");
    cached = checked(Some(cached), &store, &session, 0).await;
    for request in 0..4u32 {
        let turn = format!("turn-{request}");
        let first = fragment(&turn, Some("call_0"), StopReason::ToolUse);
        (store.commit_fragment(&session, request, &first, &[], 2))
            .await
            .expect("fragment");
        cached = checked(Some(cached), &store, &session, request + 1).await;
        let last = fragment(&turn, None, StopReason::ToolUse);
        store
            .commit_fragment(&session, request, &last, &[], 3)
            .await
            .expect("terminal fragment");
        store
            .append_tool_result(&session, request, &result("call_0", &turn), None, 4)
            .await
            .expect("result");
        cached = checked(Some(cached), &store, &session, request + 1).await;
    }
    store
        .append_user(&session, &UserMessage::new("more"), 5)
        .await
        .expect("prompt");
    cached = checked(Some(cached), &store, &session, 4).await;
    // A call of request 4 gets its result only after response 5 began.
    let unanswered = fragment("turn-4", Some("call_9"), StopReason::ToolUse);
    (store.commit_fragment(&session, 4, &unanswered, &[], 6))
        .await
        .expect("fragment");
    store
        .commit_fragment(&session, 5, &fragment("turn-5", None, StopReason::Stop), &[], 7)
        .await
        .expect("answer");
    store
        .append_tool_result(&session, 4, &result("call_9", "interrupted"), None, 8)
        .await
        .expect("late result");
    let context = checked(Some(cached), &store, &session, 6).await;
    let roles: Vec<&str> = context.context().iter().map(Message::role).collect();
    assert_eq!(
        &roles[roles.len() - 4..],
        ["user", "assistant", "tool_result", "assistant"]
    );
}

fn empty(session: &str) -> SessionContext {
    SessionContext {
        session: SessionId::from(session),
        builder: ContextBuilder::new(),
        seq: 0,
        next_request: 0,
    }
}

#[test]
fn the_cache_keeps_the_sessions_used_last_and_hands_each_out_once() {
    let cache = ContextCache::new(2);
    for session in ["a", "b", "c"] {
        cache.put(empty(session));
    }
    assert!(
        cache.take(&SessionId::from("a")).is_none(),
        "the least recently used went first"
    );
    assert!(cache.take(&SessionId::from("b")).is_some());
    assert!(cache.take(&SessionId::from("b")).is_none(), "taken out while in use");
    let none = ContextCache::new(0);
    none.put(empty("a"));
    assert!(none.take(&SessionId::from("a")).is_none());
}
