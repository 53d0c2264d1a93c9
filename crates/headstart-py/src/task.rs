//! [`CancelOnDrop`]: the engine's hold on a task it started on the Python loop (a tool call, a model's stream).
//!
//! The handle is the Python side's (`headstart._runtime._Call`); its `cancel` is safe from any thread (it goes
//! through `loop.call_soon_threadsafe`). It is called from tokio's blocking pool, never from a worker thread.

use std::sync::Arc;

use pyo3::prelude::*;

/// Cancels a Python task when the engine stops waiting for it (the future or stream holding this is dropped), unless
/// disarmed first.
pub(crate) struct CancelOnDrop {
    handle: Option<Arc<Py<PyAny>>>,
}

impl CancelOnDrop {
    /// Holds the task behind `handle`.
    pub fn new(handle: Py<PyAny>) -> Self {
        CancelOnDrop {
            handle: Some(Arc::new(handle)),
        }
    }

    /// Asks the Python side to cancel the task now.
    pub fn cancel(&self) {
        if let (Some(handle), Ok(runtime)) = (&self.handle, tokio::runtime::Handle::try_current()) {
            let handle = Arc::clone(handle);
            runtime.spawn_blocking(move || Python::attach(|py| handle.bind(py).call_method0("cancel").map(drop)));
        }
    }

    /// The task ended by itself: nothing to cancel on drop.
    pub fn disarm(&mut self) {
        self.handle = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.cancel();
    }
}
