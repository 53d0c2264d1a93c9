use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use headstart_core::{
    AssistantMessage, ContentBlock, DeltaEvent, Message, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage,
    UserMessage,
};
use serde_json::{json, Value};

use super::call_then_answer::{next_step, CallThenAnswer, Step};
use super::chat_stream::{chat_events, ChatCall};
use super::{ChooseReply, ReplayServer, Reply};
use crate::http::{HttpModel, HttpModelConfig};
use crate::openai_chat::openai_chat_body;
use crate::request::settings::RequestSettings;
use crate::sse::parse_sse_text;
use crate::{convert_events, ConvertOptions, WireFormat};

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "read_file".to_owned(),
        arguments: ToolArguments::from_value(json!({"path": "notes.txt"})),
        provider_async: false,
    }
}

fn assistant(content: Vec<ContentBlock>, stop_reason: StopReason) -> Message {
    Message::Assistant(AssistantMessage {
        turn_id: "r".to_owned(),
        stop_reason,
        content,
        usage: Usage::default(),
        model: None,
        error_message: None,
    })
}

fn result(id: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.to_owned(),
        tool_name: "read_file".to_owned(),
        content: vec![ContentBlock::text("hello")],
        details: Value::Null,
        is_error: false,
        terminate: false,
        ready_during: None,
    })
}

/// The body the Chat Completions client sends for `context`.
fn body(context: &[Message]) -> Value {
    let settings = RequestSettings {
        model: "m".to_owned(),
        system: Some("Be brief.".to_owned()),
        ..RequestSettings::default()
    };
    openai_chat_body(&settings, context, &[])
}

fn rule() -> CallThenAnswer {
    CallThenAnswer {
        tool: "read_file".to_owned(),
        arguments: json!({"path": "notes.txt"}),
        answer: "The notes say hello.".to_owned(),
    }
}

/// The delta events a reply's SSE events decode to.
fn decoded(reply: &Reply) -> Vec<DeltaEvent> {
    let Reply::Events(events) = reply else {
        panic!("not an SSE reply: {reply:?}");
    };
    let events = parse_sse_text(&events.concat()).unwrap();
    convert_events(WireFormat::OpenAiChat, &events, &ConvertOptions::default())
        .into_iter()
        .map(|(_, event)| event)
        .collect()
}

/// The calls `(id, name, arguments text)` and the text of decoded delta events.
fn calls_and_text(events: &[DeltaEvent]) -> (Vec<(String, String, String)>, String) {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut text = String::new();
    for event in events {
        match event {
            DeltaEvent::ToolcallStart { id, name, .. } => calls.push((id.clone(), name.clone(), String::new())),
            DeltaEvent::ToolcallDelta { delta, .. } => {
                if let Some(last) = calls.last_mut() {
                    last.2.push_str(delta);
                }
            }
            DeltaEvent::TextDelta { delta, .. } => text.push_str(delta),
            _ => {}
        }
    }
    (calls, text)
}

#[test]
fn a_tool_result_last_gets_the_answer_and_anything_else_a_call() {
    let prompt = Message::User(UserMessage::new("What do the notes say?"));
    let with_call = assistant(vec![ContentBlock::ToolCall(call("c1"))], StopReason::ToolUse);
    assert_eq!(next_step(&body(std::slice::from_ref(&prompt))), Step::Call);
    assert_eq!(
        next_step(&body(&[prompt.clone(), with_call.clone(), result("c1")])),
        Step::Answer
    );
    // A response cut short (it stopped for tools without calls), taken over: asked again, it gets a call.
    let cut = assistant(vec![ContentBlock::text("Let me look")], StopReason::Aborted);
    assert_eq!(
        next_step(&body(&[prompt.clone(), with_call, result("c1"), cut])),
        Step::Call
    );
    // Whatever the body, a step: no messages, not JSON.
    assert_eq!(next_step(&json!({"messages": []})), Step::Call);
    assert_eq!(next_step(&Value::Null), Step::Call);
}

#[test]
fn each_request_gets_a_call_id_of_its_own_and_the_answer_has_no_call() {
    let rule = rule();
    let prompt = body(&[Message::User(UserMessage::new("hi"))]);
    let first = calls_and_text(&decoded(&rule.reply(7, &prompt)));
    let second = calls_and_text(&decoded(&rule.reply(8, &prompt)));
    let arguments = json!({"path": "notes.txt"}).to_string();
    assert_eq!(
        first,
        (
            vec![("call_7".to_owned(), "read_file".to_owned(), arguments.clone())],
            String::new()
        )
    );
    assert_eq!(second.0[0].0, "call_8");
    let answered = body(&[
        Message::User(UserMessage::new("hi")),
        assistant(vec![ContentBlock::ToolCall(call("call_7"))], StopReason::ToolUse),
        result("call_7"),
    ]);
    let events = decoded(&rule.reply(9, &answered));
    assert_eq!(calls_and_text(&events), (Vec::new(), "The notes say hello.".to_owned()));
    assert!(
        matches!(events.first(), Some(DeltaEvent::Start { response_id: Some(id), .. }) if id == "chatcmpl-9"),
        "{events:?}"
    );
}

#[test]
fn a_synthesized_response_seals_its_calls_and_stops_for_tools() {
    let arguments = json!({"path": "a"});
    let calls = [
        ChatCall {
            id: "x",
            name: "read_file",
            arguments: &arguments,
        },
        ChatCall {
            id: "y",
            name: "list_dir",
            arguments: &arguments,
        },
    ];
    let events = decoded(&Reply::Events(chat_events("r1", Some("Two looks."), &calls)));
    let (seen, text) = calls_and_text(&events);
    assert_eq!(text, "Two looks.");
    assert_eq!(seen.iter().map(|call| call.0.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    let sealed = events
        .iter()
        .filter(|event| matches!(event, DeltaEvent::ToolcallEnd { .. }))
        .count();
    assert_eq!(sealed, 2);
    assert!(matches!(
        events.last(),
        Some(DeltaEvent::Done {
            stop_reason: headstart_core::DoneReason::ToolUse,
            ..
        })
    ));
}

/// Over HTTP, requests of two sessions interleaved: each gets what its own transcript asks for, and the server
/// records them all.
#[tokio::test]
async fn a_choosing_server_answers_interleaved_sessions_by_their_content() {
    let server = ReplayServer::start_choosing(rule(), HashMap::new(), Duration::ZERO)
        .await
        .unwrap();
    let config = HttpModelConfig::new(WireFormat::OpenAiChat, "m")
        .with_base_url(server.url("/v1"))
        .with_api_key_env(None);
    let model = HttpModel::new(config).unwrap();
    let ask = |context: Vec<Message>| {
        let model = &model;
        async move {
            let events: Vec<DeltaEvent> = model
                .stream_context(&context, &[])
                .await
                .unwrap()
                .map(Result::unwrap)
                .collect()
                .await;
            calls_and_text(&events)
        }
    };
    let prompt = Message::User(UserMessage::new("hi"));
    let (a, b) = tokio::join!(ask(vec![prompt.clone()]), ask(vec![prompt.clone()]));
    let ids: Vec<String> = [&a, &b].iter().map(|(calls, _)| calls[0].0.clone()).collect();
    assert_ne!(ids[0], ids[1], "each request its own call id");
    let answered = ask(vec![
        prompt,
        assistant(vec![ContentBlock::ToolCall(call(&ids[0]))], StopReason::ToolUse),
        result(&ids[0]),
    ])
    .await;
    assert_eq!(answered, (Vec::new(), "The notes say hello.".to_owned()));
    assert_eq!(server.model_requests().len(), 3);
}

/// A closure is a rule too: it sees each request's number.
#[tokio::test]
async fn a_closure_is_a_rule_that_sees_each_request_number() {
    let numbered = |number: usize, _: &Value| Reply::Status {
        status: 500 + u16::try_from(number).unwrap_or(0),
        headers: Vec::new(),
        body: String::new(),
    };
    assert!(matches!(
        numbered.reply(3, &Value::Null),
        Reply::Status { status: 503, .. }
    ));
    let server = ReplayServer::start_choosing(numbered, HashMap::new(), Duration::ZERO)
        .await
        .unwrap();
    let client = reqwest::Client::new();
    for expected in [500, 501] {
        let response = client.post(server.url("/v1/chat/completions")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), expected);
    }
}
