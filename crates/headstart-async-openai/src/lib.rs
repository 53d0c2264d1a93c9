//! # headstart-async-openai
//!
//! Turns the typed streams of [`async-openai`](https://docs.rs/async-openai) into headstart delta streams, for an
//! application that already streams with async-openai: Chat Completions chunks
//! ([`CreateChatCompletionStreamResponse`]) with [`chat_deltas`], Responses events ([`ResponseStreamEvent`]) with
//! [`response_deltas`]. Each item is handed, as the JSON the provider sent, to the same converter
//! `headstart-providers` runs on the wire ([`sse_delta_stream`]): there is one parser per wire format, and a typed
//! stream gives the deltas its recorded wire form gives (`tests/differential.rs`).
//!
//! The output keeps the adapters' guarantees: `start` first, exactly one terminal event, and a stream error or an
//! early end becomes an `error` event, not an `Err` item.

use std::fmt::Display;

use async_openai::types::chat::CreateChatCompletionStreamResponse;
use async_openai::types::responses::ResponseStreamEvent;
use futures::{Stream, StreamExt};
use headstart_core::DeltaStream;
use headstart_providers::{sse_delta_stream, ConvertOptions, SseEvent, WireFormat};
use serde::Serialize;

/// Chat Completions chunks in, delta events out. `options.seal_at` says when a call is sealed and may start: by
/// default the moment its arguments form a complete JSON object ([`headstart_providers::SealAt`]).
///
/// async-openai ends its stream at `data: [DONE]` without yielding it; a stream that ends cleanly is therefore
/// given its `[DONE]` back, so the usage chunk and the end of the response are read as on the wire.
pub fn chat_deltas<S, E>(chunks: S, options: &ConvertOptions) -> DeltaStream
where
    S: Stream<Item = Result<CreateChatCompletionStreamResponse, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let events = chunks
        .map(|chunk| {
            chunk
                .map_err(|error| error.to_string())
                .and_then(|chunk| message(&chunk))
        })
        .chain(futures::stream::once(async { Ok(SseEvent::message("[DONE]")) }));
    sse_delta_stream(WireFormat::OpenAiChat, options, events)
}

/// Responses stream events in, delta events out.
pub fn response_deltas<S, E>(events: S, options: &ConvertOptions) -> DeltaStream
where
    S: Stream<Item = Result<ResponseStreamEvent, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let events = events.map(|event| {
        let value = serde_json::to_value(event.map_err(|error| error.to_string())?).map_err(serialize_error)?;
        let mut sse = SseEvent::message(value.to_string());
        // The Responses API names each SSE event after its payload's `type`.
        if let Some(kind) = value.get("type").and_then(|kind| kind.as_str()) {
            kind.clone_into(&mut sse.event);
        }
        Ok::<SseEvent, String>(sse)
    });
    sse_delta_stream(WireFormat::OpenAiResponses, options, events)
}

/// An unnamed SSE event carrying `item` as JSON.
fn message(item: &impl Serialize) -> Result<SseEvent, String> {
    serde_json::to_string(item)
        .map(SseEvent::message)
        .map_err(serialize_error)
}

fn serialize_error(error: serde_json::Error) -> String {
    format!("cannot serialize an async-openai item: {error}")
}
