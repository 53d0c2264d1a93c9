//! [`BodyCache`]: request bodies assembled from each message's JSON kept from the request before, so that a step of a
//! long session serializes what is new, not the whole history.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use headstart_core::{Message, ModelContext, ToolDefinition};
use serde_json::Value;

use super::{build_body, with_extra, RequestSettings};
use crate::openai_chat::request::{openai_chat_frame, openai_chat_items};
use crate::openai_responses::request::{openai_responses_frame, openai_responses_items};
use crate::WireFormat;

/// A format's items of one message.
type ItemsOf = fn(&Message, &mut Vec<Value>);

/// What each message serialized to, by the message's shared allocation.
#[derive(Debug, Default)]
struct Items {
    by_address: HashMap<usize, (Weak<Message>, Arc<str>)>,
    /// Entries left after the last pruning of messages no context holds any more.
    live_at_prune: usize,
}

impl Items {
    /// The fewest entries worth a pruning pass.
    const PRUNE_FROM: usize = 1024;

    /// Forgets the messages no context holds any more, once the entries have doubled since the last time (so the
    /// pass costs O(1) per request, amortized).
    fn prune(&mut self) {
        if self.by_address.len() > 2 * self.live_at_prune.max(Self::PRUNE_FROM) {
            self.by_address.retain(|_, (weak, _)| weak.strong_count() > 0);
            self.live_at_prune = self.by_address.len();
        }
    }
}

/// Builds request bodies as text, keeping each context message's serialized items for the next request.
///
/// Where a message's items depend on that message alone (Chat Completions' `messages`, Responses' `input`), a
/// message that was in the last request's context (the same [`Arc`] in [`ModelContext::shared`]) is not serialized
/// again. A message changed since (the agent loop's context copies a message before changing one a request still
/// holds) is a new allocation, so it is serialized anew. Anthropic and Gemini bodies, whose items depend on their
/// neighbours, are built whole each time. The text is the same JSON as [`build_body`]'s (key order aside).
///
/// One cache serves any number of sessions (a worker's model serves all of its sessions). It keeps a message's text
/// while some context holds the message, and forgets it at a pruning pass after: about one serialized copy of the
/// contexts in use.
#[derive(Debug, Default)]
pub struct BodyCache {
    items: Mutex<Items>,
}

impl BodyCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The body of a request of `format` with `context`, as JSON text.
    pub fn body_text(
        &self,
        format: WireFormat,
        settings: &RequestSettings,
        context: &ModelContext,
        tools: &[ToolDefinition],
    ) -> String {
        let (frame, key, before, items): (Value, &str, Vec<Value>, ItemsOf) = match format {
            WireFormat::OpenAiChat => {
                let (frame, before) = openai_chat_frame(settings, tools);
                (frame, "messages", before, openai_chat_items)
            }
            WireFormat::OpenAiResponses => (
                openai_responses_frame(settings, tools),
                "input",
                Vec::new(),
                openai_responses_items,
            ),
            WireFormat::Anthropic | WireFormat::Gemini => {
                return build_body(format, settings, context, tools).to_string();
            }
        };
        if settings.extra.contains_key(key) {
            // The caller's own list replaces the context's: the whole body, as build_body makes it.
            return build_body(format, settings, context, tools).to_string();
        }
        let mut list: Vec<Arc<str>> = before.iter().map(|item| Arc::from(item.to_string())).collect();
        let mut cached = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        for shared in context.shared() {
            let address = Arc::as_ptr(shared) as usize;
            // The weak pointer keeps the allocation, so an address that upgrades to this message names it: a message
            // changed since moved to a new allocation (`Arc::make_mut` leaves weak pointers behind).
            let text = match cached.by_address.get(&address) {
                Some((weak, text)) if weak.upgrade().is_some_and(|held| Arc::ptr_eq(&held, shared)) => Arc::clone(text),
                _ => {
                    let text = serialize(shared, items);
                    cached
                        .by_address
                        .insert(address, (Arc::downgrade(shared), Arc::clone(&text)));
                    text
                }
            };
            if !text.is_empty() {
                list.push(text);
            }
        }
        cached.prune();
        drop(cached);
        splice(&with_extra(frame, settings).to_string(), key, &list)
    }
}

/// A message's items, as the comma-separated JSON of each.
fn serialize(message: &Message, items: ItemsOf) -> Arc<str> {
    let mut values = Vec::new();
    items(message, &mut values);
    let texts: Vec<String> = values.iter().map(Value::to_string).collect();
    Arc::from(texts.join(","))
}

/// `frame` (a JSON object's text) with `"key": [items…]` as its first member.
fn splice(frame: &str, key: &str, items: &[Arc<str>]) -> String {
    let rest = frame.strip_prefix('{').unwrap_or(frame);
    let length = frame.len() + key.len() + items.iter().map(|item| item.len() + 1).sum::<usize>() + 8;
    let mut body = String::with_capacity(length);
    body.push_str("{\"");
    body.push_str(key);
    body.push_str("\":[");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push(']');
    if rest != "}" {
        body.push(',');
    }
    body.push_str(rest);
    body
}

#[cfg(test)]
mod tests;
