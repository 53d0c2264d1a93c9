//! The canonical model context (contract §7.3).
//!
//! The durable log is in write order: fragments of a response and the results of its calls interleave in the
//! order they became durable. Providers need each assistant message followed directly by its tool results, and
//! prompt caches need a stable order, so the model sees a canonical view: each response's fragments (grouped by
//! `turn_id`) merged back into one assistant message carrying the terminal fragment's usage and stop reason,
//! placed where its first fragment was written, followed by its tool results in call order. A provider-async call's
//! result written after a later message (contract §3.7.5) is kept where it was written: it reached the model at that
//! request, not beside its call.

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
    /// The calls that have their result beside them, by response.
    answered: HashSet<(ResponseKey<'a>, &'a str)>,
    /// The calls whose result was delivered late (kept where it was written), by response.
    delivered_late: HashSet<(ResponseKey<'a>, &'a str)>,
    /// The provider-async calls, by response.
    provider_async: HashSet<(ResponseKey<'a>, &'a str)>,
    /// The response written last, unless a user message followed it.
    open: Option<ResponseKey<'a>>,
    /// Requests named by a result's `ready_during` that have no fragment: one arriving later moves the result.
    awaiting: Vec<u32>,
    /// The requests with a fragment.
    requests: HashSet<u32>,
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
    let mut provider_async: HashSet<(ResponseKey<'a>, &str)> = HashSet::new();
    // Where each request's first fragment was written: a result ready while that response streamed goes after it.
    let mut first_fragment: HashMap<u32, usize> = HashMap::new();
    for (position, &(request, message)) in log.iter().enumerate() {
        if let Message::Assistant(fragment) = message {
            if let Some(request) = request {
                first_fragment.entry(request).or_insert(position);
            }
            let response = (request, fragment.turn_id.as_str());
            for call in fragment.tool_calls() {
                if let Some(request) = request {
                    response_of_call.insert((request, call.id.as_str()), response);
                }
                if call.provider_async {
                    provider_async.insert((response, call.id.as_str()));
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

    // Pass 2, in write order: the response each result answers, and whether it stays where it was written.
    let mut latest_with_call: HashMap<&str, ResponseKey<'a>> = HashMap::new();
    let mut owner_of_result: Vec<Option<ResponseKey<'a>>> = Vec::with_capacity(log.len());
    let mut results: HashMap<(ResponseKey<'a>, &str), &ToolResultMessage> = HashMap::new();
    let mut delivered_late = HashSet::new();
    // The positions of the results delivered late.
    let mut late = HashSet::new();
    let mut unowned = Vec::new();
    // The response written last, until a user message follows it.
    let mut open: Option<ResponseKey<'a>> = None;
    for (position, &(request, message)) in log.iter().enumerate() {
        let owner = match message {
            Message::Assistant(fragment) => {
                let key = (request, fragment.turn_id.as_str());
                for call in fragment.tool_calls() {
                    latest_with_call.insert(call.id.as_str(), key);
                }
                open = Some(key);
                None
            }
            Message::ToolResult(result) => {
                let id = result.tool_call_id.as_str();
                let owner = match request {
                    Some(request) => response_of_call.get(&(request, id)).copied(),
                    None => latest_with_call.get(id).copied(),
                };
                match (owner, request) {
                    (Some(owner), _) => {
                        // The first result wins; the engine writes exactly one per call.
                        let first = !results.contains_key(&(owner, id)) && !delivered_late.contains(&(owner, id));
                        if first
                            && is_late(
                                owner,
                                open,
                                provider_async.contains(&(owner, id)),
                                result.ready_during.is_some(),
                            )
                        {
                            delivered_late.insert((owner, id));
                            late.insert(position);
                            // Kept where it was written: pass 3 emits a result without an owner in place.
                            None
                        } else {
                            if first {
                                results.insert((owner, id), result);
                            }
                            Some(owner)
                        }
                    }
                    (None, Some(request)) => {
                        unowned.push((request, id));
                        None
                    }
                    (None, None) => None,
                }
            }
            Message::User(_) => {
                open = None;
                None
            }
        };
        owner_of_result.push(owner);
    }

    // Pass 3: emit in write order, each response at its first fragment, followed by its results in call order, and
    // by the results delivered late that became ready while it streamed, before it committed anything.
    let mut context = Vec::with_capacity(log.len());
    let mut latest = None;
    let mut ready_during: HashMap<u32, Vec<Message>> = HashMap::new();
    let mut awaiting = Vec::new();
    for (position, (&(request, message), owner)) in log.iter().zip(owner_of_result).enumerate() {
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
                if let Some(ready) = request.and_then(|request| ready_during.remove(&request)) {
                    context.extend(ready);
                }
                latest = Some(key);
            }
            Message::ToolResult(result) => {
                if owner.is_some() {
                    continue;
                }
                match result.ready_during.filter(|_| late.contains(&position)) {
                    Some(streaming) if first_fragment.get(&streaming).is_some_and(|&first| first > position) => {
                        ready_during.entry(streaming).or_default().push(message.clone());
                    }
                    Some(streaming) if !first_fragment.contains_key(&streaming) => {
                        // That response left nothing (it failed before its first commit): kept where written.
                        awaiting.push(streaming);
                        context.push(message.clone());
                    }
                    _ => context.push(message.clone()),
                }
            }
        }
    }
    Canonical {
        context,
        response_of_call,
        latest_with_call,
        answered: results.into_keys().collect(),
        delivered_late,
        open,
        awaiting,
        requests: first_fragment.into_keys().collect(),
        provider_async,
        responses,
        unowned,
        latest,
    }
}

/// Whether a result for `owner`'s call is delivered late (contract §3.7.5): the call is provider-async, and a later
/// request was streaming when it was written (`ready_during`) or something other than its own response was written
/// since that response (`open` is the response written last, `None` after a user message). Only such a result is
/// kept where it was written; every other one follows its call.
fn is_late<K: PartialEq>(owner: K, open: Option<K>, provider_async: bool, ready_during: bool) -> bool {
    provider_async && (ready_during || open != Some(owner))
}

#[cfg(test)]
mod tests;
