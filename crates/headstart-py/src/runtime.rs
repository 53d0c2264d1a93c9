//! The tokio side: Rust futures as asyncio awaitables, and work that needs the GIL started from tokio.
//!
//! Two rules keep the runtimes from stalling each other. The GIL is never held while waiting on tokio (a blocking
//! wait releases it with `Python::detach`). And no tokio worker thread ever waits for the GIL: the engine reaches
//! the loop through the mailbox (`crate::mailbox`), and pyo3-async-runtimes completes an awaitable from tokio's
//! blocking pool, so a Python thread that holds the GIL never delays the engine's commits.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use pyo3::prelude::*;

use crate::errors::panic_error;

/// `future` as an asyncio awaitable on the caller's running loop; cancelling the awaitable drops the future. A panic
/// inside it raises `EngineError`.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        match AssertUnwindSafe(future).catch_unwind().await {
            Ok(result) => result,
            Err(payload) => Err(panic_error(payload.as_ref())),
        }
    })
}

/// Blocks on `future` with the GIL released: for the few synchronous entry points (opening a PostgreSQL store).
pub(crate) fn block_on<F: Future + Send>(py: Python<'_>, future: F) -> F::Output
where
    F::Output: Send,
{
    py.detach(|| pyo3_async_runtimes::tokio::get_runtime().block_on(future))
}
