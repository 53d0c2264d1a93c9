//! `headstart.inspect`: what a store holds, read back as plain data (the sessions, their messages and tool runs).

use pyo3::prelude::*;

use crate::errors::store_error;
use crate::json::Json;
use crate::runtime::block_on;
use crate::store::{open_store, Access};

/// Reads the store at `store` (read-only): `{"sessions": [{"id", "created_at_us", "state", ..., "messages": [...],
/// "tool_runs": [...], "figures": {"calls": [...], "responses": [...]}}]}` (the figures as `headstart inspect
/// --json` gives them), only `session` when it is given. Blocks (with the GIL released) while it reads.
#[pyfunction]
#[pyo3(signature = (store, session=None))]
pub(crate) fn inspect(py: Python<'_>, store: &str, session: Option<String>) -> PyResult<Json> {
    let store = open_store(py, store, Access::Read)?;
    let report = block_on(py, async move {
        headstart_timeline::stored::inspect_json(store.as_ref(), session.as_deref()).await
    })
    .map_err(store_error)?;
    Ok(Json(report))
}
