//! What a store holds, read back as the JSON the language packages hand their users: [`inspect_json`] for
//! `inspect(store)`, [`figures_json`] for a session's figures. One reading serves Python and Node alike.

use headstart::store::{StoreError, TranscriptStore};
use headstart::SessionId;
use serde_json::{json, Value};

use crate::{response_models, Timeline};

/// The sessions of `store` (only `session` when given): `{"sessions": [{"id", "created_at_us", "state", ...,
/// "messages": [...], "tool_runs": [...], "figures": {"calls": [...], "responses": [...]}}]}`, the figures as
/// `headstart inspect --json` gives them.
pub async fn inspect_json(store: &dyn TranscriptStore, session: Option<&str>) -> Result<Value, StoreError> {
    let mut sessions = Vec::new();
    for info in store.sessions().await? {
        if session.is_some_and(|wanted| wanted != info.id.0) {
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
    Ok(json!({ "sessions": sessions }))
}

/// The figures of `session` from its stored times (issue 29): per call `sealed_ms`, `headroom_ms`,
/// `seal_to_start_ms`, `run_ms` and `overlap_ms`; per response its model, `tool_round_ms` and `batching_round_ms`.
///
/// With `after`, only what was stored after sequence number `after` is read: the figures of the responses whose
/// fragments come after `after + 1`, timed from the message at `after + 1` (a run passes the sequence number two
/// below its first fragment's, so a step reads what the step wrote, not the session's history).
pub async fn figures_json(
    store: &dyn TranscriptStore,
    session: &SessionId,
    after: Option<u64>,
) -> Result<Value, StoreError> {
    let log = match after {
        Some(seq) => store.load_log_after(session, seq).await,
        None => store.load_log(session).await,
    }?;
    // The first message read only dates the first response's start; responses before it are not this read's.
    let first = log
        .iter()
        .skip(usize::from(after.is_some()))
        .find_map(|stored| stored.request);
    let runs = match (after, first) {
        (None, _) => store.tool_runs(session).await,
        (Some(_), Some(first)) => store.tool_runs_from(session, first).await,
        (Some(_), None) => Ok(Vec::new()),
    }?;
    let timeline = Timeline::from_store(session.0.clone(), &log, &runs);
    let mut figures = timeline.figures();
    if after.is_some() {
        // The runs read are this read's already; a response can come from the first message alone.
        figures
            .responses
            .retain(|response| first.is_some_and(|first| response.request >= first));
    }
    Ok(figures.to_json(&response_models(&log)))
}
