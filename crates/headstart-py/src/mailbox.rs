//! [`Mailbox`]: how the engine (on tokio threads) asks the run's event loop to start or cancel Python work, without
//! the GIL.
//!
//! A tokio task that must start a tool's coroutine (or call the model, or cancel either) puts a [`Letter`] into the
//! mailbox and writes one byte to a socket the loop watches (`loop.add_reader`): a plain syscall, no GIL, no
//! blocking-pool thread waiting for a Python thread to let go of it. The loop's reader callback (on the loop's own
//! thread, holding the GIL already) takes every letter at once and starts the tasks
//! (`headstart._runtime.install`). asyncio's own `call_soon_threadsafe` wakes the loop the same way, but needs the
//! GIL to be called.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::EngineError;
use crate::feed::Feed;
use crate::outcome::{CallDone, CallUpdates};
use crate::request::ModelRequest;

/// Turns an awaitable's value into Python, on the loop's thread.
pub(crate) type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// One piece of work for the loop.
pub(crate) enum Letter {
    /// Start a tool call: `tool.run(arguments)` as a task; its outcome goes to `done`.
    Call {
        /// The call's number in this mailbox (its cancellation names it).
        id: u64,
        /// The Python `headstart.Tool`.
        tool: Arc<Py<PyAny>>,
        /// The arguments as JSON text.
        arguments: String,
        /// The call id.
        call_id: String,
        /// The session's id (`None` only for a context made outside an engine run).
        session_id: Option<String>,
        /// The idempotency key.
        key: String,
        /// Where partial results go.
        updates: CallUpdates,
        /// Where the outcome goes.
        done: CallDone,
    },
    /// Call the model with `request`; `done` says whether it gave a stream, which is then pumped into `feed`.
    Model {
        /// The request's number in this mailbox.
        id: u64,
        /// The Python model callable.
        function: Arc<Py<PyAny>>,
        /// The request.
        request: ModelRequest,
        /// The format's name.
        format: &'static str,
        /// The feed the stream goes into.
        feed: Feed,
        /// Whether a stream came.
        done: CallDone,
    },
    /// Call a hook with these JSON arguments; what it returned goes to `done` as JSON (its `details`).
    Hook {
        /// The letter's number.
        id: u64,
        /// The hook callable.
        function: Arc<Py<PyAny>>,
        /// Its arguments, each as JSON text.
        arguments: Vec<String>,
        /// Where its answer goes.
        done: CallDone,
    },
    /// An awaitable's outcome (a run's next events, a session's id, …): resolve `future` with the value (converted on
    /// the loop's thread) or fail it.
    Resolve {
        /// The letter's number.
        id: u64,
        /// The asyncio future the awaitable returned.
        future: Py<PyAny>,
        /// The value's conversion, or the error.
        outcome: Result<Convert, PyErr>,
    },
    /// Cancel the task started for letter `id` (if it still runs).
    Cancel {
        /// The letter whose task to cancel.
        id: u64,
    },
}

struct Inner {
    letters: Mutex<Vec<Letter>>,
    /// A wake-up byte is in the socket and not yet read.
    pending: AtomicBool,
    next_id: AtomicU64,
    writer: UnixStream,
    reader: UnixStream,
}

/// The mailbox of an engine's runs (`_native.Mailbox`); cheap to clone.
#[pyclass(module = "headstart._native", frozen)]
#[derive(Clone)]
pub(crate) struct Mailbox(Arc<Inner>);

impl Mailbox {
    /// A new mailbox with its socket pair.
    pub fn new() -> PyResult<Self> {
        let (writer, reader) =
            UnixStream::pair().map_err(|error| EngineError::new_err(format!("cannot make a socket pair: {error}")))?;
        for end in [&writer, &reader] {
            end.set_nonblocking(true)
                .map_err(|error| EngineError::new_err(format!("cannot make a socket non-blocking: {error}")))?;
        }
        Ok(Mailbox(Arc::new(Inner {
            letters: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            writer,
            reader,
        })))
    }

    /// A fresh letter number.
    pub fn next_id(&self) -> u64 {
        self.0.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Posts a letter and wakes the loop (one byte, unless one is already waiting).
    pub fn send(&self, letter: Letter) {
        self.0
            .letters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(letter);
        if !self.0.pending.swap(true, Ordering::AcqRel) {
            // A full socket buffer already holds a wake-up; nothing else can fail on a connected pair.
            let _ = (&self.0.writer).write(&[1]);
        }
    }
}

#[pymethods]
impl Mailbox {
    /// The socket the loop watches for wake-ups.
    fn fileno(&self) -> i32 {
        self.0.reader.as_raw_fd()
    }

    /// Every letter posted since the last call, as tuples: `("call", id, tool, arguments, call_id, session_id, key,
    /// updates, done)`, `("model", id, function, request, format, feed, done)`, `("hook", id, function, arguments, done)`,
    /// `("resolve", id, future, value, error)` (`error` an exception or `None`), `("cancel", id)`.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let mut bytes = [0u8; 64];
        while matches!((&self.0.reader).read(&mut bytes), Ok(read) if read > 0) {}
        // Reset before taking: a letter posted after the take finds the flag clear and writes a new wake-up.
        self.0.pending.store(false, Ordering::Release);
        let letters = std::mem::take(&mut *self.0.letters.lock().unwrap_or_else(PoisonError::into_inner));
        letters
            .into_iter()
            .map(|letter| match letter {
                Letter::Call {
                    id,
                    tool,
                    arguments,
                    call_id,
                    session_id,
                    key,
                    updates,
                    done,
                } => (
                    "call",
                    id,
                    tool.clone_ref(py),
                    arguments,
                    call_id,
                    session_id,
                    key,
                    Py::new(py, updates)?,
                    Py::new(py, done)?,
                )
                    .into_pyobject(py),
                Letter::Model {
                    id,
                    function,
                    request,
                    format,
                    feed,
                    done,
                } => (
                    "model",
                    id,
                    function.clone_ref(py),
                    Py::new(py, request)?,
                    format,
                    Py::new(py, feed)?,
                    Py::new(py, done)?,
                )
                    .into_pyobject(py),
                Letter::Hook {
                    id,
                    function,
                    arguments,
                    done,
                } => ("hook", id, function.clone_ref(py), arguments, Py::new(py, done)?).into_pyobject(py),
                Letter::Resolve { id, future, outcome } => match outcome.and_then(|convert| convert(py)) {
                    Ok(value) => ("resolve", id, future, value, py.None()).into_pyobject(py),
                    Err(error) => ("resolve", id, future, py.None(), error.into_value(py)).into_pyobject(py),
                },
                Letter::Cancel { id } => ("cancel", id).into_pyobject(py),
            })
            .collect()
    }
}
