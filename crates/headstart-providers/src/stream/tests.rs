use std::time::Duration;

use futures::{Stream, StreamExt};
use headstart_core::DeltaEvent;
use tokio::time::Instant;

use super::*;
use crate::error::ProviderError;
use crate::sse::{sse_events, SseEvent};
use crate::{ConvertOptions, WireFormat};

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
