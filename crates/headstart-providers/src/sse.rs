//! Server-Sent Events framing, hand-written and linear in its input.
//!
//! Framing follows the HTML spec: lines end in CRLF, CR or LF (also when a CRLF is split across reads), `data:`
//! lines of one event are joined with `\n`, `:` comments (keep-alives), `retry:` and unknown fields are ignored, a
//! leading byte-order mark is dropped, and an event is dispatched at the blank line that ends it. An event without
//! data (e.g. a bare `event: ping` followed by a blank line) is not dispatched. Invalid UTF-8 becomes U+FFFD.
//!
//! Over a byte stream ([`sse_events`]), an event not yet terminated by a blank line when the body ends is
//! discarded, as the spec demands: the converter then sees the body end without the provider's terminal event and
//! reports the response as `error` (contract §5.5).
//!
//! **Linear time, bounded memory.** Each byte is scanned for a line end once (only the new bytes of a read are
//! scanned; the unfinished line is never rescanned) and copied at most once, into the unfinished line. One line,
//! or one event's kept fields (its `event` name and `data` lines) plus its unfinished line, may hold at most
//! [`MAX_EVENT_BYTES`]; more is refused with [`ProviderError::EventTooLarge`] as soon as the limit is crossed, so a
//! hostile body without line ends costs one pass over 16 MiB, not a quadratic rescan or unbounded memory.
//! (This replaces `eventsource-stream` 0.2, which panicked on a leading BOM and rescanned its buffer.)

use std::borrow::Cow;
use std::fmt::Display;

use futures::{Stream, StreamExt};

use crate::error::ProviderError;

/// The most bytes one SSE line, or one event (its `event` and `data` fields with the line being read), may hold:
/// 16 MiB, the engine's limit on one content block (`headstart_core::accumulator::MAX_BLOCK_BYTES`). A real
/// provider event is a few KiB; the largest (a Responses `response.completed` repeating the whole answer) is the
/// size of the response, far below this.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

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

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental parser: byte chunks in, dispatched events out. [`sse_events`] drives one over a stream; a caller
/// that is handed a body's chunks one at a time (the Python package, reading an SDK's HTTP response) feeds one
/// itself.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The unfinished line (before the start: the bytes that may still be a BOM).
    line: Vec<u8>,
    /// The last line ended with CR: an LF right after it belongs to the same line end.
    after_cr: bool,
    /// Past the leading byte-order marks.
    started: bool,
    /// The current event's `event` field.
    event_type: String,
    /// The current event's `data` lines, each followed by `\n`.
    data: String,
    /// The last `id` field (it carries over to later events, as the spec's "last event ID" does).
    last_id: String,
}

impl SseParser {
    /// Parses `bytes`, appending every event they complete to `out`. An event still unfinished stays inside
    /// until later bytes complete it; when the body ends there, it is discarded (see the module docs). After an
    /// `Err` ([`ProviderError::EventTooLarge`]) the parser must not be fed again: the stream is refused.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if self.started {
            return self.feed_started(bytes, out);
        }
        // Leading BOMs (a stream that repeats one is tolerated, as recordings sometimes do), possibly split across
        // reads: wait until the bytes can no longer be the start of a BOM.
        let mut head = std::mem::take(&mut self.line);
        head.extend_from_slice(bytes);
        let mut skip = 0;
        while head[skip..].starts_with(BOM) {
            skip += BOM.len();
        }
        if head.len() - skip < BOM.len() && BOM.starts_with(&head[skip..]) {
            head.drain(..skip);
            self.line = head;
            return Ok(());
        }
        self.started = true;
        self.feed_started(&head[skip..], out)
    }

    fn feed_started(&mut self, mut rest: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            self.check_size(end)?;
            let piece = &rest[..end];
            if self.line.is_empty() {
                self.line_ended(piece, out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(piece);
                self.line_ended(&line, out);
            }
            let cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.check_size(rest.len())?;
        self.line.extend_from_slice(rest);
        Ok(())
    }

    /// Refuses the stream when `more` bytes of the current line would take the event past [`MAX_EVENT_BYTES`].
    fn check_size(&self, more: usize) -> Result<(), ProviderError> {
        let size = self.line.len() + more + self.data.len() + self.event_type.len();
        if size > MAX_EVENT_BYTES {
            return Err(ProviderError::EventTooLarge { limit: MAX_EVENT_BYTES });
        }
        Ok(())
    }

    /// Interprets one complete line (without its line end).
    fn line_ended(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // a comment: keep-alives
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => self.event_type = text(value).into_owned(),
            b"data" => {
                self.data.push_str(&text(value));
                self.data.push('\n');
            }
            b"id" if !value.contains(&0) => self.last_id = text(value).into_owned(),
            _ => {} // `retry` (the client does not reconnect) and unknown fields
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event_type = std::mem::take(&mut self.event_type);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(SseEvent {
            event: if event_type.is_empty() {
                "message".to_owned()
            } else {
                event_type
            },
            data,
            id: self.last_id.clone(),
        });
    }
}

/// A field value as text: invalid UTF-8 becomes U+FFFD (a line never splits a UTF-8 sequence: line ends are ASCII).
fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Parses SSE events from a byte stream (for example `reqwest`'s body chunks).
///
/// Transport errors become [`ProviderError::Transport`], a line or event over [`MAX_EVENT_BYTES`]
/// [`ProviderError::EventTooLarge`]; either ends the stream (after the events completed before it). The stream
/// ends when the body does; a partial event at the end of the body is discarded (see the module docs).
pub fn sse_events<S, B, E>(bytes: S) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: Display + Send,
{
    futures::stream::unfold(Some((Box::pin(bytes), SseParser::default())), |state| async move {
        let (mut bytes, mut parser) = state?;
        loop {
            let mut events = Vec::new();
            let failure = match bytes.next().await {
                Some(Ok(chunk)) => parser.feed(chunk.as_ref(), &mut events).err(),
                Some(Err(err)) => Some(ProviderError::Transport(err.to_string())),
                None => return None,
            };
            let mut items: Vec<_> = events.into_iter().map(Ok).collect();
            match failure {
                Some(error) => {
                    items.push(Err(error));
                    return Some((items, None));
                }
                None if items.is_empty() => continue,
                None => return Some((items, Some((bytes, parser)))),
            }
        }
    })
    .flat_map(futures::stream::iter)
}

/// Parses a whole recorded SSE body.
///
/// Unlike [`sse_events`], a final event that lacks its terminating blank line is still dispatched: recorded files
/// often lose their trailing newline, and a recording is complete by definition. Parsing costs O(text length).
pub fn parse_sse_text(text: &str) -> Result<Vec<SseEvent>, ProviderError> {
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    parser.feed(text.as_bytes(), &mut events)?;
    parser.feed(b"\n\n", &mut events)?;
    Ok(events)
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

    #[test]
    fn empty_data_is_dispatched_ids_carry_over_and_a_lone_cr_before_lf_in_the_next_read_is_one_line_end() {
        assert_eq!(events("data:\n\n"), vec![pair("message", "")]);
        let parsed = parse_sse_text("id: 7\ndata: a\n\ndata: b\n\nid: 8\u{0}\ndata: c\n\n").unwrap();
        let ids: Vec<&str> = parsed.iter().map(|event| event.id.as_str()).collect();
        assert_eq!(ids, ["7", "7", "7"], "an id with NUL is ignored");

        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in [&b"data: a\r"[..], b"\n", b"\r", b"\ndata: b\r", b"\r"] {
            parser.feed(chunk, &mut out).unwrap();
        }
        assert_eq!(out, vec![SseEvent::message("a"), SseEvent::message("b")]);
    }

    /// Feeds `total` bytes of one line without a line end, in `chunk`-sized reads; returns the error and the time.
    fn endless_line(total: usize, chunk: usize) -> (ProviderError, std::time::Duration) {
        let piece = vec![b'x'; chunk];
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let started = std::time::Instant::now();
        parser.feed(b"data: ", &mut out).unwrap();
        let mut fed = 0;
        while fed < total {
            if let Err(err) = parser.feed(&piece, &mut out) {
                return (err, started.elapsed());
            }
            fed += chunk;
        }
        panic!("{total} bytes without a line end were accepted");
    }

    #[test]
    fn a_line_without_end_is_refused_at_the_limit_in_linear_time() {
        // 32 MiB in 8 KiB reads (the old parser rescanned its buffer on every read: quadratic).
        let (err, took) = endless_line(32 * 1024 * 1024, 8 * 1024);
        println!("32 MiB line in 8 KiB reads refused after {took:?}");
        assert_eq!(err, ProviderError::EventTooLarge { limit: MAX_EVENT_BYTES });
        assert_eq!(
            err.to_string(),
            "an SSE line or event exceeds the 16 MiB limit: the stream is refused"
        );
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");
        // Small reads cost more calls, not more scanning.
        let (_, took) = endless_line(32 * 1024 * 1024, 64);
        println!("32 MiB line in 64-byte reads refused after {took:?}");
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    }

    #[test]
    fn an_event_of_many_lines_is_limited_as_a_whole_and_comments_hold_no_memory() {
        let line = format!("data: {}\n", "y".repeat(1024 * 1024));
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let refused = (0..32).find_map(|_| parser.feed(line.as_bytes(), &mut out).err());
        assert_eq!(refused, Some(ProviderError::EventTooLarge { limit: MAX_EVENT_BYTES }));
        assert!(out.is_empty());

        // 64 MiB of comment lines (each under the limit) keep nothing.
        let comment = format!(": {}\n", "z".repeat(1024 * 1024));
        let mut parser = SseParser::default();
        for _ in 0..64 {
            parser.feed(comment.as_bytes(), &mut out).unwrap();
        }
        parser.feed(b"data: ok\n\n", &mut out).unwrap();
        assert_eq!(out, vec![SseEvent::message("ok")]);
    }

    #[tokio::test]
    async fn events_before_a_refused_line_are_kept() {
        let mut body = b"data: 1\n\ndata: ".to_vec();
        body.resize(MAX_EVENT_BYTES + 100, b'x');
        let chunks: Vec<Result<Vec<u8>, String>> = vec![Ok(body), Ok(b"\n\n".to_vec())];
        let parsed: Vec<_> = sse_events(futures::stream::iter(chunks)).collect().await;
        assert_eq!(
            parsed,
            vec![
                Ok(SseEvent::message("1")),
                Err(ProviderError::EventTooLarge { limit: MAX_EVENT_BYTES })
            ]
        );
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
