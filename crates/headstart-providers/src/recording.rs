//! Recordings with arrival times: every response's SSE events as they came off the wire, each with the time it
//! reached the converter.
//!
//! A recording is itself an SSE body, so [`read_capture`](crate::read_capture), `headstart convert` and the replay
//! server read it as they read any capture. The times ride in SSE comments, which every SSE reader skips:
//!
//! ```text
//! : headstart-recording format=openai-chat
//!
//! : at_ms=0.412
//! data: {"id":"chatcmpl-1","choices":[...]}
//!
//! : at_ms=52.930
//! data: [DONE]
//! ```
//!
//! Each response starts with a `headstart-recording` comment naming its wire format; `at_ms` counts milliseconds
//! from the moment its converter was made (the response's headers had arrived). [`Recorder`] writes one (every
//! converter made with it records, through [`ConvertOptions::record`](crate::ConvertOptions::record), by way of
//! the `recorded` adapter);
//! [`read_recording`] reads one back. The writer is a file of its own (`recorder.rs`) because the converters
//! hold it, and reading names wire formats, which are made of converters.

use crate::error::ProviderError;
pub use crate::recorder::Recorder;
use crate::recorder::{AT, HEADER};
use crate::sse::{parse_sse_text, SseEvent};
use crate::wire_format::WireFormat;

/// One event of a recording, with when it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedSseEvent {
    /// Milliseconds from the start of its response; `None` when the recording carries no times.
    pub at_ms: Option<f64>,
    /// The event.
    pub event: SseEvent,
}

/// One recorded response.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedResponse {
    /// Its wire format, as the recording names it (`None` for a capture that does not).
    pub format: Option<WireFormat>,
    /// Its events, in arrival order.
    pub events: Vec<TimedSseEvent>,
}

/// Reads a recording: each response with its format and its events' times. A capture without the recording's
/// comments (a raw SSE body, a YAML cassette) reads as responses whose format and times are `None`.
pub fn read_recording(text: &str) -> Result<Vec<RecordedResponse>, ProviderError> {
    if !text.trim_start().starts_with(HEADER) {
        return crate::read_capture(text)?
            .iter()
            .map(|exchange| {
                let events = parse_sse_text(&exchange.body)?
                    .into_iter()
                    .map(|event| TimedSseEvent { at_ms: None, event })
                    .collect();
                Ok(RecordedResponse { format: None, events })
            })
            .collect();
    }
    let mut responses: Vec<RecordedResponse> = Vec::new();
    let mut at_ms: Option<f64> = None;
    let mut block = String::new();
    for (number, line) in text.lines().enumerate() {
        let bad = |what: &str| ProviderError::Capture(format!("recording line {}: {what}", number + 1));
        if let Some(name) = line.strip_prefix(HEADER) {
            let format = name
                .trim()
                .parse::<WireFormat>()
                .map_err(|error| bad(&error.to_string()))?;
            responses.push(RecordedResponse {
                format: Some(format),
                events: Vec::new(),
            });
        } else if let Some(time) = line.strip_prefix(AT) {
            let time = time
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|time| time.is_finite() && *time >= 0.0)
                .ok_or_else(|| bad("at_ms is not a time"))?;
            at_ms = Some(time);
        } else if line.is_empty() {
            if !block.is_empty() {
                let response = responses
                    .last_mut()
                    .ok_or_else(|| bad("an event before any response"))?;
                for event in parse_sse_text(&block)? {
                    response.events.push(TimedSseEvent { at_ms, event });
                }
                block.clear();
            }
        } else {
            block.push_str(line);
            block.push('\n');
        }
    }
    if !block.is_empty() {
        let response = responses
            .last_mut()
            .ok_or_else(|| ProviderError::Capture("recording: an event before any response".to_owned()))?;
        for event in parse_sse_text(&block)? {
            response.events.push(TimedSseEvent { at_ms, event });
        }
    }
    Ok(responses)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::ConvertOptions;
    use std::collections::VecDeque;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn chunk(data: &str) -> SseEvent {
        SseEvent::message(data)
    }

    #[test]
    fn a_recording_reads_back_as_the_events_it_recorded_with_rising_times_and_converts_alike() {
        let shared = Shared::default();
        let recorder = Recorder::to_writer(shared.clone());
        let options = ConvertOptions {
            record: Some(recorder),
            ..ConvertOptions::default()
        };
        let events = [
            chunk(r#"{"id":"r","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}"#),
            chunk(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
            chunk("[DONE]"),
            SseEvent::named("late", "one\ntwo"),
        ];
        let live = crate::convert_events(WireFormat::OpenAiChat, &events, &options);
        let second = [SseEvent::named("message_start", "{\"x\": 1}\nsecond line")];
        let mut converter = WireFormat::Anthropic.converter(&options);
        let _ = converter.push(&second[0], &mut VecDeque::new());

        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        let recording = read_recording(&text).unwrap();
        assert_eq!(recording.len(), 2, "{text}");
        assert_eq!(recording[0].format, Some(WireFormat::OpenAiChat));
        let read: Vec<SseEvent> = recording[0].events.iter().map(|timed| timed.event.clone()).collect();
        assert_eq!(read, events[..3], "nothing after the terminal event is recorded");
        let times: Vec<f64> = recording[0].events.iter().filter_map(|timed| timed.at_ms).collect();
        assert_eq!(times.len(), 3);
        assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
        assert_eq!(recording[1].format, Some(WireFormat::Anthropic));
        assert_eq!(recording[1].events[0].event, second[0]);
        // The recording is an SSE body: converted as a capture, it gives the live deltas.
        let replayed = crate::convert_events(WireFormat::OpenAiChat, &read, &ConvertOptions::default());
        assert_eq!(
            replayed.into_iter().map(|(_, e)| e).collect::<Vec<_>>(),
            live.into_iter().map(|(_, e)| e).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_capture_without_times_reads_with_none_and_a_broken_recording_names_its_line() {
        let untimed = read_recording("data: {}\n\ndata: [DONE]\n\n").unwrap();
        assert_eq!(untimed.len(), 1);
        assert_eq!(untimed[0].format, None);
        assert!(untimed[0].events.iter().all(|timed| timed.at_ms.is_none()));
        let error =
            read_recording(": headstart-recording format=openai-chat\n\n: at_ms=soon\ndata: {}\n\n").unwrap_err();
        assert!(error.to_string().contains("line 3"), "{error}");
        let error = read_recording(": headstart-recording format=morse\n").unwrap_err();
        assert!(error.to_string().contains("line 1"), "{error}");
    }
}
