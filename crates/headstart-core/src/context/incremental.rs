//! [`ContextBuilder`]: the canonical context kept up to date as the log grows, at a cost per message that does not
//! depend on the history before it.

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::{canonical, merge_fragment, ModelContext};
use crate::model::{AssistantMessage, Message, ToolResultMessage};

/// A response, owned: its request, when known, and its `turn_id`.
type Key = (Option<u32>, String);

/// The canonical model context (contract §7.3) of a log, kept up to date one written message at a time.
///
/// After every [`push`](Self::push) that returns `Ok`, [`context`](Self::context) equals
/// [`model_context_by_request`](super::model_context_by_request) of the whole log pushed so far. The engine's writes
/// only ever touch the end of the context (a new message, a fragment or a result of the response begun last), and
/// those cost the size of the message. Anything else (a result for an older response, which recovery writes; a
/// fragment repeating a call id of its request) returns [`Reload`]: the caller builds again from the whole log with
/// [`from_log`](Self::from_log), which is what the context would be anyway.
#[derive(Debug, Clone, Default)]
pub struct ContextBuilder {
    context: ModelContext,
    /// The response begun last, which the next writes extend.
    latest: Option<Latest>,
    /// Every response.
    responses: HashSet<Key>,
    /// (request, call id) → the response with that call.
    response_of_call: HashMap<(u32, String), Key>,
    /// Call id → the response written last with that call (for results stored without their request).
    latest_with_call: HashMap<String, Key>,
    /// Results with a request that answered no call when written, by (request, call id).
    unowned: HashSet<(u32, String)>,
    /// The provider-async calls, by response, and those of them that have their result (beside the call or
    /// delivered late, contract §3.7.5).
    provider_async: HashSet<(Key, String)>,
    async_answered: HashSet<(Key, String)>,
    /// The response a fragment was pushed for last, unless a user message followed it.
    open: Option<Key>,
    /// The requests with a fragment, and those a late result became ready during that have none yet (contract
    /// §3.7.5): the first fragment of one of those moves the result after its response, which reloads.
    requests: HashSet<u32>,
    awaiting: HashSet<u32>,
}

/// Where the response begun last is in the context, and which of its calls have their result there. Lookups are
/// by id and the common case (results in call order) is O(1), so a response of ten thousand calls costs ten
/// thousand steps, not their square.
#[derive(Debug, Clone, Default)]
struct Latest {
    key: Key,
    /// The position of its merged message; its results follow it in call order.
    index: usize,
    /// Call id → its position in call order.
    position: HashMap<String, usize>,
    /// Ids that appear more than once in the response (only a log built by [`ContextBuilder::from_log`] has them):
    /// a result for one reloads.
    repeated: HashSet<String>,
    /// By position: whether the call's result is placed.
    placed: Vec<bool>,
    /// How many results are placed, and the highest position among them.
    placed_count: usize,
    last_placed: Option<usize>,
}

impl Latest {
    fn new(key: Key, index: usize) -> Self {
        Latest {
            key,
            index,
            ..Latest::default()
        }
    }

    /// Adds the response's next call.
    fn add_call(&mut self, id: &str, placed: bool) {
        if self.position.insert(id.to_owned(), self.placed.len()).is_some() {
            self.repeated.insert(id.to_owned());
        }
        self.placed.push(false);
        if placed {
            self.place(self.placed.len() - 1);
        }
    }

    /// How many of the calls before `position` have their result placed.
    fn placed_before(&self, position: usize) -> usize {
        match self.last_placed {
            Some(last) if last > position => self.placed[..position].iter().filter(|placed| **placed).count(),
            _ => self.placed_count,
        }
    }

    fn place(&mut self, position: usize) {
        self.placed[position] = true;
        self.placed_count += 1;
        self.last_placed = Some(self.last_placed.map_or(position, |last| last.max(position)));
    }
}

/// [`ContextBuilder::push`] cannot place a message without reading the whole log again; the builder is left
/// unusable, and the caller rebuilds it with [`ContextBuilder::from_log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reload {
    why: &'static str,
}

impl fmt::Display for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the context must be built from the whole log: {}", self.why)
    }
}

impl std::error::Error for Reload {}

impl ContextBuilder {
    /// A builder of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder of `log` (messages in durable write order, each with its model request as in
    /// [`model_context_by_request`](super::model_context_by_request)), ready for the messages written after it.
    pub fn from_log<'a>(log: impl IntoIterator<Item = (Option<u32>, &'a Message)>) -> Self {
        let log: Vec<(Option<u32>, &Message)> = log.into_iter().collect();
        let built = canonical(&log);
        let owned = |(request, turn): (Option<u32>, &str)| (request, turn.to_owned());
        let owned_call = |(key, id): (super::ResponseKey<'_>, &str)| (owned(key), id.to_owned());
        let async_answered = (built.provider_async.iter())
            .filter(|call| built.answered.contains(call))
            .chain(&built.delivered_late)
            .map(|&call| owned_call(call))
            .collect();
        let latest = built.latest.map(|key| {
            let index = built
                .context
                .iter()
                .rposition(|message| matches!(message, Message::Assistant(_)))
                .unwrap_or_default();
            let mut latest = Latest::new(owned(key), index);
            if let Message::Assistant(response) = &built.context[index] {
                for call in response.tool_calls() {
                    latest.add_call(&call.id, built.answered.contains(&(key, call.id.as_str())));
                }
            }
            latest
        });
        ContextBuilder {
            latest,
            responses: built.responses.into_iter().map(owned).collect(),
            response_of_call: (built.response_of_call.into_iter())
                .map(|((request, id), key)| ((request, id.to_owned()), owned(key)))
                .collect(),
            latest_with_call: (built.latest_with_call.into_iter())
                .map(|(id, key)| (id.to_owned(), owned(key)))
                .collect(),
            unowned: (built.unowned.into_iter())
                .map(|(request, id)| (request, id.to_owned()))
                .collect(),
            provider_async: built.provider_async.into_iter().map(owned_call).collect(),
            async_answered,
            open: built.open.map(owned),
            requests: built.requests,
            awaiting: built.awaiting.into_iter().collect(),
            context: built.context.into(),
        }
    }

    /// The canonical context of the log so far.
    pub fn context(&self) -> &ModelContext {
        &self.context
    }

    /// Adds the next message written to the log, with its model request.
    pub fn push(&mut self, request: Option<u32>, message: &Message) -> Result<(), Reload> {
        match message {
            Message::User(_) => {
                self.open = None;
                self.context.push(message.clone());
                Ok(())
            }
            Message::Assistant(fragment) => self.push_fragment(request, fragment),
            Message::ToolResult(result) => self.push_result(request, result),
        }
    }

    fn push_fragment(&mut self, request: Option<u32>, fragment: &AssistantMessage) -> Result<(), Reload> {
        let key: Key = (request, fragment.turn_id.clone());
        if let Some(request) = request {
            if self.awaiting.contains(&request) {
                return Err(reload("a result ready while this response streamed goes after it"));
            }
            self.requests.insert(request);
        }
        let continues = self.latest.as_ref().is_some_and(|latest| latest.key == key);
        if !continues && self.responses.contains(&key) {
            return Err(reload(
                "a fragment continues a response that is no longer the last one begun",
            ));
        }
        let mut own = HashSet::new();
        for call in fragment.tool_calls() {
            let repeated = !own.insert(call.id.as_str())
                || (self.latest.as_ref()).is_some_and(|latest| continues && latest.position.contains_key(&call.id));
            let claimed = request.is_some_and(|request| {
                let call = (request, call.id.clone());
                self.response_of_call.contains_key(&call) || self.unowned.contains(&call)
            });
            if repeated || claimed {
                return Err(reload("a call id repeats within its request"));
            }
        }
        for call in fragment.tool_calls() {
            if let Some(request) = request {
                self.response_of_call.insert((request, call.id.clone()), key.clone());
            }
            if call.provider_async {
                self.provider_async.insert((key.clone(), call.id.clone()));
            }
            self.latest_with_call.insert(call.id.clone(), key.clone());
        }
        self.open = Some(key.clone());
        match &mut self.latest {
            Some(latest) if continues => {
                for call in fragment.tool_calls() {
                    latest.add_call(&call.id, false);
                }
                if let Some(Message::Assistant(response)) = self.context.make_mut(latest.index) {
                    merge_fragment(response, fragment);
                }
            }
            _ => {
                let mut latest = Latest::new(key.clone(), self.context.len());
                for call in fragment.tool_calls() {
                    latest.add_call(&call.id, false);
                }
                self.latest = Some(latest);
                self.responses.insert(key);
                self.context.push(Message::Assistant(fragment.clone()));
            }
        }
        Ok(())
    }

    fn push_result(&mut self, request: Option<u32>, result: &ToolResultMessage) -> Result<(), Reload> {
        let id = &result.tool_call_id;
        let owner = match request {
            Some(request) => self.response_of_call.get(&(request, id.clone())),
            None => self.latest_with_call.get(id),
        };
        let Some(owner) = owner else {
            // Kept where it was written, so nothing stored is dropped; a later fragment claiming it reloads.
            if let Some(request) = request {
                self.unowned.insert((request, id.clone()));
            }
            self.context.push(Message::ToolResult(result.clone()));
            return Ok(());
        };
        // Only provider-async calls need the lookup (and its key's copy): the common result skips it.
        let call = (!self.provider_async.is_empty()).then(|| (owner.clone(), id.clone()));
        if let Some(call) = call.filter(|call| self.provider_async.contains(call)) {
            if !self.async_answered.insert(call) {
                return Ok(()); // the first result wins, as in the whole log's context
            }
            if super::is_late(owner, self.open.as_ref(), true, result.ready_during.is_some()) {
                // Delivered late (contract §3.7.5): kept where it was written, at the end; after the response that
                // was streaming then, should that one write its first fragment later.
                if let Some(streaming) = result
                    .ready_during
                    .filter(|streaming| !self.requests.contains(streaming))
                {
                    self.awaiting.insert(streaming);
                }
                self.context.push(Message::ToolResult(result.clone()));
                return Ok(());
            }
        }
        let Some(latest) = self.latest.as_mut().filter(|latest| latest.key == *owner) else {
            return Err(reload("a result answers a response before the last one begun"));
        };
        let position = match latest.position.get(id) {
            Some(position) if !latest.repeated.contains(id) => *position,
            _ => return Err(reload("a result answers a call its response has not once")),
        };
        if latest.placed[position] {
            return Ok(()); // the first result wins, as in the whole log's context
        }
        let at = latest.index + 1 + latest.placed_before(position);
        latest.place(position);
        self.context.insert(at, Message::ToolResult(result.clone()));
        Ok(())
    }
}

fn reload(why: &'static str) -> Reload {
    Reload { why }
}

#[cfg(test)]
mod tests;
