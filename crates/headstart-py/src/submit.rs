//! `headstart.submit`: put sessions in a fleet's queue (contract §7.5), as `headstart submit --store` does; a
//! worker serving the queue (`headstart worker --queue NAME`) claims them.

use headstart::store::{QueueName, SessionSettings};
use headstart::{Clock, SystemClock, UserMessage};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::store_error;
use crate::runtime::block_on;
use crate::store::{open_queue, Access};

/// The most sessions one call submits: a typo in `count` must not fill a queue.
const MAX_COUNT: usize = 10_000;

/// Submits `count` sessions whose first message is `prompt` to the store at `store` (a SQLite file, created if
/// missing, or a PostgreSQL connection string) and returns their ids. `queue` is the queue they wait in (default
/// `"default"`: at most 64 bytes of printable characters, no whitespace); `system` and `model` are their own system
/// prompt and model, used instead of the worker's. Raises `ValueError` on a bad queue name, an empty model name or a
/// count outside 1..=10000, `headstart.StoreError` when the store fails. Blocks (with the GIL released).
#[pyfunction]
#[pyo3(signature = (store, prompt, *, queue=None, system=None, model=None, count=1))]
pub(crate) fn submit(
    py: Python<'_>,
    store: &str,
    prompt: String,
    queue: Option<String>,
    system: Option<String>,
    model: Option<String>,
    count: usize,
) -> PyResult<Vec<String>> {
    let queue = QueueName::new(queue.unwrap_or_else(|| QueueName::DEFAULT.to_owned()))
        .map_err(|error| PyValueError::new_err(error.to_string()))?;
    if model.as_deref().is_some_and(|model| model.trim().is_empty()) {
        return Err(PyValueError::new_err("model must name a model when given"));
    }
    if !(1..=MAX_COUNT).contains(&count) {
        return Err(PyValueError::new_err(format!(
            "count must be between 1 and {MAX_COUNT}, not {count}"
        )));
    }
    let settings = SessionSettings {
        system,
        model,
        queue: Some(queue),
    };
    let queue = open_queue(py, store, Access::Write(Default::default()))?;
    let message = UserMessage::new(prompt);
    block_on(py, async move {
        let mut ids = Vec::with_capacity(count);
        for _ in 0..count {
            let session = queue.submit_with(&message, &settings, SystemClock.now_us()).await?;
            ids.push(session.0);
        }
        Ok::<_, headstart::store::StoreError>(ids)
    })
    .map_err(store_error)
}
