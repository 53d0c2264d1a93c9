//! The tokio side: Rust futures as asyncio awaitables, and work that needs the GIL started from tokio.
//!
//! Two rules keep the runtimes from stalling each other. The GIL is never held while waiting on tokio (a blocking
//! wait releases it with `Python::detach`). And no tokio worker thread ever waits for the GIL: whatever must touch
//! Python from the engine's side runs on tokio's blocking pool ([`with_gil`]), as pyo3-async-runtimes does when it
//! completes an awaitable, so a Python thread that holds the GIL never delays the engine's commits.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use pyo3::prelude::*;

use crate::errors::{panic_error, EngineError};

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

/// Runs `work` with the GIL on tokio's blocking pool (never on a worker thread) and returns what it returns.
pub(crate) async fn with_gil<T, W>(work: W) -> PyResult<T>
where
    W: for<'py> FnOnce(Python<'py>) -> PyResult<T> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(move || Python::attach(work)).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => Err(panic_error(error.into_panic().as_ref())),
        Err(error) => Err(EngineError::new_err(format!("a Python task was lost: {error}"))),
    }
}

/// Blocks on `future` with the GIL released: for the few synchronous entry points (opening a PostgreSQL store).
pub(crate) fn block_on<F: Future + Send>(py: Python<'_>, future: F) -> F::Output
where
    F::Output: Send,
{
    py.detach(|| pyo3_async_runtimes::tokio::get_runtime().block_on(future))
}
