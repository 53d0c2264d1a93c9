//! [`Feed`]: the model's stream as Python hands it over, turned into the delta stream the engine wraps.
//!
//! Three ways in, one parser per wire format: the HTTP body of the SDK's stream as it came off the wire
//! ([`Feed::push_body`], what `engine.wrap` reads when the SDK's own stream object allows it, and what `sse-…`
//! formats hand over), one SDK event at a time as its wire JSON ([`Feed::push`]), or delta dicts (`headstart`).
//! Bodies and events both go through the same converter `headstart-providers` runs on an HTTP body
//! ([`sse_delta_stream`]), so whichever way the stream arrived, the deltas and the sealing rule are the same.

use std::sync::{Mutex, PoisonError};

use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use headstart::core::DeltaStream;
use headstart::{DeltaEvent, ModelError};
use headstart_providers::{sse_delta_stream, ConvertOptions, Recorder, SealAt, SseEvent, SseParser, WireFormat};
use pyo3::prelude::*;

use crate::errors::{ConfigError, ModelError as PyModelError};

/// What Python may hand over: `headstart` (normalised delta dicts, the delta log's shape), a provider's stream
/// events as their wire JSON, or (`sse-…`) the provider's SSE body itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Delta events as JSON.
    Deltas,
    /// A provider's stream events as their wire JSON (or its body, when the SDK's stream object gives it).
    Wire(WireFormat),
    /// A provider's SSE body, in chunks as they were read.
    Body(WireFormat),
}

impl Format {
    /// Parses a format name: `headstart`, a wire format's name (`openai-chat`, `openai-responses`, `anthropic`,
    /// `gemini`), or `sse-` and a wire format's name.
    pub fn parse(name: &str) -> PyResult<Format> {
        if name == "headstart" {
            return Ok(Format::Deltas);
        }
        let (body, wire) = match name.strip_prefix("sse-") {
            Some(wire) => (true, wire),
            None => (false, name),
        };
        let wire = wire
            .parse::<WireFormat>()
            .map_err(|error| ConfigError::new_err(format!("{error}, or headstart, or sse- and a wire format")))?;
        Ok(if body { Format::Body(wire) } else { Format::Wire(wire) })
    }

    /// The format's name, as [`Format::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Deltas => "headstart",
            Format::Wire(wire) => wire.as_str(),
            Format::Body(WireFormat::OpenAiChat) => "sse-openai-chat",
            Format::Body(WireFormat::OpenAiResponses) => "sse-openai-responses",
            Format::Body(WireFormat::Anthropic) => "sse-anthropic",
            Format::Body(WireFormat::Gemini) => "sse-gemini",
        }
    }

    /// The provider's wire format; `None` for delta dicts.
    pub fn wire(self) -> Option<WireFormat> {
        match self {
            Format::Deltas => None,
            Format::Wire(wire) | Format::Body(wire) => Some(wire),
        }
    }
}

enum Sender {
    Deltas(UnboundedSender<Result<DeltaEvent, ModelError>>),
    Wire {
        wire: WireFormat,
        events: UnboundedSender<Result<SseEvent, String>>,
        /// The body's parser, from the first body chunk on: the feed then reads the body, not events.
        body: Option<SseParser>,
    },
}

/// The Python end of one response's stream (`_native.Feed`): `push` each event (or `push_body` each chunk of the
/// body), then `end` or `fail`.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Feed {
    sender: Mutex<Option<Sender>>,
}

impl Feed {
    /// A feed and the delta stream the engine reads from it; `options` say when a Chat Completions call is
    /// sealed and where responses are recorded.
    pub fn open(format: Format, options: &ConvertOptions) -> (Feed, DeltaStream) {
        let (sender, stream) = match format.wire() {
            None => {
                let (sender, receiver) = unbounded();
                (Sender::Deltas(sender), receiver.boxed())
            }
            Some(wire) => {
                let (events, receiver) = unbounded();
                let stream = sse_delta_stream(wire, options, receiver);
                let body = matches!(format, Format::Body(_)).then(SseParser::default);
                (Sender::Wire { wire, events, body }, stream)
            }
        };
        let feed = Feed {
            sender: Mutex::new(Some(sender)),
        };
        (feed, stream)
    }
}

#[pymethods]
impl Feed {
    /// Hands over one event: its JSON text, and its SSE event name where the format names events (`None` for Chat
    /// Completions and delta dicts). A delta that is not a delta event raises `ModelError`.
    #[pyo3(signature = (data, event=None))]
    fn push(&self, data: String, event: Option<String>) -> PyResult<()> {
        let guard = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(Sender::Deltas(deltas)) => {
                let delta = serde_json::from_str::<DeltaEvent>(&data)
                    .map_err(|error| PyModelError::new_err(format!("not a delta event: {error}: {data}")))?;
                let _ = deltas.unbounded_send(Ok(delta));
            }
            Some(Sender::Wire { body: Some(_), .. }) => {
                return Err(ConfigError::new_err(
                    "this feed reads an SSE body: hand it chunks with push_body",
                ));
            }
            Some(Sender::Wire { events, .. }) => {
                let sse = match event {
                    Some(name) => SseEvent::named(name, data),
                    None => SseEvent::message(data),
                };
                let _ = events.unbounded_send(Ok(sse));
            }
            // The stream ended (or the engine stopped reading): what comes after is ignored, as on the wire.
            None => {}
        }
        Ok(())
    }

    /// Hands over the next chunk of the provider's SSE body, as read from the HTTP response (any split: events and
    /// lines may straddle chunks). From the first chunk on the feed reads the body, and its end is the body's: a body
    /// that ends before the provider's terminal event ends the response as an error (contract §5.5).
    fn push_body(&self, data: &[u8]) -> PyResult<()> {
        let mut guard = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let failure = match guard.as_mut() {
            Some(Sender::Deltas(_)) => {
                return Err(ConfigError::new_err(
                    "a 'headstart' feed takes delta dicts, not an SSE body",
                ));
            }
            Some(Sender::Wire { events, body, .. }) => {
                let parser = body.get_or_insert_with(SseParser::default);
                let mut parsed = Vec::new();
                let failure = parser.feed(data, &mut parsed).err();
                for event in parsed {
                    let _ = events.unbounded_send(Ok(event));
                }
                if let Some(error) = &failure {
                    let _ = events.unbounded_send(Err(error.to_string()));
                }
                failure
            }
            None => None,
        };
        if failure.is_some() {
            // The body was refused: nothing after it is read.
            guard.take();
        }
        Ok(())
    }

    /// The stream ended cleanly. Chat Completions SDKs swallow the wire's `data: [DONE]`; for events it is given
    /// back here, so the end of the response is read as on the wire. A body carries its own.
    fn end(&self) {
        if let Some(Sender::Wire {
            wire: WireFormat::OpenAiChat,
            events,
            body: None,
        }) = self.sender.lock().unwrap_or_else(PoisonError::into_inner).take()
        {
            let _ = events.unbounded_send(Ok(SseEvent::message("[DONE]")));
        }
    }

    /// The stream failed (the SDK raised): the response ends as `error` with this message.
    fn fail(&self, message: String) {
        match self.sender.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(Sender::Deltas(deltas)) => {
                let _ = deltas.unbounded_send(Err(ModelError::transport(message)));
            }
            Some(Sender::Wire { events, .. }) => {
                let _ = events.unbounded_send(Err(message));
            }
            None => {}
        }
    }
}

/// The conversion options of Python's `seal=` and `record=`: the sealing rule by name (`complete`, `next-index`,
/// `finish`), and a file the responses are appended to with their events' arrival times.
pub(crate) fn convert_options(seal: &str, record: Option<&str>) -> PyResult<ConvertOptions> {
    let seal_at = seal
        .parse::<SealAt>()
        .map_err(|error| ConfigError::new_err(error.to_string()))?;
    let record = match record {
        Some(path) => Some(
            Recorder::append(std::path::Path::new(path))
                .map_err(|error| ConfigError::new_err(format!("cannot record to {path}: {error}")))?,
        ),
        None => None,
    };
    Ok(ConvertOptions { seal_at, record })
}
