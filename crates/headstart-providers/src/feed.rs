//! [`Feed`]: a model's stream handed over piece by piece by a host language (Python, Node), turned into the delta
//! stream the engine wraps.
//!
//! Three ways in, one parser per wire format: the HTTP body of an SDK's stream as it came off the wire
//! ([`Feed::push_body`]), one SDK event at a time as its wire JSON ([`Feed::push`]), or delta events as JSON
//! ([`FeedFormat::Deltas`]). Bodies and events both go through the converter that runs on an HTTP body
//! ([`sse_delta_stream`]), so whichever way the stream arrived, the deltas and the sealing rule are the same.

use std::fmt;

use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use headstart_core::{DeltaEvent, ModelError};

use crate::converter::{ConvertOptions, SealAt};
use crate::recording::Recorder;
use crate::sse::{SseEvent, SseParser};
use crate::stream::{sse_delta_stream, DeltaStream};
use crate::wire_format::WireFormat;

/// What a host may hand over: delta events as JSON (`headstart`), a provider's stream events as their wire JSON,
/// or (`sse-…`) the provider's SSE body itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedFormat {
    /// Delta events as JSON.
    Deltas,
    /// A provider's stream events as their wire JSON (or its body, when the SDK's stream object gives it).
    Wire(WireFormat),
    /// A provider's SSE body, in chunks as they were read.
    Body(WireFormat),
}

impl FeedFormat {
    /// Parses a format name: `headstart`, a wire format's name (`openai-chat`, `openai-responses`, `anthropic`,
    /// `gemini`), or `sse-` and a wire format's name. The error names every accepted form.
    pub fn parse(name: &str) -> Result<FeedFormat, FeedError> {
        if name == "headstart" {
            return Ok(FeedFormat::Deltas);
        }
        let (body, wire) = match name.strip_prefix("sse-") {
            Some(wire) => (true, wire),
            None => (false, name),
        };
        let wire = wire
            .parse::<WireFormat>()
            .map_err(|error| FeedError::Config(format!("{error}, or headstart, or sse- and a wire format")))?;
        Ok(if body {
            FeedFormat::Body(wire)
        } else {
            FeedFormat::Wire(wire)
        })
    }

    /// The format's name, as [`FeedFormat::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            FeedFormat::Deltas => "headstart",
            FeedFormat::Wire(wire) => wire.as_str(),
            FeedFormat::Body(WireFormat::OpenAiChat) => "sse-openai-chat",
            FeedFormat::Body(WireFormat::OpenAiResponses) => "sse-openai-responses",
            FeedFormat::Body(WireFormat::Anthropic) => "sse-anthropic",
            FeedFormat::Body(WireFormat::Gemini) => "sse-gemini",
        }
    }

    /// The provider's wire format; `None` for delta events.
    pub fn wire(self) -> Option<WireFormat> {
        match self {
            FeedFormat::Deltas => None,
            FeedFormat::Wire(wire) | FeedFormat::Body(wire) => Some(wire),
        }
    }
}

/// Why a feed refused what it was handed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedError {
    /// The feed was used against its format (an SSE body into a delta feed, an event into a body feed), or a
    /// format name is unknown.
    Config(String),
    /// A delta feed was handed something that is not a delta event.
    NotADelta(String),
}

impl fmt::Display for FeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeedError::Config(message) | FeedError::NotADelta(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for FeedError {}

/// What a delta feed carries: one event (parsed when it was pushed), or a burst of events as JSON lines, parsed by
/// the stream's reader rather than by the host's thread that pushed them.
enum DeltaChunk {
    Event(Result<DeltaEvent, ModelError>),
    Lines(String),
}

impl DeltaChunk {
    fn into_events(self) -> Vec<Result<DeltaEvent, ModelError>> {
        match self {
            DeltaChunk::Event(event) => vec![event],
            DeltaChunk::Lines(text) => text
                .split('\n')
                .filter(|line| !line.trim().is_empty())
                .map(|line| {
                    serde_json::from_str::<DeltaEvent>(line)
                        .map_err(|error| ModelError::new(format!("not a delta event: {error}: {line}")))
                })
                .collect(),
        }
    }
}

enum Sender {
    Deltas(UnboundedSender<DeltaChunk>),
    Wire {
        wire: WireFormat,
        events: UnboundedSender<Result<SseEvent, String>>,
        /// The body's parser, from the first body chunk on: the feed then reads the body, not events.
        body: Option<SseParser>,
    },
}

/// The host's end of one response's stream: [`push`](Feed::push) each event (or
/// [`push_body`](Feed::push_body) each chunk of the body), then [`end`](Feed::end) or [`fail`](Feed::fail).
/// What is handed over after the end is ignored, as bytes after a stream's end are on the wire.
pub struct Feed {
    sender: Option<Sender>,
}

impl Feed {
    /// A feed and the delta stream the engine reads from it; `options` say when a Chat Completions call is sealed
    /// and where responses are recorded.
    pub fn open(format: FeedFormat, options: &ConvertOptions) -> (Feed, DeltaStream) {
        let (sender, stream) = match format.wire() {
            None => {
                let (sender, receiver) = unbounded::<DeltaChunk>();
                let stream = receiver
                    .flat_map(|chunk| futures::stream::iter(chunk.into_events()))
                    .boxed();
                (Sender::Deltas(sender), stream)
            }
            Some(wire) => {
                let (events, receiver) = unbounded();
                let stream = sse_delta_stream(wire, options, receiver);
                let body = matches!(format, FeedFormat::Body(_)).then(SseParser::default);
                (Sender::Wire { wire, events, body }, stream)
            }
        };
        let feed = Feed { sender: Some(sender) };
        (feed, stream)
    }

    /// Hands over one event: its JSON text, and its SSE event name where the format names events (`None` for Chat
    /// Completions and delta events).
    pub fn push(&mut self, data: String, event: Option<String>) -> Result<(), FeedError> {
        match self.sender.as_ref() {
            Some(Sender::Deltas(deltas)) => {
                let delta = serde_json::from_str::<DeltaEvent>(&data)
                    .map_err(|error| FeedError::NotADelta(format!("not a delta event: {error}: {data}")))?;
                let _ = deltas.unbounded_send(DeltaChunk::Event(Ok(delta)));
            }
            Some(Sender::Wire { body: Some(_), .. }) => {
                return Err(FeedError::Config(
                    "this feed reads an SSE body: hand it chunks with push_body".into(),
                ));
            }
            Some(Sender::Wire { events, .. }) => {
                let sse = match event {
                    Some(name) => SseEvent::named(name, data),
                    None => SseEvent::message(data),
                };
                let _ = events.unbounded_send(Ok(sse));
            }
            None => {}
        }
        Ok(())
    }

    /// Hands over delta events as JSON, one per line, in one call: a burst of a host's events without a call per
    /// event. They are parsed as the engine reads them, so a line that is not a delta event ends the response as an
    /// error there rather than failing here. Only a delta feed takes lines.
    pub fn push_lines(&mut self, lines: String) -> Result<(), FeedError> {
        match self.sender.as_ref() {
            Some(Sender::Deltas(deltas)) => {
                let _ = deltas.unbounded_send(DeltaChunk::Lines(lines));
                Ok(())
            }
            Some(Sender::Wire { .. }) => Err(FeedError::Config(
                "delta lines go to a 'headstart' feed; a provider's events go one by one with push".into(),
            )),
            None => Ok(()),
        }
    }

    /// Hands over the next chunk of the provider's SSE body, as read from the HTTP response (any split: events and
    /// lines may straddle chunks). From the first chunk on the feed reads the body, and its end is the body's: a body
    /// that ends before the provider's terminal event ends the response as an error (contract §5.5). A body the
    /// parser refuses ends the response as an error, and nothing after it is read.
    pub fn push_body(&mut self, data: &[u8]) -> Result<(), FeedError> {
        let failure = match self.sender.as_mut() {
            Some(Sender::Deltas(_)) => {
                return Err(FeedError::Config(
                    "a 'headstart' feed takes delta events, not an SSE body".into(),
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
            self.sender = None;
        }
        Ok(())
    }

    /// The stream ended cleanly. Chat Completions SDKs swallow the wire's `data: [DONE]`; for events it is given
    /// back here, so the end of the response is read as on the wire. A body carries its own.
    pub fn end(&mut self) {
        if let Some(Sender::Wire {
            wire: WireFormat::OpenAiChat,
            events,
            body: None,
        }) = self.sender.take()
        {
            let _ = events.unbounded_send(Ok(SseEvent::message("[DONE]")));
        }
    }

    /// The stream failed (the SDK raised, the host's iterator threw): the response ends as `error` with this
    /// message.
    pub fn fail(&mut self, message: String) {
        match self.sender.take() {
            Some(Sender::Deltas(deltas)) => {
                let _ = deltas.unbounded_send(DeltaChunk::Event(Err(ModelError::transport(message))));
            }
            Some(Sender::Wire { events, .. }) => {
                let _ = events.unbounded_send(Err(message));
            }
            None => {}
        }
    }
}

/// Conversion options by name, as a host's `seal` and `record` options give them: the Chat Completions sealing
/// rule (`complete`, `next-index`, `finish`), and a file each response is appended to with its events' arrival
/// times.
pub fn convert_options(seal: &str, record: Option<&str>) -> Result<ConvertOptions, FeedError> {
    let seal_at = seal
        .parse::<SealAt>()
        .map_err(|error| FeedError::Config(error.to_string()))?;
    let record = match record {
        Some(path) => Some(
            Recorder::append(std::path::Path::new(path))
                .map_err(|error| FeedError::Config(format!("cannot record to {path}: {error}")))?,
        ),
        None => None,
    };
    Ok(ConvertOptions { seal_at, record })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip_and_an_unknown_one_names_the_choices() {
        for name in [
            "headstart",
            "openai-chat",
            "sse-anthropic",
            "gemini",
            "sse-openai-responses",
        ] {
            assert_eq!(FeedFormat::parse(name).map(FeedFormat::name), Ok(name));
        }
        let error = FeedFormat::parse("pi-ai").expect_err("not a format");
        assert!(error.to_string().contains("openai-chat"), "{error}");
        assert!(error.to_string().contains("headstart"), "{error}");
    }

    #[tokio::test]
    async fn a_delta_feed_refuses_a_body_and_a_non_delta() {
        let (mut feed, mut deltas) = Feed::open(FeedFormat::Deltas, &ConvertOptions::default());
        assert!(matches!(feed.push_body(b"data: x\n\n"), Err(FeedError::Config(_))));
        assert!(matches!(
            feed.push("{\"type\":\"nope\"}".into(), None),
            Err(FeedError::NotADelta(_))
        ));
        feed.push("{\"type\":\"start\"}".into(), None).expect("a delta");
        feed.fail("gone".into());
        assert!(matches!(deltas.next().await, Some(Ok(DeltaEvent::Start { .. }))));
        assert!(matches!(deltas.next().await, Some(Err(_))));
        // Pushed after the end: ignored.
        feed.push("{\"type\":\"start\"}".into(), None).expect("ignored");
    }

    #[tokio::test]
    async fn lines_are_parsed_as_they_are_read_and_a_bad_one_is_an_error_in_the_stream() {
        let (mut feed, deltas) = Feed::open(FeedFormat::Deltas, &ConvertOptions::default());
        feed.push_lines("{\"type\":\"start\"}\n\n{\"type\":\"text_start\",\"index\":0}\nnope".into())
            .expect("a delta feed takes lines");
        feed.end();
        drop(feed);
        let read: Vec<_> = deltas.collect().await;
        assert!(matches!(read[0], Ok(DeltaEvent::Start { .. })));
        assert!(matches!(read[1], Ok(DeltaEvent::TextStart { index: 0 })));
        assert!(matches!(&read[2], Err(error) if error.message().contains("not a delta event")));
        assert_eq!(read.len(), 3);
        let (mut wire, _) = Feed::open(FeedFormat::Wire(WireFormat::Anthropic), &ConvertOptions::default());
        assert!(matches!(wire.push_lines("{}".into()), Err(FeedError::Config(_))));
    }
}
