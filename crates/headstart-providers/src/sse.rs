//! Server-Sent Events framing.
//!
//! Framing follows the HTML spec through `eventsource-stream`: lines end in CRLF, CR or LF (also when a CRLF is
//! split across reads), `data:` lines of one event are joined with `\n`, `:` comments (keep-alives) and unknown
//! fields are ignored, a leading BOM is dropped, and an event is dispatched at the blank line that ends it. An
//! event without data (e.g. a bare `event: ping` followed by a blank line) is not dispatched.
//!
//! Over a byte stream ([`sse_events`]), an event not yet terminated by a blank line when the body ends is
//! discarded, as the spec demands: the converter then sees the body end without the provider's terminal event and
//! reports the response as `error` (contract §5.5).
//!
//! The bytes go through a small sanitizer before `eventsource-stream` sees them, because that crate (0.2.3) panics
//! on a leading byte-order mark (it slices one byte into the three-byte BOM), stalls on invalid UTF-8 until the
//! body ends, and copies its buffer once per parsed line (quadratic in the size of a read). The sanitizer strips
//! leading BOMs, decodes UTF-8 (invalid sequences become U+FFFD, sequences split across reads are reassembled) and
//! hands the parser one line at a time.

use std::fmt::Display;

use eventsource_stream::{EventStream, EventStreamError};
use futures::{Stream, StreamExt};

use crate::error::ProviderError;

/// One dispatched SSE event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type (`event:` field); `message` when the event named none.
    pub event: String,
    /// The data lines, joined with `\n`.
    pub data: String,
    /// The last event id seen (`id:` field), empty if none.
    pub id: String,
}

impl SseEvent {
    /// An unnamed event (type `message`) with this data.
    pub fn message(data: impl Into<String>) -> Self {
        Self::named("message", data)
    }

    /// An event of type `event` with this data.
    pub fn named(event: impl Into<String>, data: impl Into<String>) -> Self {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: String::new(),
        }
    }
}

impl From<eventsource_stream::Event> for SseEvent {
    fn from(event: eventsource_stream::Event) -> Self {
        SseEvent {
            event: event.event,
            data: event.data,
            id: event.id,
        }
    }
}

fn sse_error<E: Display>(err: EventStreamError<E>) -> ProviderError {
    match err {
        EventStreamError::Transport(err) => ProviderError::Transport(err.to_string()),
        EventStreamError::Utf8(err) => ProviderError::Sse(format!("not valid UTF-8: {err}")),
        EventStreamError::Parser(err) => ProviderError::Sse(format!("unparseable line: {err}")),
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Byte chunks in, valid UTF-8 out (see the module docs).
#[derive(Debug, Default)]
struct Sanitizer {
    pending: Vec<u8>,
    past_start: bool,
}

impl Sanitizer {
    fn feed(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        if !self.past_start {
            while self.pending.starts_with(BOM) {
                self.pending.drain(..BOM.len());
            }
            if self.pending.len() < BOM.len() && BOM.starts_with(&self.pending) {
                return String::new(); // empty, or maybe the start of a BOM: wait for more
            }
            self.past_start = true;
        }
        let mut out = String::with_capacity(self.pending.len());
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match err.error_len() {
                        Some(invalid) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[invalid..];
                        }
                        None => {
                            rest = after; // an incomplete sequence: wait for the rest of it
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    fn end(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// Line-sized pieces of `text` (each ends with `\n` except possibly the last).
fn lines(text: String) -> Vec<String> {
    if text.bytes().filter(|&b| b == b'\n').count() <= 1 {
        return vec![text];
    }
    text.split_inclusive('\n').map(str::to_owned).collect()
}

/// Parses SSE events from a byte stream (for example `reqwest`'s body chunks).
///
/// Transport errors become [`ProviderError::Transport`]; the stream ends when the body does. A partial event at
/// the end of the body is discarded (see the module docs).
pub fn sse_events<S, B, E>(bytes: S) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: Display + Send,
{
    let text = futures::stream::unfold(
        (Box::pin(bytes), Sanitizer::default(), false),
        |(mut bytes, mut sanitizer, ended)| async move {
            if ended {
                return None;
            }
            let (pieces, ended) = match bytes.next().await {
                Some(Ok(chunk)) => (
                    lines(sanitizer.feed(chunk.as_ref())).into_iter().map(Ok).collect(),
                    false,
                ),
                Some(Err(err)) => (vec![Ok(sanitizer.end()), Err(err)], true),
                None => (vec![Ok(sanitizer.end())], true),
            };
            Some((futures::stream::iter(pieces), (bytes, sanitizer, ended)))
        },
    )
    .flatten();
    EventStream::new(text).map(|item| item.map(SseEvent::from).map_err(sse_error))
}

/// Parses a whole recorded SSE body.
///
/// Unlike [`sse_events`], a final event that lacks its terminating blank line is still dispatched: recorded files
/// often lose their trailing newline, and a recording is complete by definition. The text is fed to the parser
/// line by line, so parsing costs O(text length).
pub fn parse_sse_text(text: &str) -> Result<Vec<SseEvent>, ProviderError> {
    let chunks = text
        .split_inclusive('\n')
        .chain(std::iter::once("\n\n"))
        .map(Ok::<_, std::convert::Infallible>);
    futures::executor::block_on_stream(Box::pin(sse_events(futures::stream::iter(chunks)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<(String, String)> {
        parse_sse_text(text)
            .unwrap()
            .into_iter()
            .map(|event| (event.event, event.data))
            .collect()
    }

    fn pair(event: &str, data: &str) -> (String, String) {
        (event.to_owned(), data.to_owned())
    }

    #[test]
    fn crlf_lf_and_cr_line_ends_all_frame_events() {
        let expected = vec![pair("a", "1"), pair("message", "2")];
        assert_eq!(events("event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n"), expected);
        assert_eq!(events("event: a\ndata: 1\n\ndata: 2\n\n"), expected);
        assert_eq!(events("event: a\rdata: 1\r\rdata: 2\r\r"), expected);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(
            events("data: {\"a\":\ndata:  1}\n\n"),
            vec![pair("message", "{\"a\":\n 1}")]
        );
    }

    #[test]
    fn comments_keep_alives_and_unknown_fields_are_ignored() {
        let text = ": keep-alive\n\n: OPENROUTER PROCESSING\n\nretry: 10\nfoo: bar\ndata: x\n\n:\n\nevent: ping\n\n";
        assert_eq!(events(text), vec![pair("message", "x")]);
    }

    #[test]
    fn a_bom_is_dropped_and_a_missing_final_blank_line_is_tolerated_in_recordings() {
        assert_eq!(
            events("\u{feff}data: a\n\ndata: b"),
            vec![pair("message", "a"), pair("message", "b")]
        );
        assert_eq!(events("\u{feff}\u{feff}data: a\n\n"), vec![pair("message", "a")]);
    }

    #[tokio::test]
    async fn a_split_bom_and_invalid_utf8_neither_panic_nor_stall() {
        let chunks: Vec<Result<&[u8], String>> = vec![Ok(b"\xEF\xBB"), Ok(b"\xBFdata: a\xFF\n\n"), Ok(b"data: b\n\n")];
        let parsed: Vec<_> = sse_events(futures::stream::iter(chunks)).collect().await;
        assert_eq!(
            parsed,
            vec![Ok(SseEvent::message("a\u{fffd}")), Ok(SseEvent::message("b"))]
        );
    }

    #[tokio::test]
    async fn over_a_byte_stream_split_crlf_and_split_utf8_are_reassembled() {
        let body = "event: e\r\ndata: h\u{e9}llo\r\n\r\n".as_bytes();
        // Split between \r and \n, and inside the two-byte é.
        let crlf_split = body.iter().position(|&b| b == b'\r').unwrap() + 1;
        let utf8_split = body.iter().position(|&b| b == 0xc3).unwrap() + 1;
        let chunks: Vec<Result<Vec<u8>, String>> = vec![
            Ok(body[..crlf_split].to_vec()),
            Ok(body[crlf_split..utf8_split].to_vec()),
            Ok(body[utf8_split..].to_vec()),
        ];
        let parsed: Vec<_> = sse_events(futures::stream::iter(chunks)).collect().await;
        assert_eq!(parsed, vec![Ok(SseEvent::named("e", "h\u{e9}llo"))]);
    }

    #[tokio::test]
    async fn over_a_byte_stream_a_partial_final_event_is_dropped_and_errors_pass_through() {
        let chunks: Vec<Result<&[u8], String>> = vec![Ok(b"data: 1\n\ndata: {\"trunc"), Err("reset by peer".into())];
        let parsed: Vec<_> = sse_events(futures::stream::iter(chunks)).collect().await;
        assert_eq!(
            parsed,
            vec![
                Ok(SseEvent::message("1")),
                Err(ProviderError::Transport("reset by peer".into()))
            ]
        );
        let chunks: Vec<Result<&[u8], String>> = vec![Ok(b"data: 1\n\ndata: 2\n")];
        let parsed: Vec<_> = sse_events(futures::stream::iter(chunks)).collect().await;
        assert_eq!(parsed, vec![Ok(SseEvent::message("1"))]);
    }
}
