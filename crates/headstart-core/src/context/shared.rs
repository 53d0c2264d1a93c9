//! [`ModelContext`]: a context whose messages are shared, so handing it to a model costs a pointer per message.

use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeSeq, Serializer};

use crate::model::Message;

/// The messages of a model request's context (contract §7.3), in order.
///
/// Each message is behind an [`Arc`]: the agent loop keeps the session's context in memory and hands a clone to
/// every request, and a clone copies one pointer per message rather than the history's text. Read it as a sequence of
/// [`Message`]s with [`iter`](Self::iter) (or `for message in &context`); build one from a `Vec<Message>` or by
/// collecting messages.
#[derive(Clone, Default, PartialEq)]
pub struct ModelContext {
    messages: Vec<Arc<Message>>,
}

impl ModelContext {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: self.messages.iter(),
        }
    }

    /// The message at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.messages.get(index).map(Arc::as_ref)
    }

    /// The last message, if there is one.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last().map(Arc::as_ref)
    }

    /// The shared messages themselves: a consumer that keeps messages between requests (a cache of serialized
    /// messages, say) can tell an unchanged message by [`Arc::ptr_eq`].
    pub fn shared(&self) -> &[Arc<Message>] {
        &self.messages
    }

    /// The messages as an owned vector (a copy of each).
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.messages.push(Arc::new(message));
    }

    pub(super) fn insert(&mut self, index: usize, message: Message) {
        self.messages.insert(index, Arc::new(message));
    }

    /// The message at `index` to change in place; copied first only when a request still holds it.
    pub(super) fn make_mut(&mut self, index: usize) -> Option<&mut Message> {
        self.messages.get_mut(index).map(Arc::make_mut)
    }
}

impl fmt::Debug for ModelContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Message>> for ModelContext {
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl FromIterator<Message> for ModelContext {
    fn from_iter<I: IntoIterator<Item = Message>>(messages: I) -> Self {
        ModelContext {
            messages: messages.into_iter().map(Arc::new).collect(),
        }
    }
}

impl<'a> IntoIterator for &'a ModelContext {
    type Item = &'a Message;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Serialized as the list of its messages, as a `Vec<Message>` is.
impl Serialize for ModelContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for message in self {
            seq.serialize_element(message)?;
        }
        seq.end()
    }
}

/// The messages of a [`ModelContext`], in order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    inner: std::slice::Iter<'a, Arc<Message>>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Message;

    fn next(&mut self) -> Option<&'a Message> {
        self.inner.next().map(Arc::as_ref)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(Arc::as_ref)
    }
}

impl ExactSizeIterator for Iter<'_> {}
