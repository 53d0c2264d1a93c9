//! [`Events`]: a run's agent events, handed to Python in batches (`_native.Events`).
//!
//! One awaitable per batch, not per event: a wake-up across the runtimes costs tens of microseconds, so each
//! `next_batch` takes every event that is ready once the first one is. The Python side yields them one by one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use futures::{FutureExt, StreamExt};
use headstart::{CancellationToken, EventStream};
use pyo3::prelude::*;
use serde_json::Value;

use crate::json::JsonList;
use crate::runtime::awaitable;

/// The most events one batch carries, so that a long burst still reaches Python in pieces.
const MAX_BATCH: usize = 512;

type Settled = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A run's events, its cancellation, and the wait for its calls to settle.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Events {
    stream: Arc<tokio::sync::Mutex<Option<EventStream>>>,
    cancel: CancellationToken,
    settled: Mutex<Option<Settled>>,
}

impl Events {
    /// Wraps a run's event stream and the token that cancels it.
    pub fn new(stream: EventStream, cancel: CancellationToken) -> Self {
        let settled: Settled = Box::pin(stream.settled());
        Events {
            stream: Arc::new(tokio::sync::Mutex::new(Some(stream))),
            cancel,
            settled: Mutex::new(Some(settled)),
        }
    }
}

#[pymethods]
impl Events {
    /// Awaitable: the next events (each the dict of its Rust serialization), at least one; an empty list once the
    /// run has ended.
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stream = Arc::clone(&self.stream);
        awaitable(py, async move {
            let mut guard = stream.lock().await;
            let Some(events) = guard.as_mut() else {
                return Ok(JsonList::default());
            };
            let mut batch = Vec::new();
            let Some(first) = events.next().await else {
                return Ok(JsonList::default());
            };
            batch.push(event_json(&first));
            while batch.len() < MAX_BATCH {
                match events.next().now_or_never() {
                    Some(Some(event)) => batch.push(event_json(&event)),
                    _ => break,
                }
            }
            Ok(JsonList(batch))
        })
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

/// An event's serialization; an event that cannot be serialized (none can fail today) becomes its name alone.
fn event_json(event: &headstart::AgentEvent) -> Value {
    serde_json::to_value(event).unwrap_or_else(|_| serde_json::json!({"type": event.type_name()}))
}
