//! Reading and writing delta logs (`*.jsonl`, `docs/scenario-format.md`).
//!
//! One delta event per line, each with an optional `at_ms` (virtual milliseconds since the response's request;
//! missing means "same as the previous line", 0 for the first; it must not decrease). Blank lines are ignored.
//! Every error names its 1-based line number.
//!
//! Lines are capped at [`MAX_LINE_BYTES`] so a hostile log cannot make the reader allocate without bound: the
//! reader stops buffering a line once it passes the cap.

use std::io::{BufRead, Write};

use serde_json::{Map, Value};

use crate::delta::DeltaEvent;

/// The longest line a delta log may have: 8 MiB. Longer lines are rejected without being buffered whole.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// A delta event with its scheduled time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedDelta {
    /// Milliseconds since the response's request.
    pub at_ms: u64,
    /// The event.
    pub event: DeltaEvent,
}

/// Why a delta log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DeltaLogError {
    /// Reading the underlying source failed.
    #[error("line {line}: read error: {source}")]
    Io {
        /// 1-based line number.
        line: usize,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid delta event.
    #[error("line {line}: {message}")]
    Invalid {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl DeltaLogError {
    /// The 1-based line number the error refers to.
    pub fn line(&self) -> usize {
        match self {
            DeltaLogError::Io { line, .. } | DeltaLogError::Invalid { line, .. } => *line,
        }
    }
}

/// Parses one delta event given as a JSON value with an optional `at_ms`; `previous_at_ms` fills a missing time
/// and bounds it from below. Shared by delta-log lines and inline scenario events.
pub fn parse_timed_delta(value: Value, previous_at_ms: u64) -> Result<TimedDelta, String> {
    let Value::Object(mut fields) = value else {
        return Err("a delta event must be a JSON object".to_owned());
    };
    let at_ms = match fields.remove("at_ms") {
        None => previous_at_ms,
        Some(value) => value
            .as_u64()
            .ok_or_else(|| format!("at_ms must be a non-negative integer, got {value}"))?,
    };
    if at_ms < previous_at_ms {
        return Err(format!(
            "at_ms {at_ms} is earlier than the previous event's {previous_at_ms}"
        ));
    }
    let event = serde_json::from_value::<DeltaEvent>(Value::Object(fields)).map_err(|err| err.to_string())?;
    Ok(TimedDelta { at_ms, event })
}

/// Iterates over the events of a delta log, one `Result` per non-blank line.
///
/// After the first error the iterator ends: later lines' times would be meaningless.
pub struct DeltaLogReader<R> {
    source: R,
    line: usize,
    previous_at_ms: u64,
    failed: bool,
    buffer: Vec<u8>,
}

impl<R: BufRead> DeltaLogReader<R> {
    /// Reads from `source`.
    pub fn new(source: R) -> Self {
        DeltaLogReader {
            source,
            line: 0,
            previous_at_ms: 0,
            failed: false,
            buffer: Vec::new(),
        }
    }

    /// Reads the next line into `self.buffer` (without its newline), refusing lines over the cap.
    /// Returns `Ok(false)` at end of input.
    fn read_line(&mut self) -> Result<bool, DeltaLogError> {
        self.buffer.clear();
        self.line += 1;
        let mut saw_any = false;
        loop {
            let available = match self.source.fill_buf() {
                Ok(bytes) => bytes,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(DeltaLogError::Io {
                        line: self.line,
                        source,
                    })
                }
            };
            if available.is_empty() {
                return Ok(saw_any);
            }
            saw_any = true;
            let (chunk, found_newline) = match available.iter().position(|&b| b == b'\n') {
                Some(pos) => (&available[..pos], true),
                None => (available, false),
            };
            if self.buffer.len() + chunk.len() > MAX_LINE_BYTES {
                return Err(DeltaLogError::Invalid {
                    line: self.line,
                    message: format!("line is longer than the {MAX_LINE_BYTES}-byte limit"),
                });
            }
            self.buffer.extend_from_slice(chunk);
            let consumed = chunk.len() + usize::from(found_newline);
            self.source.consume(consumed);
            if found_newline {
                return Ok(true);
            }
        }
    }

    fn next_event(&mut self) -> Option<Result<TimedDelta, DeltaLogError>> {
        loop {
            match self.read_line() {
                Err(err) => return Some(Err(err)),
                Ok(false) => return None,
                Ok(true) => {}
            }
            let line = self.line;
            let invalid = |message: String| Some(Err(DeltaLogError::Invalid { line, message }));
            let text = match std::str::from_utf8(&self.buffer) {
                Ok(text) => text.trim(),
                Err(err) => return invalid(format!("not valid UTF-8: {err}")),
            };
            if text.is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(text) {
                Ok(value) => value,
                Err(err) => return invalid(format!("not valid JSON: {err}")),
            };
            return match parse_timed_delta(value, self.previous_at_ms) {
                Ok(timed) => {
                    self.previous_at_ms = timed.at_ms;
                    Some(Ok(timed))
                }
                Err(message) => invalid(message),
            };
        }
    }
}

impl<R: BufRead> Iterator for DeltaLogReader<R> {
    type Item = Result<TimedDelta, DeltaLogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_event();
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Reads a whole delta log, stopping at the first bad line.
pub fn read_delta_log<R: BufRead>(source: R) -> Result<Vec<TimedDelta>, DeltaLogError> {
    DeltaLogReader::new(source).collect()
}

/// Writes events as a delta log, one line each, `at_ms` first.
pub fn write_delta_log<'a, W: Write>(
    mut sink: W,
    events: impl IntoIterator<Item = &'a TimedDelta>,
) -> std::io::Result<()> {
    for timed in events {
        let mut line = Map::new();
        line.insert("at_ms".to_owned(), Value::from(timed.at_ms));
        if let Value::Object(fields) = serde_json::to_value(&timed.event).map_err(std::io::Error::other)? {
            line.extend(fields);
        }
        serde_json::to_writer(&mut sink, &line).map_err(std::io::Error::other)?;
        sink.write_all(b"\n")?;
    }
    sink.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"at_ms": 0,   "type": "start"}

{"at_ms": 5,   "type": "text_start",     "index": 0}
{"type": "text_delta", "index": 0, "delta": "Let me check"}
{"at_ms": 20,  "type": "text_end",       "index": 0}
{"at_ms": 400, "type": "done", "stop_reason": "tool_use", "usage": {"input": 10, "output": 50}}
"#;

    #[test]
    fn reads_times_and_fills_missing_ones_from_the_previous_line() {
        let events = read_delta_log(LOG.as_bytes()).unwrap();
        let times: Vec<u64> = events.iter().map(|e| e.at_ms).collect();
        assert_eq!(times, vec![0, 5, 5, 20, 400]);
    }

    #[test]
    fn write_then_read_round_trips() {
        let events = read_delta_log(LOG.as_bytes()).unwrap();
        let mut out = Vec::new();
        write_delta_log(&mut out, &events).unwrap();
        assert_eq!(read_delta_log(out.as_slice()).unwrap(), events);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("{\"type\": \"start\"}\nnot json\n", 2, "not valid JSON"),
            ("{\"type\": \"start\"}\n\n{\"type\": \"nope\"}\n", 3, "unknown variant"),
            (
                "{\"at_ms\": 5, \"type\": \"start\"}\n{\"at_ms\": 4, \"type\": \"done\", \"stop_reason\": \"stop\"}",
                2,
                "earlier",
            ),
            ("{\"at_ms\": -1, \"type\": \"start\"}", 1, "non-negative"),
            ("[1]", 1, "must be a JSON object"),
        ];
        for (log, line, needle) in cases {
            let err = read_delta_log(log.as_bytes()).unwrap_err();
            assert_eq!(err.line(), line, "{log:?}: {err}");
            assert!(err.to_string().contains(needle), "{log:?}: {err}");
        }
        let err = read_delta_log(&b"{\"type\": \"start\"}\n\xff\xfe\n"[..]).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }

    #[test]
    fn overlong_lines_are_refused_without_buffering_them_whole() {
        let mut log = Vec::from(&b"{\"type\": \"start\"}\n"[..]);
        log.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        let err = read_delta_log(log.as_slice()).unwrap_err();
        assert_eq!(err.line(), 2);
        assert!(err.to_string().contains("limit"));
    }
}
