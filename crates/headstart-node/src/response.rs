//! [`NativeResponse`]: one wrapped response, its feed in and its events out.
//!
//! Events go to JavaScript in batches, not one promise per event: each `nextBatch` takes every event that is ready
//! once the first one is (at most [`MAX_BATCH`]), as one JSON array, which the package yields one by one. The batch
//! that holds the last event also says that the run has ended (a trailing `null`).

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt};
use headstart::core::model::Message;
use headstart::{AgentEvent, CancellationToken, EventStream};
use headstart_providers::Feed;
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::js_error;

/// The most events one batch carries, so that a long burst still reaches JavaScript in pieces.
pub const MAX_BATCH: usize = 512;

/// What `nextBatch` gives once the run has ended and its end was read.
const ENDED: &str = "[null]";

/// One response being wrapped: the model's stream goes in through the feed methods, the engine's events come out
/// through `nextBatch`.
#[napi]
pub struct NativeResponse {
    feed: Mutex<Feed>,
    events: Arc<tokio::sync::Mutex<Events>>,
    /// The task that opens the response and then outlives it until every task of the run has ended; every caller
    /// of `settled` and `close` waits for it.
    settled: Shared<BoxFuture<'static, ()>>,
    cancel: CancellationToken,
    /// Wakes a `nextBatch` that waits, which then gives an empty batch ([`wake`](NativeResponse::wake)).
    wake: Arc<tokio::sync::Notify>,
}

/// The engine's side of a response: being opened, open, or gone (its end read, closed, or failed to open).
enum Events {
    Opening(oneshot::Receiver<Result<EventStream, String>>),
    Open(EventStream),
    Gone,
}

impl NativeResponse {
    /// The response of `feed`, whose run `opening` starts (its events, or why it could not start), cancelled by
    /// `cancel`. `opening` runs on the addon's runtime at once.
    pub fn opening<F>(feed: Feed, opening: F, cancel: CancellationToken) -> Self
    where
        F: std::future::Future<Output = Result<EventStream, String>> + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        let settled = napi::bindgen_prelude::spawn(async move {
            match opening.await {
                Ok(events) => {
                    let settled = events.settled();
                    // A response closed while it opened drops the receiver, and with it these events: the run is
                    // cancelled, and settles.
                    let _ = sender.send(Ok(events));
                    settled.await;
                }
                Err(why) => {
                    let _ = sender.send(Err(why));
                }
            }
        });
        NativeResponse {
            feed: Mutex::new(feed),
            events: Arc::new(tokio::sync::Mutex::new(Events::Opening(receiver))),
            // A task that panicked has nothing left to wait for.
            settled: settled.map(drop).boxed().shared(),
            cancel,
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the task that opens the response and outlives its run.
    async fn wait_settled(&self) {
        self.settled.clone().await;
    }

    /// What [`settled`](Self::settled) waits for, to be awaited off Node's thread (the next response's opening).
    pub fn settled_future(&self) -> Shared<BoxFuture<'static, ()>> {
        self.settled.clone()
    }
}

#[napi]
impl NativeResponse {
    /// Hands over one event: its JSON text, and its SSE event name where the format names events. A `headstart`
    /// feed refuses an event that is not a delta event.
    #[napi]
    pub fn push(&self, data: String, event: Option<String>) -> napi::Result<()> {
        self.feed().push(data, event).map_err(js_error)
    }

    /// Hands over delta events, one JSON text per line (a `headstart` feed): one call for a burst of events, parsed
    /// off Node's thread, as the engine reads them.
    #[napi]
    pub fn push_deltas(&self, lines: String) -> napi::Result<()> {
        self.feed().push_lines(lines).map_err(js_error)
    }

    /// Hands over the next chunk of the provider's SSE body, as read from the HTTP response.
    #[napi]
    pub fn push_body(&self, data: Buffer) -> napi::Result<()> {
        self.feed().push_body(&data).map_err(js_error)
    }

    /// The stream ended cleanly.
    #[napi]
    pub fn end(&self) {
        self.feed().end();
    }

    /// The stream failed: the response ends as `error` with `message`.
    #[napi]
    pub fn fail(&self, message: String) {
        self.feed().fail(message);
    }

    /// The next events as a JSON array (each event as the engine serializes it), at least one element unless
    /// [`wake`](Self::wake) ended the wait (an empty array then). Once the run has ended (its last event taken, and every task of it ended: every admitted call has its stored result),
    /// the array ends with `null`; every later call gives `[null]`. The end comes with the last events, so a reader
    /// needs no further call to learn it. With `calls_only`, only what a caller that streams the response itself
    /// needs: the calls' events, their stored results, and the end (no `message_update` per delta to serialize and
    /// parse again).
    #[napi]
    pub async fn next_batch(&self, calls_only: Option<bool>) -> napi::Result<String> {
        let calls_only = calls_only.unwrap_or(false);
        let events = Arc::clone(&self.events);
        let mut guard = events.lock().await;
        if let Events::Opening(receiver) = &mut *guard {
            let opened = receiver
                .await
                .unwrap_or_else(|_| Err("the response's opening task ended".into()));
            match opened {
                Ok(stream) => *guard = Events::Open(stream),
                Err(why) => {
                    *guard = Events::Gone;
                    return Err(js_error(why));
                }
            }
        }
        let Events::Open(stream) = &mut *guard else {
            drop(guard);
            self.wait_settled().await;
            return Ok(ENDED.into());
        };
        let mut batch = Vec::new();
        let mut ended = false;
        while batch.is_empty() && !ended {
            let first = tokio::select! {
                first = stream.next() => first,
                () = self.wake.notified() => return Ok("[]".into()),
            };
            let Some(first) = first else {
                ended = true;
                break;
            };
            if wanted(&first, calls_only) {
                batch.push(event_json(&first));
            }
            while batch.len() < MAX_BATCH {
                match stream.next().now_or_never() {
                    Some(Some(event)) if wanted(&event, calls_only) => batch.push(event_json(&event)),
                    Some(Some(_)) => {}
                    Some(None) => {
                        ended = true;
                        break;
                    }
                    None => break,
                }
            }
        }
        if ended {
            *guard = Events::Gone;
            drop(guard);
            // `Engine::wrap` leaves no call running past its response, so the run's tasks end with its last event:
            // this wait is short, and saves the reader a call.
            self.wait_settled().await;
            batch.push(Value::Null);
        }
        serde_json::to_string(&batch).map_err(js_error)
    }

    /// Ends a `nextBatch` that waits for events with an empty batch (or the next one, when none waits): a reader
    /// that knows nothing will come until JavaScript acts (the run waits for calls the app decides on) stops
    /// waiting, and with it the promise that keeps Node's event loop alive.
    #[napi]
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Cancels the run (contract §6.7): the stream stops being read, running calls are aborted, and every admitted
    /// call gets its one stored result.
    #[napi]
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Cancels the run unless it has ended, and resolves once every task of the run has ended (every admitted call
    /// has its stored result).
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        self.cancel.cancel();
        *self.events.lock().await = Events::Gone;
        self.wait_settled().await;
        Ok(())
    }

    /// Resolves once every task of the run has ended, without cancelling it.
    #[napi]
    pub async fn settled(&self) -> napi::Result<()> {
        self.wait_settled().await;
        Ok(())
    }
}

/// Whether a batch carries `event`: every event, or with `calls_only` the calls' events, tool results and the end.
fn wanted(event: &AgentEvent, calls_only: bool) -> bool {
    !calls_only
        || match event {
            AgentEvent::MessageUpdate { .. } | AgentEvent::MessageStart { .. } => false,
            AgentEvent::MessageEnd { message, .. } => matches!(message.as_ref(), Message::ToolResult(_)),
            _ => true,
        }
}

/// An event's serialization; one that cannot be serialized (none can fail today) becomes its name alone.
fn event_json(event: &AgentEvent) -> Value {
    serde_json::to_value(event).unwrap_or_else(|_| serde_json::json!({"type": event.type_name()}))
}
