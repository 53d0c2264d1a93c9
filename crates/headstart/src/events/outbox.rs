//! The engine's side of a run's events: what one step produces, collected and handed to the queue in one batch.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::clock::Clock;
use crate::events::event::AgentEvent;
use crate::events::queue::{Entries, Entry, EventSink};

/// The engine's side of a run's events: events of one step are collected here and handed to the queue together,
/// stamped with the engine's clock at that moment. Dropping it (the run ended, or its task unwound) closes the
/// queue, so the consumer's stream always ends.
pub(crate) struct Outbox {
    sink: EventSink,
    clock: Arc<dyn Clock>,
    /// Events not yet handed to the queue, after a placeholder stamp set when they are.
    pending: Entries,
    /// `pending` holds a tool call's event (see [`EventSink::push_batch`]).
    tool_events: bool,
}

/// Events collected before a flush is forced, so a consumer on another thread sees a long burst progressively.
const FLUSH_AT: usize = 256;

impl Outbox {
    /// An outbox handing its events to `sink`, stamped with `clock`.
    pub fn new(sink: EventSink, clock: Arc<dyn Clock>) -> Self {
        Outbox {
            sink,
            clock,
            pending: VecDeque::new(),
            tool_events: false,
        }
    }

    /// Emits an event (queued with the next flush).
    #[inline]
    pub fn push(&mut self, event: AgentEvent) {
        self.push_with(|| event);
    }

    /// Emits the event `make` builds. Room in the outbox is made before the event is built, so no reallocation sits
    /// between building it and writing it into its slot: built first and moved in, a `message_update` was copied
    /// through the stack around that possible call, and the copy (a store-forwarding stall) was the largest cost of
    /// a text delta.
    #[inline(always)]
    pub fn push_with(&mut self, make: impl FnOnce() -> AgentEvent) {
        if self.pending.is_empty() {
            self.pending.push_back(Entry::Stamp(0));
        }
        if self.pending.len() == self.pending.capacity() {
            self.pending.reserve(FLUSH_AT + 2);
        }
        let event = make();
        self.tool_events |= event.tool_call_id().is_some();
        self.pending.push_back(Entry::Event(event));
        if self.pending.len() > FLUSH_AT {
            self.flush();
        }
    }

    /// Hands the collected events to the consumer's queue.
    pub fn flush(&mut self) {
        let Some(stamp) = self.pending.front_mut() else {
            return;
        };
        *stamp = Entry::Stamp(self.clock.now_us());
        self.sink
            .push_batch(&mut self.pending, std::mem::take(&mut self.tool_events));
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.flush();
        self.sink.close();
    }
}
