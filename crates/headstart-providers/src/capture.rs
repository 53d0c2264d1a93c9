//! Recorded captures: raw SSE bodies, or YAML cassettes of HTTP exchanges, converted to delta logs.
//!
//! [`convert_events`] is the synchronous twin of [`crate::SseDeltas`]: both feed a converter the same way
//! ([`StreamConverter::feed`]), so a recording gives the deltas its live stream gives.
//!
//! A cassette (the format of `tests/fixtures/providers/`) holds one or more YAML documents separated by `---`; each
//! has `when` (the request; its `body` is the JSON request text) and `then` (`status`, and `body`, the raw SSE text
//! exactly as received). A capture whose first meaningful line is `when:`, `then:` or `---` is read as a cassette;
//! anything else is one raw SSE body.

use std::collections::VecDeque;

use headstart_core::delta_log::TimedDelta;
use headstart_core::DeltaEvent;
use serde::Deserialize;

use crate::converter::{ConvertOptions, StreamConverter};
use crate::error::ProviderError;
use crate::sse::{parse_sse_text, SseEvent};
use crate::wire_error::error_message;
use crate::wire_format::WireFormat;

/// One recorded HTTP exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The response status, if recorded (raw SSE captures have none).
    pub status: Option<u16>,
    /// The request path, if recorded.
    pub request_path: Option<String>,
    /// The JSON request body, if recorded.
    pub request_body: Option<String>,
    /// The response body: the raw SSE text.
    pub body: String,
}

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    when: Option<When>,
    then: Then,
}

#[derive(Deserialize)]
struct When {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct Then {
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    body: String,
}

fn is_cassette(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .is_some_and(|line| line.starts_with("when:") || line.starts_with("then:") || line.starts_with("---"))
}

/// Reads a capture: every exchange of a YAML cassette, or one exchange holding a raw SSE body.
pub fn read_capture(text: &str) -> Result<Vec<Exchange>, ProviderError> {
    if !is_cassette(text) {
        return Ok(vec![Exchange {
            status: None,
            request_path: None,
            request_body: None,
            body: text.to_owned(),
        }]);
    }
    let mut exchanges = Vec::new();
    for (number, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = serde_norway::Value::deserialize(document)
            .map_err(|err| ProviderError::Capture(format!("YAML document {}: {err}", number + 1)))?;
        if value.is_null() {
            continue; // an empty document (a trailing `---`)
        }
        let document: Document = serde_norway::from_value(value)
            .map_err(|err| ProviderError::Capture(format!("YAML document {}: {err}", number + 1)))?;
        exchanges.push(Exchange {
            status: document.then.status,
            request_path: document.when.as_ref().and_then(|when| when.path.clone()),
            request_body: document.when.and_then(|when| when.body),
            body: document.then.body,
        });
    }
    if exchanges.is_empty() {
        return Err(ProviderError::Capture("the cassette holds no exchange".to_owned()));
    }
    Ok(exchanges)
}

/// Runs a whole sequence of SSE events through a fresh converter and returns every delta event with the 0-based
/// position of the SSE event that produced it (`events.len()` for what the end of the body produced).
///
/// Conversion stops at the terminal event; a converter error ends the response as `error` with its message.
pub fn convert_events(format: WireFormat, events: &[SseEvent], options: &ConvertOptions) -> Vec<(usize, DeltaEvent)> {
    let mut converter = format.converter(options);
    let mut queue = VecDeque::new();
    let mut out = Vec::new();
    for (position, event) in events.iter().enumerate() {
        converter.feed(Some(Ok(event)), &mut queue);
        out.extend(queue.drain(..).map(|delta| (position, delta)));
        if converter.is_ended() {
            return out;
        }
    }
    converter.feed(None, &mut queue);
    out.extend(queue.drain(..).map(|delta| (events.len(), delta)));
    out
}

/// Converts one recorded response body to a delta log.
///
/// `at_ms` is the 0-based position of the SSE event that produced each delta (so the deltas of one wire event share
/// a time, and the log's timing mirrors the wire's event order); what the end of the body produces comes one
/// millisecond after the last event. A non-2xx `status` yields `start` and an `error` naming the status and the
/// provider's message.
pub fn convert_body(
    format: WireFormat,
    status: Option<u16>,
    body: &str,
    options: &ConvertOptions,
) -> Result<Vec<TimedDelta>, ProviderError> {
    if let Some(status) = status.filter(|status| !(200..300).contains(status)) {
        let message = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .map(|value| error_message(value.get("error").unwrap_or(&value)))
            .unwrap_or_else(|| body.trim().chars().take(500).collect());
        return Ok(vec![
            TimedDelta {
                at_ms: 0,
                event: DeltaEvent::Start {
                    model: None,
                    response_id: None,
                },
            },
            TimedDelta {
                at_ms: 0,
                event: DeltaEvent::Error {
                    stop_reason: headstart_core::ErrorReason::Error,
                    message: format!("HTTP {status}: {message}"),
                    usage: None,
                    kind: Some(headstart_core::ModelErrorKind::Http {
                        status,
                        retry_after: None,
                    }),
                },
            },
        ]);
    }
    let events = parse_sse_text(body)?;
    Ok(convert_events(format, &events, options)
        .into_iter()
        .map(|(position, event)| TimedDelta {
            at_ms: position as u64,
            event,
        })
        .collect())
}

/// Converts a recorded capture (raw SSE text or a YAML cassette) to one delta log per exchange.
pub fn convert_capture(
    format: WireFormat,
    text: &str,
    options: &ConvertOptions,
) -> Result<Vec<Vec<TimedDelta>>, ProviderError> {
    read_capture(text)?
        .iter()
        .map(|exchange| convert_body(format, exchange.status, &exchange.body, options))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_sse_and_cassettes_are_told_apart() {
        let raw = read_capture("data: {}\n\n").unwrap();
        assert_eq!(raw.len(), 1);
        assert_eq!(raw[0].body, "data: {}\n\n");
        let cassette = "when:\n  path: /x\n  body: '{}'\nthen:\n  status: 200\n  body: |+\n    data: 1\n\n---\nwhen:\n  path: /y\nthen:\n  status: 500\n  body: '{\"error\": {\"message\": \"down\"}}'\n---\n";
        let exchanges = read_capture(cassette).unwrap();
        assert_eq!(exchanges.len(), 2);
        assert_eq!(exchanges[0].body, "data: 1\n\n");
        assert_eq!(exchanges[0].request_body.as_deref(), Some("{}"));
        assert_eq!(exchanges[1].status, Some(500));
        let logs = convert_capture(WireFormat::Anthropic, cassette, &ConvertOptions::default()).unwrap();
        assert!(
            matches!(&logs[1][1].event, DeltaEvent::Error { message, .. } if message == "HTTP 500: down"),
            "{:?}",
            logs[1]
        );
    }

    #[test]
    fn broken_yaml_is_a_capture_error() {
        let err = read_capture("when:\n  path: [\nthen: x\n").unwrap_err();
        assert!(matches!(err, ProviderError::Capture(_)), "{err}");
    }
}
