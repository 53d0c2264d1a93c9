//! The tokio side: Rust futures as asyncio awaitables, and work that needs the GIL started from tokio.
//!
//! Two rules keep the runtimes from stalling each other. The GIL is never held while waiting on tokio (a blocking
//! wait releases it with `Python::detach`). And no tokio thread ever takes the GIL: the engine reaches the loop
//! through the mailbox (`crate::mailbox`), awaitables included, so a Python thread that holds the GIL never delays
//! the engine's commits, and no tokio thread is inside Python when the interpreter finalizes.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::errors::panic_error;
use crate::mailbox::{Convert, Letter, Mailbox};

/// `future` as an asyncio awaitable on the caller's running loop; cancelling the awaitable drops the future. A panic
/// inside it raises `EngineError`.
///
/// The future runs on tokio; its outcome reaches the loop as a letter ([`Letter::Resolve`]) in a mailbox of its own,
/// which the loop watches until the awaitable is done (`headstart._runtime.resolve_once`), and the loop's own thread
/// resolves the asyncio future. No tokio thread takes the GIL for it: a thread that did (as pyo3-async-runtimes'
/// `future_into_py` does, to call `call_soon_threadsafe`) could still be inside Python when the awaiting coroutine
/// returns and the interpreter finalizes, and take the process down at exit. Nor does it bind the engine to the
/// caller's loop: only a run (`open`, `Agent.run`) does that.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let running = py.import("asyncio")?.call_method0("get_running_loop")?;
    let mailbox = Mailbox::new()?;
    let awaited = running.call_method0("create_future")?;
    py.import("headstart._runtime")?
        .call_method1("resolve_once", (&running, &awaited, Py::new(py, mailbox.clone())?))?;
    let task = resolve_later(mailbox, &awaited, future);
    awaited.call_method1("add_done_callback", (Py::new(py, AbortOnDone(task))?,))?;
    Ok(awaited)
}

/// Runs `future` on tokio, and posts its outcome to `mailbox` as the letter that resolves `awaited` (a panic fails it
/// with `EngineError`): whichever loop watches `mailbox` resolves it, on its own thread. Returns the task's handle.
pub(crate) fn resolve_later<F, T>(mailbox: Mailbox, awaited: &Bound<'_, PyAny>, future: F) -> tokio::task::AbortHandle
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let id = mailbox.next_id();
    let resolve = awaited.clone().unbind();
    pyo3_async_runtimes::tokio::get_runtime()
        .spawn(async move {
            let outcome = match AssertUnwindSafe(future).catch_unwind().await {
                Ok(Ok(value)) => Ok(Box::new(move |py: Python<'_>| value.into_py_any(py)) as Convert),
                Ok(Err(error)) => Err(error),
                Err(payload) => Err(panic_error(payload.as_ref())),
            };
            mailbox.send(Letter::Resolve {
                id,
                future: resolve,
                outcome,
            });
        })
        .abort_handle()
}

/// The done-callback of an awaitable: once it is done (resolved, or cancelled by its awaiter), its task has
/// nothing left to do.
#[pyclass(module = "headstart._native", frozen)]
struct AbortOnDone(tokio::task::AbortHandle);

#[pymethods]
impl AbortOnDone {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.0.abort();
    }
}

/// Blocks on `future` with the GIL released: for the few synchronous entry points (opening a PostgreSQL store).
pub(crate) fn block_on<F: Future + Send>(py: Python<'_>, future: F) -> F::Output
where
    F::Output: Send,
{
    py.detach(|| pyo3_async_runtimes::tokio::get_runtime().block_on(future))
}
