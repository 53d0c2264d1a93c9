//! `headstart.inspect`: what a store holds, read back as plain data (the sessions, their messages and tool runs).

use headstart::SessionId;
use headstart_timeline::{response_models, Timeline};
use pyo3::prelude::*;
use serde_json::{json, Value};

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
    let sessions = block_on(py, async move {
        let mut sessions = Vec::new();
        for info in store.sessions().await? {
            if session.as_ref().is_some_and(|wanted| *wanted != info.id.0) {
                continue;
            }
            let id: SessionId = info.id.clone();
            let messages = store.load_log(&id).await?;
            let runs = store.tool_runs(&id).await?;
            let mut entry = serde_json::to_value(&info).unwrap_or_else(|_| json!({"id": id.0}));
            let timeline = Timeline::from_store(id.0.clone(), &messages, &runs);
            let figures = timeline.figures().to_json(&response_models(&messages));
            if let Value::Object(fields) = &mut entry {
                fields.insert("messages".into(), serde_json::to_value(messages).unwrap_or_default());
                fields.insert("tool_runs".into(), serde_json::to_value(runs).unwrap_or_default());
                fields.insert("figures".into(), figures);
            }
            sessions.push(entry);
        }
        Ok::<_, headstart::store::StoreError>(sessions)
    })
    .map_err(store_error)?;
    Ok(Json(json!({ "sessions": sessions })))
}
