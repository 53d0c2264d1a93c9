//! [`SseDeltas`]: SSE events in, delta events out.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures::Stream;
use headstart_core::{DeltaEvent, ModelError};
use pin_project_lite::pin_project;

use crate::converter::StreamConverter;
use crate::sse::SseEvent;

pin_project! {
    /// Stream for [`delta_stream`](super::delta_stream) and [`sse_delta_stream`](super::sse_delta_stream): a
    /// stream of SSE events read by a [`StreamConverter`], yielding delta events.
    ///
    /// It always yields a well-formed response: `start` first and exactly one terminal event. A failed event item
    /// (its error's kind and message), unparseable provider data or a stream that ends before the provider's
    /// terminal event all end it with an `error` event, never an `Err` item. The events are dropped as soon as the
    /// terminal event is produced (a response body's connection closes then); nothing after it is read.
    #[must_use = "streams do nothing unless polled"]
    pub struct SseDeltas<S, C> {
        // `None` once the response ended.
        #[pin]
        events: Option<S>,
        converter: C,
        // What the converter produced and the consumer has not taken yet.
        queue: VecDeque<DeltaEvent>,
    }
}

impl<S, C> SseDeltas<S, C> {
    /// Reads `events` with `converter` (a fresh one: one converter reads one response).
    pub fn new(events: S, converter: C) -> Self {
        SseDeltas {
            events: Some(events),
            converter,
            queue: VecDeque::new(),
        }
    }
}

impl<S, E, C> Stream for SseDeltas<S, C>
where
    S: Stream<Item = Result<SseEvent, E>>,
    E: Into<ModelError>,
    C: StreamConverter,
{
    type Item = Result<DeltaEvent, ModelError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some(delta) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(delta)));
            }
            let Some(events) = this.events.as_mut().as_pin_mut() else {
                return Poll::Ready(None);
            };
            let item = ready!(events.poll_next(cx)).map(|item| item.map_err(Into::into));
            this.converter.feed(item.as_ref().map(Result::as_ref), this.queue);
            if item.is_none() || this.converter.is_ended() {
                this.events.set(None);
            }
        }
    }
}
