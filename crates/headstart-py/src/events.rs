//! [`Events`]: a run's agent events, handed to Python in batches (`_native.Events`).
//!
//! One awaitable per batch, not per event: each `next_batch` takes every event that is ready once the first one is,
//! and the Python side yields them one by one. A batch reaches the loop through the engine's mailbox, like a tool
//! call: the tokio task that waited for it posts a letter and never takes the GIL; the loop's own thread turns the
//! events into Python objects and resolves the awaitable. (Completing it from tokio instead meant another thread
//! taking the GIL for every batch, contending with the loop for it while the model streams.)

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use futures::{FutureExt, StreamExt};
use headstart::{CancellationToken, EventStream};
use pyo3::prelude::*;
use serde_json::Value;

use crate::home::Home;
use crate::json::JsonList;
use crate::runtime::{awaitable, resolve_later};

/// The most events one batch carries, so that a long burst still reaches Python in pieces.
const MAX_BATCH: usize = 512;

type Settled = Pin<Box<dyn Future<Output = ()> + Send>>;
type Shared = Arc<tokio::sync::Mutex<Option<EventStream>>>;

/// A run's events, its cancellation, and the wait for its calls to settle.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Events {
    stream: Shared,
    cancel: CancellationToken,
    settled: Mutex<Option<Settled>>,
    home: Home,
}

impl Events {
    /// Wraps a run's event stream and the token that cancels it; its batches go to `home`'s loop.
    pub fn new(stream: EventStream, cancel: CancellationToken, home: Home) -> Self {
        let settled: Settled = Box::pin(stream.settled());
        Events {
            stream: Arc::new(tokio::sync::Mutex::new(Some(stream))),
            cancel,
            settled: Mutex::new(Some(settled)),
            home,
        }
    }
}

#[pymethods]
impl Events {
    /// Awaitable (an asyncio future of the running loop): the next events (each the dict of its Rust
    /// serialization), at least one; an empty list once the run has ended. The wait goes on if the future is
    /// cancelled (the package's iterator shields it and awaits it again, so a consumer interrupted mid-wait loses no
    /// event); cancel the run itself with `cancel` or `close`.
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let running = self.home.capture(py)?;
        let mailbox = self
            .home
            .mailbox()
            .map_err(crate::errors::EngineError::new_err)?
            .clone();
        let future = running.call_method0("create_future")?;
        let stream = Arc::clone(&self.stream);
        // Not aborted when the future is cancelled: the iterator shields it, and the batch must not be lost.
        resolve_later(mailbox, &future, async move { Ok(JsonList(next_batch(stream).await)) });
        Ok(future)
    }

    /// Cancels the run (contract §6.7): the model stream stops being read, running calls are cancelled (a Python
    /// tool's task gets `CancelledError`), and every admitted call gets its one stored result.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Awaitable: cancels the run unless it has ended, and resolves once every task of the run has ended (every
    /// admitted call has its stored result).
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.cancel.cancel();
        let settled = self.settled.lock().unwrap_or_else(PoisonError::into_inner).take();
        let stream = Arc::clone(&self.stream);
        awaitable(py, async move {
            // Dropping the stream is the engine's own cancellation path; nobody reads its events any more.
            stream.lock().await.take();
            if let Some(settled) = settled {
                settled.await;
            }
            Ok(())
        })
    }
}

/// Waits for the next event, then takes every other one that is ready (up to [`MAX_BATCH`]).
async fn next_batch(stream: Shared) -> Vec<Value> {
    let mut guard = stream.lock().await;
    let Some(events) = guard.as_mut() else {
        return Vec::new();
    };
    let Some(first) = events.next().await else {
        return Vec::new();
    };
    let mut batch = vec![event_json(&first)];
    while batch.len() < MAX_BATCH {
        match events.next().now_or_never() {
            Some(Some(event)) => batch.push(event_json(&event)),
            _ => break,
        }
    }
    batch
}

/// An event's serialization; an event that cannot be serialized (none can fail today) becomes its name alone.
fn event_json(event: &headstart::AgentEvent) -> Value {
    serde_json::to_value(event).unwrap_or_else(|_| serde_json::json!({"type": event.type_name()}))
}
