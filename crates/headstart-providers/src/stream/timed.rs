//! Bounding how long a stream of SSE events may take: an idle limit between events and a deadline on the whole
//! response.

use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use crate::error::ProviderError;
use crate::sse::SseEvent;

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
