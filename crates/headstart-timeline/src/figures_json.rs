//! A session's figures as JSON, as `headstart inspect --json`, `headstart serve` and Python's `headstart.inspect`
//! give them, and which model answered each request.

use std::collections::BTreeMap;

use headstart::store::StoredMessage;
use headstart::Message;
use serde_json::{json, Value};

use crate::figures::Figures;

impl Figures {
    /// A session's figures as `inspect --json` prints them (ms on the session's time axis, `null` when unknown):
    /// `calls`, each with `id`, `name`, `request`, `sealed_ms`, `headroom_ms`, `seal_to_start_ms`, `run_ms` and
    /// `overlap_ms`; `responses`, each with `request`, `model` (from `models`), `calls`, `stream_end_ms`,
    /// `tool_round_ms` and `batching_round_ms`.
    pub fn to_json(&self, models: &BTreeMap<u32, String>) -> Value {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "name": call.name,
                    "request": call.request,
                    "sealed_ms": call.sealed_ms,
                    "headroom_ms": call.headroom_ms,
                    "seal_to_start_ms": call.seal_to_start_ms,
                    "run_ms": call.run_ms,
                    "overlap_ms": call.overlap_ms,
                })
            })
            .collect();
        let responses: Vec<Value> = self
            .responses
            .iter()
            .map(|response| {
                json!({
                    "request": response.request,
                    "model": models.get(&response.request),
                    "calls": response.calls,
                    "stream_end_ms": response.stream_end_ms,
                    "tool_round_ms": response.tool_round_ms,
                    "batching_round_ms": response.batching_round_ms,
                })
            })
            .collect();
        json!({ "calls": calls, "responses": responses })
    }
}

/// The model each request's response named (`AssistantMessage::model` of its fragments, the first one that names
/// one); a request whose fragments name none is absent.
pub fn response_models(log: &[StoredMessage]) -> BTreeMap<u32, String> {
    let mut models = BTreeMap::new();
    for stored in log {
        if let (Message::Assistant(fragment), Some(request)) = (&stored.message, stored.request) {
            if let Some(model) = &fragment.model {
                models.entry(request).or_insert_with(|| model.clone());
            }
        }
    }
    models
}
