//! Byte stream in, delta stream out: the asynchronous glue between an HTTP body and a converter.

use std::collections::VecDeque;
use std::fmt::Display;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
pub use headstart_core::DeltaStream;
use headstart_core::{DeltaEvent, ModelError};
use tokio::time::Instant;

use crate::error::ProviderError;
use crate::sse::{sse_events, SseEvent};
use crate::{ConvertOptions, StreamConverter, WireFormat};

type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ModelError>> + Send>>;

struct State {
    /// `None` once the response ended: the body is dropped (and its connection closed) right away.
    events: Option<SseStream>,
    converter: Box<dyn StreamConverter>,
    queue: VecDeque<DeltaEvent>,
}

/// Converts a response body (a stream of byte chunks, e.g. `reqwest`'s) in `format` to delta events.
///
/// The stream always yields a well-formed response: `start` first and exactly one terminal event. A transport
/// error, a body that ends before the provider's terminal event (contract §5.5) or unparseable provider data all end it
/// with an `error` event (not an `Err` item), so the partial response and any usage survive. The body is dropped as
/// soon as the terminal event is produced; dropping the returned stream drops the body too.
pub fn delta_stream<S, B, E>(format: WireFormat, options: &ConvertOptions, bytes: S) -> DeltaStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: Display + Send + 'static,
{
    typed_delta_stream(format, options, sse_events(bytes))
}

/// Converts a stream of SSE events already framed (by another client library, say) in `format` to delta events,
/// with the guarantees of [`delta_stream`]: the same converter reads them, so both give the same deltas. An `Err`
/// item is a failure of whatever carries the events: it ends the response as an error of kind
/// [`headstart_core::ModelErrorKind::Transport`].
pub fn sse_delta_stream<S, E>(format: WireFormat, options: &ConvertOptions, events: S) -> DeltaStream
where
    S: Stream<Item = Result<SseEvent, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let events = events.map(|event| event.map_err(|err| ModelError::transport(err.to_string())));
    typed_delta_stream(format, options, events)
}

/// [`sse_delta_stream`] for events whose errors know their kind.
pub(crate) fn typed_delta_stream<S, E>(format: WireFormat, options: &ConvertOptions, events: S) -> DeltaStream
where
    S: Stream<Item = Result<SseEvent, E>> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
{
    let state = State {
        events: Some(Box::pin(events.map(|event| event.map_err(Into::into)))),
        converter: format.converter(options),
        queue: VecDeque::new(),
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok(event), state));
            }
            let events = state.events.as_mut()?;
            let produced = match events.next().await {
                Some(Ok(event)) => state
                    .converter
                    .push(&event)
                    .unwrap_or_else(|err| state.converter.fail(&err.into())),
                Some(Err(err)) => state.converter.fail(&err),
                None => state.converter.finish(),
            };
            state.queue.extend(produced);
            if state.converter.is_ended() {
                state.events = None;
            }
        }
    })
    .boxed()
}

/// `instant + duration`, or about thirty years on when that is past what the clock can hold (a limit of
/// `u64::MAX` seconds means "no limit", not a panic).
pub(crate) fn later(instant: Instant, duration: Duration) -> Instant {
    instant
        .checked_add(duration)
        .or_else(|| instant.checked_add(Duration::from_secs(30 * 365 * 86_400)))
        .unwrap_or(instant)
}

/// Ends `events` with a typed error when it stalls: [`ProviderError::IdleTimeout`] when no event arrives within
/// `idle` of asking for it, [`ProviderError::ResponseTimeout`] when `total` has passed since `started` (the moment
/// the request was sent), whichever comes first. Runs on tokio's clock.
///
/// Only an event restarts the idle timer. `events` yields dispatched SSE events only, so keep-alive comments, blank
/// lines and the bytes of an unfinished event do not: a keep-alive shows that the connection is open, not that the
/// model is answering, and a server that sends nothing else (or drips one event byte by byte) must not hold a run
/// forever. A provider that works silently for longer than `idle` behind comment keep-alives needs a longer idle
/// limit; the total limit bounds every response whatever arrives.
pub fn timed_events<S>(
    events: S,
    idle: Duration,
    total: Duration,
    started: Instant,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<SseEvent, ProviderError>> + Send,
{
    let deadline = later(started, total);
    futures::stream::unfold(Some(Box::pin(events)), move |events| async move {
        let mut events = events?;
        let idle_at = later(Instant::now(), idle);
        let (at, timeout) = if idle_at < deadline {
            (idle_at, ProviderError::IdleTimeout { limit: idle })
        } else {
            (deadline, ProviderError::ResponseTimeout { limit: total })
        };
        match tokio::time::timeout_at(at, events.next()).await {
            Ok(Some(item)) => Some((item, Some(events))),
            Ok(None) => None,
            Err(_) => Some((Err(timeout), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Stream<Item = Result<&'static [u8], String>> + Send + 'static {
        futures::stream::iter(parts.iter().map(|part| Ok(part.as_bytes())).collect::<Vec<_>>())
    }

    async fn collect(stream: DeltaStream) -> Vec<DeltaEvent> {
        stream.map(|item| item.unwrap()).collect().await
    }

    #[tokio::test]
    async fn a_body_that_drops_mid_stream_ends_as_error() {
        let body = chunks(&[
            "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\r\n\r\n",
            ": keep-alive\r\n\r\n",
            "event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0,",
        ]);
        let events = collect(delta_stream(WireFormat::Anthropic, &ConvertOptions::default(), body)).await;
        assert_eq!(events.len(), 2, "{events:?}");
        let DeltaEvent::Error { message, .. } = &events[1] else {
            panic!("{events:?}")
        };
        assert!(message.contains("before message_stop"), "{message}");
        assert!(matches!(
            &events[1],
            DeltaEvent::Error {
                kind: Some(headstart_core::ModelErrorKind::Protocol),
                ..
            }
        ));
    }

    #[tokio::test]
    async fn transport_errors_and_bad_json_end_as_error_after_start() {
        let body = futures::stream::iter(vec![
            Ok::<&[u8], String>(b"data: {\"id\":\"r\",\"choices\":[]}\n\n"),
            Err("connection reset".to_owned()),
        ]);
        let events = collect(delta_stream(WireFormat::OpenAiChat, &ConvertOptions::default(), body)).await;
        assert!(matches!(&events[0], DeltaEvent::Start { response_id: Some(id), .. } if id == "r"));
        assert!(
            matches!(&events[1], DeltaEvent::Error { message, kind: Some(headstart_core::ModelErrorKind::Transport), .. } if message.contains("connection reset")),
            "{events:?}"
        );

        let body = chunks(&["data: {not json\n\n"]);
        let events = collect(delta_stream(WireFormat::Gemini, &ConvertOptions::default(), body)).await;
        assert_eq!(events[0].type_name(), "start");
        assert!(matches!(&events[1], DeltaEvent::Error { message, .. } if message.contains("not valid JSON")));
    }

    /// SSE bytes: `each` sent every `every`, forever.
    fn every(every: Duration, each: &'static str) -> impl Stream<Item = Result<&'static [u8], String>> + Send {
        futures::stream::unfold((), move |()| async move {
            tokio::time::sleep(every).await;
            Some((Ok(each.as_bytes()), ()))
        })
    }

    async fn first_error(events: impl Stream<Item = Result<SseEvent, ProviderError>>) -> (usize, ProviderError) {
        let items: Vec<_> = events.collect().await;
        let (last, events) = items.split_last().unwrap();
        (events.len(), last.clone().unwrap_err())
    }

    #[tokio::test(start_paused = true)]
    async fn keep_alives_do_not_restart_the_idle_timer() {
        let started = Instant::now();
        let events = timed_events(
            sse_events(every(Duration::from_secs(1), ": keep-alive\n\n")),
            Duration::from_secs(3),
            Duration::from_secs(600),
            started,
        );
        let (count, error) = first_error(events).await;
        assert_eq!((count, started.elapsed()), (0, Duration::from_secs(3)));
        assert_eq!(
            error.to_string(),
            "the stream timed out: no event for 3 s (idle timeout)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_of_events_ends_at_the_response_deadline() {
        let started = Instant::now();
        let events = timed_events(
            sse_events(every(Duration::from_millis(1500), "event: ping\ndata: {}\n\n")),
            Duration::from_secs(3),
            Duration::from_secs(10),
            started,
        );
        let (count, error) = first_error(events).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(count, 6, "pings at 1.5 s to 9 s; the one at 10.5 s comes too late");
        assert_eq!(
            error,
            ProviderError::ResponseTimeout {
                limit: Duration::from_secs(10)
            }
        );
        assert_eq!(
            error.to_string(),
            "the response did not finish within 10 s (--response-timeout)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unbounded_limits_do_not_overflow_the_clock() {
        let events = futures::stream::iter(vec![Ok(SseEvent::message("a"))]);
        let items: Vec<_> = timed_events(events, Duration::MAX, Duration::MAX, Instant::now())
            .collect()
            .await;
        assert_eq!(items, vec![Ok(SseEvent::message("a"))]);
    }

    #[tokio::test]
    async fn nothing_is_read_after_the_terminal_event() {
        let body = futures::stream::iter(vec![
            Ok::<&[u8], String>(b"data: {\"candidates\":[{\"finishReason\":\"STOP\"}]}\n\n"),
            Err("must not be reached".to_owned()),
        ]);
        let events = collect(delta_stream(WireFormat::Gemini, &ConvertOptions::default(), body)).await;
        assert_eq!(
            events.iter().map(DeltaEvent::type_name).collect::<Vec<_>>(),
            ["start", "done"]
        );
    }
}
