//! # headstart-providers
//!
//! Provider adapters for headstart (issue 7): each provider's streaming wire format in, headstart's normalized
//! [`DeltaEvent`]s (contract §2) out.
//!
//! - One module per wire format, each a small pure state machine implementing [`StreamConverter`]:
//!   [`openai_chat`] (Chat Completions and compatible servers such as DeepSeek), [`openai_responses`],
//!   [`anthropic`] (Messages) and [`gemini`] (`streamGenerateContent?alt=sse`).
//! - [`sse`]: Server-Sent Events framing over a byte stream or a whole recorded body.
//! - [`capture`]: recorded captures (raw SSE text or the YAML cassettes of `tests/fixtures/providers/`) converted to
//!   delta logs.
//! - [`stream`]: the asynchronous glue, a byte stream in and a [`DeltaStream`] out.
//! - [`request`]: request bodies built from the canonical model context (contract §7.3) and tool definitions.
//! - [`http`]: [`http::HttpModel`], the HTTP + SSE model client; it implements [`headstart_core::Model`], so the
//!   engine's `Agent` can be pointed at a real endpoint (or any compatible server).
//!
//! ## Sealing rules (what may run early)
//!
//! A `toolcall_end` decides what the engine may execute before the response ends, so the converters emit it **only
//! on an explicit end signal of the wire format**, never because the accumulated arguments happen to parse as JSON
//! (a parseable prefix such as `{"path": "a"}` of `{"path": "a", "recursive": true}` would run with arguments
//! dropped):
//!
//! | format | a call is sealed at |
//! |---|---|
//! | Anthropic | its `content_block_stop` |
//! | Responses | its `response.output_item.done` with `status: completed` |
//! | Gemini | its whole `functionCall` part (Gemini never streams partial calls) |
//! | Chat Completions | `finish_reason` (default), or, with [`ConvertOptions::seal_on_next_index`], when the next call index starts |
//!
//! **Cut-off calls are sealed invalid.** A call that the provider reports as cut off (Responses item status
//! `incomplete`, or the call still being generated when a Chat Completions stream stops with `finish_reason:
//! length`, or any call still open at a normal end without its own end signal) is sealed with
//! `toolcall_end { arguments: "<the raw argument text as a JSON string>" }`. A non-object override makes the
//! accumulator mark the call invalid whatever the text is (even a cut-off text that happens to be a complete JSON
//! object), so the engine records it with an error result and never executes it, while the raw text stays visible
//! in the transcript. Calls sealed before the cut-off keep their arguments and run.
#![warn(missing_docs)]

pub mod anthropic;
pub mod capture;
mod emit;
mod error;
pub mod gemini;
pub mod http;
pub mod openai_chat;
pub mod openai_responses;
#[cfg(feature = "replay-server")]
pub mod replay_server;
pub mod request;
pub mod retry;
pub mod sse;
pub mod stream;
mod wire_error;

use std::fmt;
use std::str::FromStr;

pub use headstart_core::DeltaEvent;

pub use capture::{convert_capture, read_capture, Exchange};
pub use error::ProviderError;
pub use sse::{parse_sse_text, sse_events, SseEvent};
pub use stream::{delta_stream, sse_delta_stream, DeltaStream};

/// The streaming wire formats headstart can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI Chat Completions (`/chat/completions`) and compatible servers (DeepSeek, vLLM, Ollama, gateways).
    OpenAiChat,
    /// OpenAI Responses (`/responses`).
    OpenAiResponses,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Google Gemini (`:streamGenerateContent?alt=sse`).
    Gemini,
}

impl WireFormat {
    /// Every format, in a stable order.
    pub const ALL: [WireFormat; 4] = [
        WireFormat::OpenAiChat,
        WireFormat::OpenAiResponses,
        WireFormat::Anthropic,
        WireFormat::Gemini,
    ];

    /// The provider's name in OpenTelemetry's GenAI semantic conventions (`gen_ai.provider.name`).
    pub fn otel_provider(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => "openai",
            WireFormat::Anthropic => "anthropic",
            WireFormat::Gemini => "gcp.gemini",
        }
    }

    /// The command-line name: `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => "openai-chat",
            WireFormat::OpenAiResponses => "openai-responses",
            WireFormat::Anthropic => "anthropic",
            WireFormat::Gemini => "gemini",
        }
    }

    /// A fresh converter for one response in this format.
    pub fn converter(self, options: &ConvertOptions) -> Box<dyn StreamConverter> {
        match self {
            WireFormat::OpenAiChat => Box::new(openai_chat::ChatConverter::new(options)),
            WireFormat::OpenAiResponses => Box::new(openai_responses::ResponsesConverter::new()),
            WireFormat::Anthropic => Box::new(anthropic::AnthropicConverter::new()),
            WireFormat::Gemini => Box::new(gemini::GeminiConverter::new()),
        }
    }
}

impl fmt::Display for WireFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WireFormat {
    type Err = ProviderError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        WireFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "unknown wire format {name:?}; expected one of openai-chat, openai-responses, anthropic, gemini"
                ))
            })
    }
}

/// Options of the conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Chat Completions only: seal call N as soon as a call with a higher index starts, instead of waiting for
    /// `finish_reason`.
    ///
    /// Chat Completions has no per-call end event, so by default every call is sealed at `finish_reason`. Servers
    /// known to stream calls strictly one after another (OpenAI, DeepSeek) finish call N before they start call N+1,
    /// and this option lets call N run early. **Risk:** a gateway that reuses or interleaves indices (sends more
    /// argument text for call N after N+1 started, or restarts at index 0 for each call) would have call N sealed
    /// with part of its arguments. The converter detects a later fragment for a sealed call and ends the response
    /// as `error`, but the sealed call may already have run. Enable it only for servers you know.
    pub seal_on_next_index: bool,
}

/// One response's wire-format state machine: SSE events in, delta events out.
///
/// Every implementation guarantees a well-formed delta stream: `start` first (with the model and response id when
/// the provider gave them by then), absolute gapless content indices, text and thinking blocks closed before `done`,
/// exactly one terminal event (`done` or `error`), and nothing after it.
pub trait StreamConverter: Send {
    /// Converts one SSE event. Events after the terminal one are ignored (an empty vector).
    ///
    /// An `Err` means the provider sent something this converter cannot interpret (malformed JSON, a protocol
    /// violation such as a fragment for an already sealed call). Events produced before the failure are kept; call
    /// [`StreamConverter::fail`] to get them followed by an `error` event.
    fn push(&mut self, event: &SseEvent) -> Result<Vec<DeltaEvent>, ProviderError>;

    /// The body ended. If the provider's terminal event never came, this yields an `error` event ("the connection
    /// closed mid-stream", contract §5.5); otherwise whatever is still pending (possibly nothing).
    fn finish(&mut self) -> Vec<DeltaEvent>;

    /// Ends the response as `error` with `error`'s message and kind (a transport failure or an `Err` from
    /// [`StreamConverter::push`]): the events still buffered, `start` if it was never sent, and the `error` event.
    /// Nothing if already ended.
    fn fail(&mut self, error: &headstart_core::ModelError) -> Vec<DeltaEvent>;

    /// `true` once the terminal event was produced.
    fn is_ended(&self) -> bool;
}

/// Runs a whole sequence of SSE events through a fresh converter and returns every delta event with the 0-based
/// position of the SSE event that produced it (`events.len()` for what the end of the body produced).
///
/// Conversion stops at the terminal event; a converter error ends the response as `error` with its message.
pub fn convert_events(format: WireFormat, events: &[SseEvent], options: &ConvertOptions) -> Vec<(usize, DeltaEvent)> {
    let mut converter = format.converter(options);
    let mut out = Vec::new();
    for (position, event) in events.iter().enumerate() {
        let produced = match converter.push(event) {
            Ok(produced) => produced,
            Err(err) => converter.fail(&err.into()),
        };
        out.extend(produced.into_iter().map(|delta| (position, delta)));
        if converter.is_ended() {
            return out;
        }
    }
    out.extend(converter.finish().into_iter().map(|delta| (events.len(), delta)));
    out
}
