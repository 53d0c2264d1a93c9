//! [`CancelOnDrop`]: the engine's hold on a task it started on the Python loop (a model's stream).
//!
//! Cancelling posts a letter to the loop's [`Mailbox`]: no GIL is taken on the engine's side.

use crate::mailbox::{Letter, Mailbox};

/// Cancels a Python task when the engine stops waiting for it (the stream holding this is dropped).
pub(crate) struct CancelOnDrop {
    mailbox: Mailbox,
    id: u64,
}

impl CancelOnDrop {
    /// Holds the task started for letter `id` of `mailbox`.
    pub fn new(mailbox: Mailbox, id: u64) -> Self {
        CancelOnDrop { mailbox, id }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.mailbox.send(Letter::Cancel { id: self.id });
    }
}
