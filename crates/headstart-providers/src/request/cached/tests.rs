use headstart_core::context::ContextBuilder;
use headstart_core::UserMessage;
use headstart_core::{AssistantMessage, ContentBlock, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage};
use serde_json::json;

use super::*;

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "lookup".into(),
        arguments: ToolArguments::parse(r#"{"q": "x"}"#),
        provider_async: false,
    }
}

fn fragment(turn: &str, content: Vec<ContentBlock>, stop: StopReason) -> Message {
    Message::Assistant(AssistantMessage {
        turn_id: turn.into(),
        stop_reason: stop,
        content,
        usage: Usage::default(),
        model: None,
        error_message: None,
    })
}

fn settings(system: bool) -> RequestSettings {
    RequestSettings {
        model: "m".into(),
        system: system.then(|| "be brief".to_owned()),
        max_tokens: Some(64),
        ..RequestSettings::default()
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "lookup".into(),
        description: "looks up".into(),
        parameters: json!({"type": "object", "properties": {"messages": {"type": "array", "default": []}}}),
        provider_async: false,
    }]
}

/// A log the way the engine writes it: a prompt, responses in fragments with their results, an empty response.
fn log() -> Vec<(Option<u32>, Message)> {
    let thinking = ContentBlock::Thinking {
        thinking: "hm".into(),
        signature: Some(r#"{"type": "reasoning", "encrypted_content": "e", "id": "rs_1"}"#.into()),
    };
    let result = |id: &str| Message::ToolResult(ToolResultMessage::error(&call(id), format!("result of {id}")));
    vec![
        (None, Message::User(UserMessage::new("find \"it\""))),
        (
            Some(0),
            fragment(
                "r0",
                vec![
                    thinking,
                    ContentBlock::text("looking"),
                    ContentBlock::ToolCall(call("a")),
                ],
                StopReason::ToolUse,
            ),
        ),
        (Some(0), result("a")),
        (
            Some(0),
            fragment("r0", vec![ContentBlock::ToolCall(call("b"))], StopReason::ToolUse),
        ),
        (Some(0), result("b")),
        (Some(1), fragment("r1", vec![], StopReason::Error)),
        (None, Message::User(UserMessage::new("again"))),
        (
            Some(2),
            fragment("r2", vec![ContentBlock::text("done")], StopReason::Stop),
        ),
    ]
}

/// After every message of the log, each format's cached body is the JSON `build_body` makes.
#[test]
fn a_cached_body_is_the_same_json_as_a_whole_one_after_every_message() {
    for format in [
        WireFormat::OpenAiChat,
        WireFormat::OpenAiResponses,
        WireFormat::Anthropic,
        WireFormat::Gemini,
    ] {
        for system in [false, true] {
            let cache = BodyCache::new();
            let mut builder = ContextBuilder::new();
            for (request, message) in log() {
                builder.push(request, &message).expect("the engine's writes");
                let context = builder.context();
                let text = cache.body_text(format, &settings(system), context, &tools());
                let parsed: Value = serde_json::from_str(&text).expect("the body is JSON");
                assert_eq!(
                    parsed,
                    build_body(format, &settings(system), context, &tools()),
                    "{format:?}: {text}"
                );
            }
        }
    }
}

#[test]
fn an_unchanged_message_is_not_serialized_again_and_a_changed_one_is() {
    let cache = BodyCache::new();
    let mut builder = ContextBuilder::new();
    let log = log();
    for (request, message) in &log[..3] {
        builder.push(*request, message).expect("push");
    }
    let held = builder.context().clone();
    cache.body_text(WireFormat::OpenAiChat, &settings(false), &held, &[]);
    let text_of = |cache: &BodyCache, message: &Arc<Message>| {
        let items = cache.items.lock().expect("items");
        (items.by_address.get(&(Arc::as_ptr(message) as usize))).map(|(_, text)| Arc::clone(text))
    };
    let prompt_text = text_of(&cache, &held.shared()[0]).expect("the prompt's items are kept");
    // The response's next fragment changes its merged message: a request still holds it, so it is copied first.
    builder.push(log[3].0, &log[3].1).expect("push");
    let next = builder.context().clone();
    assert!(
        !Arc::ptr_eq(&held.shared()[1], &next.shared()[1]),
        "the changed message is a new allocation"
    );
    cache.body_text(WireFormat::OpenAiChat, &settings(false), &next, &[]);
    let again = text_of(&cache, &next.shared()[0]).expect("kept");
    assert!(Arc::ptr_eq(&prompt_text, &again), "the prompt was not serialized again");
    let response = text_of(&cache, &next.shared()[1]).expect("kept");
    assert!(
        response.contains("\"b\""),
        "the changed response was serialized anew: {response}"
    );
}

#[test]
fn an_extra_field_named_like_the_list_replaces_it_as_in_a_whole_body() {
    let cache = BodyCache::new();
    let context: ModelContext = vec![Message::User(UserMessage::new("hi"))].into();
    let mut settings = settings(true);
    settings
        .extra
        .insert("messages".into(), json!([{"role": "user", "content": "mine"}]));
    let text = cache.body_text(WireFormat::OpenAiChat, &settings, &context, &[]);
    let parsed: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(parsed["messages"], json!([{"role": "user", "content": "mine"}]));
    assert_eq!(parsed, build_body(WireFormat::OpenAiChat, &settings, &context, &[]));
}

#[test]
fn messages_no_context_holds_are_forgotten() {
    let cache = BodyCache::new();
    for n in 0..3 * Items::PRUNE_FROM {
        let context: ModelContext = vec![Message::User(UserMessage::new(format!("prompt {n}")))].into();
        cache.body_text(WireFormat::OpenAiChat, &settings(false), &context, &[]);
    }
    let items = cache.items.lock().expect("items");
    assert!(
        items.by_address.len() <= 2 * Items::PRUNE_FROM + 1,
        "{} entries",
        items.by_address.len()
    );
}
