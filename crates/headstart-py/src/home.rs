//! [`Home`]: the asyncio loop (and the `contextvars` context) an engine's Python tools run on.
//!
//! The engine calls a tool from a tokio task; the tool's coroutine must run on the loop of the code that started
//! the run. Every `wrap` (and `Agent.run`) records its running loop here, and the tools start their coroutines on
//! the latest one: an engine serves one event loop at a time, as an asyncio application has one.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;

use crate::errors::EngineError;

/// Where the tools' coroutines run: a loop and the context their tasks copy.
#[derive(Debug)]
pub(crate) struct Loop {
    /// The asyncio event loop.
    pub event_loop: Py<PyAny>,
    /// The `contextvars.Context` the tools' tasks are created in (a copy of the caller's at the run's start).
    pub context: Py<PyAny>,
}

/// The latest loop of an engine's runs, shared by its tools.
#[derive(Debug, Clone, Default)]
pub(crate) struct Home(Arc<Mutex<Option<Arc<Loop>>>>);

impl Home {
    /// Records the running loop of the calling coroutine, and a copy of its context.
    pub fn capture(&self, py: Python<'_>) -> PyResult<()> {
        let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?.unbind();
        let context = py.import("contextvars")?.call_method0("copy_context")?.unbind();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Loop { event_loop, context }));
        Ok(())
    }

    /// The latest loop, or an error for a tool called outside any run.
    pub fn current(&self) -> PyResult<Arc<Loop>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| EngineError::new_err("a Python tool was called outside a run started from asyncio"))
    }
}
