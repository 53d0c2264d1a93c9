//! The canonical model context (contract §7.3).
//!
//! The durable log is in write order: fragments of a response and the results of its calls interleave in the
//! order they became durable. Providers need each assistant message followed directly by its tool results, and
//! prompt caches need a stable order, so the model sees a canonical view: each response's fragments (grouped by
//! `turn_id`) merged back into one assistant message carrying the terminal fragment's usage and stop reason,
//! placed where its first fragment was written, followed by its tool results in call order.

use std::collections::{HashMap, HashSet};

use crate::model::{AssistantMessage, Message, ToolResultMessage};

mod incremental;
mod shared;

pub use incremental::{ContextBuilder, Reload};
pub use shared::{Iter, ModelContext};

/// Builds the canonical model context from messages in durable write order, without knowing which request each
/// message belongs to: a tool result answers the most recent response written before it that has a call with its
/// id (call ids are unique within a response, not across responses). [`model_context_by_request`] is exact when the
/// requests are known, as they are in a store.
///
/// A tool result whose call is in no stored response (which the engine never writes) is kept where it was written,
/// so nothing stored is dropped from the view.
pub fn model_context(log: &[Message]) -> Vec<Message> {
    model_context_by_request(log.iter().map(|message| (None, message)))
}

/// Merges a later `fragment` of a response into the `response` merged so far: its content follows, and the last
/// fragment written is the terminal one, so its stop reason and usage are the response's.
fn merge_fragment(response: &mut AssistantMessage, fragment: &AssistantMessage) {
    response.content.extend(fragment.content.iter().cloned());
    response.stop_reason = fragment.stop_reason;
    response.usage = fragment.usage;
    if fragment.error_message.is_some() {
        response.error_message.clone_from(&fragment.error_message);
    }
    if response.model.is_none() {
        response.model.clone_from(&fragment.model);
    }
}

/// Which response a fragment belongs to: its model request, when known, and its `turn_id`.
type ResponseKey<'a> = (Option<u32>, &'a str);

/// Builds the canonical model context from messages in durable write order, each with the 0-based model request it
/// belongs to (`None` when unknown: user prompts, and results stored before results carried their request).
///
/// A response is the fragments sharing a request and a `turn_id`. A tool result with a request answers the call
/// with its id in that request's response; a result without one answers the most recent response written before it
/// that has a call with its id. A call id repeated by several responses (some providers number their calls
/// `call_0`, `call_1`, … in every response) therefore keeps each result with its own call.
pub fn model_context_by_request<'a>(log: impl IntoIterator<Item = (Option<u32>, &'a Message)>) -> Vec<Message> {
    let log: Vec<(Option<u32>, &Message)> = log.into_iter().collect();
    canonical(&log).context
}

/// The canonical context of a log, with what was learned building it: [`ContextBuilder::from_log`] goes on from
/// there message by message.
struct Canonical<'a> {
    context: Vec<Message>,
    /// (request, call id) → the response with that call.
    response_of_call: HashMap<(u32, &'a str), ResponseKey<'a>>,
    /// Call id → the response written last with that call.
    latest_with_call: HashMap<&'a str, ResponseKey<'a>>,
    /// The calls that have their result, by response.
    answered: HashSet<(ResponseKey<'a>, &'a str)>,
    /// Every response.
    responses: Vec<ResponseKey<'a>>,
    /// Results with a request that answer no stored call, by (request, call id).
    unowned: Vec<(u32, &'a str)>,
    /// The response begun last: the last assistant message of the context.
    latest: Option<ResponseKey<'a>>,
}

fn canonical<'a>(log: &[(Option<u32>, &'a Message)]) -> Canonical<'a> {
    // Pass 1: merge fragments per response, and find the response of each (request, call id).
    let mut merged: HashMap<ResponseKey<'a>, AssistantMessage> = HashMap::new();
    let mut response_of_call: HashMap<(u32, &str), ResponseKey<'a>> = HashMap::new();
    for &(request, message) in log {
        if let Message::Assistant(fragment) = message {
            let response = (request, fragment.turn_id.as_str());
            if let Some(request) = request {
                for call in fragment.tool_calls() {
                    response_of_call.insert((request, call.id.as_str()), response);
                }
            }
            match merged.get_mut(&response) {
                None => {
                    merged.insert(response, fragment.clone());
                }
                Some(response) => merge_fragment(response, fragment),
            }
        }
    }
    let responses: Vec<ResponseKey<'a>> = merged.keys().copied().collect();

    // Pass 2, in write order: the response each result answers.
    let mut latest_with_call: HashMap<&str, ResponseKey<'a>> = HashMap::new();
    let mut owner_of_result: Vec<Option<ResponseKey<'a>>> = Vec::with_capacity(log.len());
    let mut results: HashMap<(ResponseKey<'a>, &str), &ToolResultMessage> = HashMap::new();
    let mut unowned = Vec::new();
    for &(request, message) in log {
        let owner = match message {
            Message::Assistant(fragment) => {
                for call in fragment.tool_calls() {
                    latest_with_call.insert(call.id.as_str(), (request, fragment.turn_id.as_str()));
                }
                None
            }
            Message::ToolResult(result) => {
                let id = result.tool_call_id.as_str();
                let owner = match request {
                    Some(request) => response_of_call.get(&(request, id)).copied(),
                    None => latest_with_call.get(id).copied(),
                };
                match (owner, request) {
                    // The first result wins; the engine writes exactly one per call.
                    (Some(owner), _) => {
                        results.entry((owner, id)).or_insert(result);
                    }
                    (None, Some(request)) => unowned.push((request, id)),
                    (None, None) => {}
                }
                owner
            }
            Message::User(_) => None,
        };
        owner_of_result.push(owner);
    }

    // Pass 3: emit in write order, each response at its first fragment, followed by its results in call order.
    let mut context = Vec::with_capacity(log.len());
    let mut latest = None;
    for (&(request, message), owner) in log.iter().zip(owner_of_result) {
        match message {
            Message::User(_) => context.push(message.clone()),
            Message::Assistant(fragment) => {
                let key = (request, fragment.turn_id.as_str());
                let Some(response) = merged.remove(&key) else {
                    continue; // a later fragment of a response already emitted
                };
                let call_results: Vec<Message> = response
                    .tool_calls()
                    .filter_map(|call| results.get(&(key, call.id.as_str())))
                    .map(|result| Message::ToolResult((*result).clone()))
                    .collect();
                context.push(Message::Assistant(response));
                context.extend(call_results);
                latest = Some(key);
            }
            Message::ToolResult(_) => {
                if owner.is_none() {
                    context.push(message.clone());
                }
            }
        }
    }
    Canonical {
        context,
        response_of_call,
        latest_with_call,
        answered: results.into_keys().collect(),
        responses,
        unowned,
        latest,
    }
}

#[cfg(test)]
mod tests;
