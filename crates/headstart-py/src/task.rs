//! [`CancelOnDrop`]: the engine's hold on a task it started on the Python loop (a tool call, a model's stream).
//!
//! Cancelling posts a letter to the loop's [`Mailbox`]: no GIL is taken on the engine's side.

use crate::mailbox::{Letter, Mailbox};

/// Cancels a Python task when the engine stops waiting for it (the future or stream holding this is dropped), unless
/// disarmed first.
pub(crate) struct CancelOnDrop {
    target: Option<(Mailbox, u64)>,
}

impl CancelOnDrop {
    /// Holds the task started for letter `id` of `mailbox`.
    pub fn new(mailbox: Mailbox, id: u64) -> Self {
        CancelOnDrop {
            target: Some((mailbox, id)),
        }
    }

    /// Asks the loop to cancel the task now.
    pub fn cancel(&self) {
        if let Some((mailbox, id)) = &self.target {
            mailbox.send(Letter::Cancel { id: *id });
        }
    }

    /// The task ended by itself: nothing to cancel on drop.
    pub fn disarm(&mut self) {
        self.target = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.cancel();
    }
}
