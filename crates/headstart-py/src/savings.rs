//! `headstart.savings` and the demo's script: what early execution saved on a stored session (the figure `headstart
//! demo` and `headstart timeline` print), and the scripted responses of the demo's simulated model.

use headstart::SessionId;
use headstart_timeline::Timeline;
use pyo3::prelude::*;
use serde_json::{json, Value};

use crate::errors::store_error;
use crate::json::Json;
use crate::runtime::block_on;
use crate::store::{open_store, Access};

/// The time `session` of the store at `store` took, against end-of-stream batching with the same measured durations
/// (the timeline's comparison): `{"actual_end_ms", "batching_end_ms", "saved_ms", "saved_percent", "requests":
/// [{"request", "stream_end_ms", "actual_settle_ms", "batching_settle_ms"}], "calls"}`.
#[pyfunction]
pub(crate) fn savings(py: Python<'_>, store: &str, session: String) -> PyResult<Json> {
    let store = open_store(py, store, Access::Read)?;
    let id = SessionId(session);
    let (log, runs) = block_on(py, async {
        Ok::<_, headstart::store::StoreError>((store.load_log(&id).await?, store.tool_runs(&id).await?))
    })
    .map_err(store_error)?;
    Ok(Json(savings_json(&Timeline::from_store(id.0.clone(), &log, &runs))))
}

/// A timeline's comparison against end-of-stream batching, as `headstart.savings` returns it.
pub(crate) fn savings_json(timeline: &Timeline) -> Value {
    let savings = timeline.savings();
    let requests: Vec<Value> = savings
        .requests
        .iter()
        .map(|request| {
            json!({
                "request": request.request,
                "stream_end_ms": request.stream_end_ms,
                "actual_settle_ms": request.actual_settle_ms,
                "batching_settle_ms": request.batching_settle_ms,
            })
        })
        .collect();
    json!({
        "actual_end_ms": savings.actual_end_ms,
        "batching_end_ms": savings.batching_end_ms,
        "saved_ms": savings.saved_ms(),
        "saved_percent": savings.saved_percent(),
        "requests": requests,
        "calls": timeline.calls.len(),
    })
}

/// The demo's simulated model (`headstart demo`'s): one list of timed delta dicts (each with its `at_ms`) per
/// model request.
#[pyfunction]
pub(crate) fn demo_script() -> Json {
    let responses = headstart_sim::demo::responses()
        .into_iter()
        .map(|response| {
            response
                .into_iter()
                .map(|timed| {
                    let mut delta = serde_json::to_value(&timed.event).unwrap_or_default();
                    if let Value::Object(fields) = &mut delta {
                        fields.insert("at_ms".into(), json!(timed.at_ms));
                    }
                    delta
                })
                .collect()
        })
        .collect();
    Json(Value::Array(responses))
}
