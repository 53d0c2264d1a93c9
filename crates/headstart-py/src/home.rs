//! [`Home`]: the asyncio loop an engine's Python tools and models run on, and the [`Mailbox`] that reaches it.
//!
//! The engine calls a tool from a tokio task; the tool's coroutine must run on the loop of the code that started
//! the run. Every `wrap` (and `Agent.run`) makes sure its running loop watches the engine's mailbox
//! (`headstart._runtime.install`, with a copy of the caller's `contextvars` context for the tasks), and the tools
//! post their work there: an engine serves one event loop at a time, as an asyncio application has one.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;

use crate::mailbox::Mailbox;

/// The engine's mailbox and the loop that watches it, shared by its tools.
#[derive(Clone)]
pub(crate) struct Home {
    mailbox: Mailbox,
    event_loop: Arc<Mutex<Option<Py<PyAny>>>>,
}

impl Home {
    /// A home whose mailbox no loop watches yet.
    pub fn new() -> PyResult<Self> {
        Ok(Home {
            mailbox: Mailbox::new()?,
            event_loop: Arc::new(Mutex::new(None)),
        })
    }

    /// Makes the calling coroutine's running loop the one that watches the mailbox (unless it already is); returns
    /// that loop.
    pub fn capture<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let running = py.import("asyncio")?.call_method0("get_running_loop")?;
        let mut current = self.event_loop.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|watching| watching.bind(py).is(&running)) {
            return Ok(running);
        }
        let context = py.import("contextvars")?.call_method0("copy_context")?;
        py.import("headstart._runtime")?
            .call_method1("install", (&running, context, Py::new(py, self.mailbox.clone())?))?;
        *current = Some(running.clone().unbind());
        Ok(running)
    }

    /// The mailbox, or why there is none to post to (no run was started from asyncio yet).
    pub fn mailbox(&self) -> Result<&Mailbox, String> {
        let watched = self.event_loop.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        if watched {
            Ok(&self.mailbox)
        } else {
            Err("no event loop watches the engine: start runs from a coroutine".to_owned())
        }
    }
}
