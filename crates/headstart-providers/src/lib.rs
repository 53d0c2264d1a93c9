//! # headstart-providers
//!
//! Provider adapters for headstart (issue 7): each provider's streaming wire format in, headstart's normalized
//! [`DeltaEvent`]s (contract §2) out.
//!
//! - One module per provider: [`openai_chat`] (Chat Completions and compatible servers such as DeepSeek),
//!   [`openai_responses`], [`anthropic`] (Messages) and [`gemini`] (`streamGenerateContent?alt=sse`). Each holds its
//!   wire format's converter (a small pure state machine behind [`StreamConverter`]) beside what a request to it is:
//!   its endpoint, headers, API key variable and request body. [`WireFormat`] picks among them.
//! - [`sse`]: Server-Sent Events framing over a byte stream or a whole recorded body.
//! - [`capture`]: recorded captures (raw SSE text or the YAML cassettes of `tests/fixtures/providers/`) converted to
//!   delta logs.
//! - [`stream`]: the asynchronous glue, a byte stream in and a [`DeltaStream`] out ([`SseDeltas`]).
//! - [`request`]: request bodies built from the canonical model context (contract §7.3) and tool definitions.
//! - [`http`]: [`http::HttpModel`], the HTTP + SSE model client; it implements [`headstart_core::Model`], so the
//!   engine's `Agent` can be pointed at a real endpoint (or any compatible server). Its failures are typed
//!   ([`headstart_core::ModelErrorKind`]), and [`retry`] decides on the kind alone.
//!
//! ## Sealing rules (what may run early)
//!
//! A `toolcall_end` decides what the engine may execute before the response ends, so the converters emit it only
//! once the call's arguments can no longer change (contract §2.15): on an explicit end signal of the wire format,
//! or, in Chat Completions, which has none, at the first moment the arguments are settled. A merely parseable
//! prefix never seals a call: `{"path": "a"` is not a complete object, and a complete object can only be followed
//! by whitespace.
//!
//! | format | a call is sealed at |
//! |---|---|
//! | Anthropic | its `content_block_stop` |
//! | Responses | its `response.output_item.done` with `status: completed` |
//! | Gemini | its whole `functionCall` part (Gemini never streams partial calls) |
//! | Chat Completions | by default ([`SealAt::Complete`]) the first of: its arguments form one complete JSON object, a call at a higher index starts, `finish_reason`; [`ConvertOptions::seal_at`] picks a later rule |
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
mod converter;
mod delta_writer;
mod error;
pub mod feed;
pub mod gemini;
pub mod http;
pub mod openai_chat;
pub mod openai_responses;
mod payload;
mod recorded;
mod recorder;
pub mod recording;
#[cfg(feature = "replay-server")]
pub mod replay_server;
pub mod request;
pub mod retry;
pub mod sse;
pub mod stream;
mod wire_error;
mod wire_format;

pub use headstart_core::DeltaEvent;

pub use capture::{convert_capture, convert_events, read_capture, Exchange};
pub use converter::{ConvertOptions, SealAt, StreamConverter, UnknownSealAt};
pub use error::ProviderError;
pub use feed::{Feed, FeedError, FeedFormat};
pub use recording::{read_recording, Recorder};
pub use sse::{parse_sse_text, sse_events, SseEvent, SseParser};
pub use stream::{delta_stream, sse_delta_stream, DeltaStream, SseDeltas};
pub use wire_format::WireFormat;
