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
                self.context.push(message.clone());
                Ok(())
            }
            Message::Assistant(fragment) => self.push_fragment(request, fragment),
            Message::ToolResult(result) => self.push_result(request, result),
        }
    }

    fn push_fragment(&mut self, request: Option<u32>, fragment: &AssistantMessage) -> Result<(), Reload> {
        let key: Key = (request, fragment.turn_id.clone());
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
            self.latest_with_call.insert(call.id.clone(), key.clone());
        }
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
