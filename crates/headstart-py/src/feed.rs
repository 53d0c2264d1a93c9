//! [`Feed`]: the model's stream as Python hands it over, one SDK event (as its wire JSON) or one delta dict at a
//! time, turned into the delta stream the engine wraps.
//!
//! Each SDK event goes back to the provider's wire JSON on the Python side and, here, through the same converter
//! `headstart-providers` runs on an HTTP body ([`sse_delta_stream`]): one parser and one sealing rule per wire
//! format, whichever way the stream arrived.

use std::sync::{Mutex, PoisonError};

use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use headstart::core::DeltaStream;
use headstart::{DeltaEvent, ModelError};
use headstart_providers::{sse_delta_stream, ConvertOptions, SseEvent, WireFormat};
use pyo3::prelude::*;

use crate::errors::{ConfigError, ModelError as PyModelError};

/// What Python may hand over: `headstart` (normalised delta dicts, the delta log's shape) or a provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Delta events as JSON.
    Deltas,
    /// A provider's stream events as their wire JSON.
    Wire(WireFormat),
}

impl Format {
    /// Parses a format name: `headstart`, or a wire format's name (`openai-chat`, `openai-responses`, `anthropic`,
    /// `gemini`).
    pub fn parse(name: &str) -> PyResult<Format> {
        if name == "headstart" {
            return Ok(Format::Deltas);
        }
        name.parse::<WireFormat>()
            .map(Format::Wire)
            .map_err(|error| ConfigError::new_err(format!("{error}, or headstart")))
    }

    /// The format's name, as [`Format::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Deltas => "headstart",
            Format::Wire(wire) => wire.as_str(),
        }
    }
}

enum Sender {
    Deltas(UnboundedSender<Result<DeltaEvent, ModelError>>),
    Wire(WireFormat, UnboundedSender<Result<SseEvent, String>>),
}

/// The Python end of one response's stream (`_native.Feed`): `push` each event, then `end` or `fail`.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Feed {
    sender: Mutex<Option<Sender>>,
}

impl Feed {
    /// A feed and the delta stream the engine reads from it.
    pub fn open(format: Format) -> (Feed, DeltaStream) {
        let (sender, stream) = match format {
            Format::Deltas => {
                let (sender, receiver) = unbounded();
                (Sender::Deltas(sender), receiver.boxed())
            }
            Format::Wire(wire) => {
                let (sender, receiver) = unbounded();
                let stream = sse_delta_stream(wire, &ConvertOptions::default(), receiver);
                (Sender::Wire(wire, sender), stream)
            }
        };
        let feed = Feed {
            sender: Mutex::new(Some(sender)),
        };
        (feed, stream)
    }

    fn with_sender(&self, send: impl FnOnce(&Sender) -> PyResult<()>) -> PyResult<()> {
        match self.sender.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            Some(sender) => send(sender),
            // The stream ended (or the engine stopped reading): what comes after is ignored, as on the wire.
            None => Ok(()),
        }
    }
}

#[pymethods]
impl Feed {
    /// Hands over one event: its JSON text, and its SSE event name where the format names events (`None` for Chat
    /// Completions and delta dicts). A delta that is not a delta event raises `ModelError`.
    #[pyo3(signature = (data, event=None))]
    fn push(&self, data: String, event: Option<String>) -> PyResult<()> {
        self.with_sender(|sender| {
            match sender {
                Sender::Deltas(deltas) => {
                    let delta = serde_json::from_str::<DeltaEvent>(&data)
                        .map_err(|error| PyModelError::new_err(format!("not a delta event: {error}: {data}")))?;
                    let _ = deltas.unbounded_send(Ok(delta));
                }
                Sender::Wire(_, events) => {
                    let sse = match event {
                        Some(name) => SseEvent::named(name, data),
                        None => SseEvent::message(data),
                    };
                    let _ = events.unbounded_send(Ok(sse));
                }
            }
            Ok(())
        })
    }

    /// The stream ended cleanly. Chat Completions SDKs swallow the wire's `data: [DONE]`; it is given back here, so
    /// the end of the response is read as on the wire.
    fn end(&self) {
        if let Some(Sender::Wire(WireFormat::OpenAiChat, events)) =
            self.sender.lock().unwrap_or_else(PoisonError::into_inner).take()
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
            Some(Sender::Wire(_, events)) => {
                let _ = events.unbounded_send(Err(message));
            }
            None => {}
        }
    }
}
