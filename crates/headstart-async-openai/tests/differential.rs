//! The recorded OpenAI fixtures (`tests/fixtures/providers/`) give the same delta logs whether their SSE text goes
//! through `headstart-providers` directly or is first parsed into async-openai's types and bridged.

use std::path::PathBuf;

use async_openai::types::chat::CreateChatCompletionStreamResponse;
use async_openai::types::responses::ResponseStreamEvent;
use futures::StreamExt;
use headstart_core::DeltaEvent;
use headstart_providers::{convert_events, parse_sse_text, read_capture, ConvertOptions, SseEvent, WireFormat};

fn exchanges(name: &str) -> Vec<Vec<SseEvent>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    read_capture(&text)
        .expect("the capture reads")
        .iter()
        .map(|exchange| parse_sse_text(&exchange.body).expect("the SSE parses"))
        .collect()
}

fn direct(format: WireFormat, events: &[SseEvent]) -> Vec<DeltaEvent> {
    convert_events(format, events, &ConvertOptions::default())
        .into_iter()
        .map(|(_, event)| event)
        .collect()
}

async fn collect(stream: headstart_core::DeltaStream) -> Vec<DeltaEvent> {
    stream
        .map(|item| item.expect("the bridge yields no Err items"))
        .collect()
        .await
}

/// The typed items of a wire stream, as async-openai's client would yield them (it consumes `[DONE]` itself).
fn typed<T: serde::de::DeserializeOwned>(events: &[SseEvent]) -> Vec<Result<T, String>> {
    events
        .iter()
        .filter(|event| event.data != "[DONE]")
        .map(|event| serde_json::from_str::<T>(&event.data).map_err(|error| format!("{error}: {}", event.data)))
        .collect()
}

#[tokio::test]
async fn chat_completion_fixtures_give_the_same_deltas_both_ways() {
    for name in [
        "openai_chat__streaming_gpt41_parallel_model.yaml",
        "deepseek_chat__streaming_parallel_calls_keep_the_complete_one.yaml",
    ] {
        for (number, events) in exchanges(name).iter().enumerate() {
            let chunks = typed::<CreateChatCompletionStreamResponse>(events);
            if let Some(Err(error)) = chunks.iter().find(|chunk| chunk.is_err()) {
                panic!("{name} #{number}: async-openai rejects a chunk: {error}");
            }
            let bridged = collect(headstart_async_openai::chat_deltas(
                futures::stream::iter(chunks),
                &ConvertOptions::default(),
            ))
            .await;
            assert_eq!(bridged, direct(WireFormat::OpenAiChat, events), "{name} #{number}");
            assert!(bridged
                .iter()
                .any(|event| matches!(event, DeltaEvent::ToolcallEnd { .. })));
        }
    }
}

#[tokio::test]
async fn response_fixtures_give_the_same_deltas_both_ways() {
    for name in [
        "openai_responses__parallel_tool_calls.yaml",
        "openai_responses__incomplete_mid_tool_call.yaml",
    ] {
        for (number, events) in exchanges(name).iter().enumerate() {
            let items = typed::<ResponseStreamEvent>(events);
            if let Some(Err(error)) = items.iter().find(|item| item.is_err()) {
                panic!("{name} #{number}: async-openai rejects an event: {error}");
            }
            let bridged = collect(headstart_async_openai::response_deltas(
                futures::stream::iter(items),
                &ConvertOptions::default(),
            ))
            .await;
            assert_eq!(bridged, direct(WireFormat::OpenAiResponses, events), "{name} #{number}");
        }
    }
}

#[tokio::test]
async fn a_stream_error_ends_the_response_as_error() {
    let events = &exchanges("openai_chat__streaming_gpt41_parallel_model.yaml")[0];
    let mut chunks = typed::<CreateChatCompletionStreamResponse>(&events[..2]);
    chunks.push(Err("connection reset".to_owned()));
    let bridged = collect(headstart_async_openai::chat_deltas(
        futures::stream::iter(chunks),
        &ConvertOptions::default(),
    ))
    .await;
    assert!(matches!(bridged.first(), Some(DeltaEvent::Start { .. })));
    match bridged.last() {
        Some(DeltaEvent::Error { message, .. }) => assert!(message.contains("connection reset"), "{message}"),
        other => panic!("not an error end: {other:?}"),
    }
}
