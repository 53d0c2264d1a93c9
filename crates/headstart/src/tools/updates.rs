//! Partial results of running calls (contract §5.4), from the tool's task to the engine's.
//!
//! A board, not a channel: each call has at most one pending update, and a newer one replaces an update the engine
//! has not taken yet (the last is always delivered). A tool that publishes faster than the engine takes, or that
//! keeps publishing after its call ended, cannot grow anything.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

use crate::tools::output::ToolOutput;

#[derive(Default)]
struct Pending {
    /// Slots with a pending update, in the order their first pending update arrived.
    order: VecDeque<usize>,
    latest: HashMap<usize, ToolOutput>,
}

/// The pending updates of one response's calls.
#[derive(Default)]
pub(crate) struct UpdateBoard {
    pending: Mutex<Pending>,
    engine: AtomicWaker,
}

impl UpdateBoard {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Critical sections are plain map and queue operations: a poisoned lock holds consistent data.
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, slot: usize, update: ToolOutput) {
        {
            let mut pending = self.lock();
            if pending.latest.insert(slot, update).is_none() {
                pending.order.push_back(slot);
            }
        }
        self.engine.wake();
    }

    /// Takes every pending update, oldest first; registers the engine's waker when there is none.
    pub fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Vec<(usize, ToolOutput)>> {
        self.engine.register(cx.waker());
        let mut pending = self.lock();
        if pending.order.is_empty() {
            return Poll::Pending;
        }
        let Pending { order, latest } = &mut *pending;
        let taken = order
            .drain(..)
            .filter_map(|slot| latest.remove(&slot).map(|update| (slot, update)))
            .collect();
        Poll::Ready(taken)
    }
}

/// Sends partial results of a running call; each becomes a `tool_execution_update` event.
///
/// Updates are coalesced when the engine or the consumer lags (the last one is always delivered), and dropped once
/// the call has ended.
#[derive(Clone)]
pub struct UpdateSink {
    slot: usize,
    board: Option<Arc<UpdateBoard>>,
}

impl std::fmt::Debug for UpdateSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateSink")
            .field("slot", &self.slot)
            .field("connected", &self.board.is_some())
            .finish()
    }
}

impl UpdateSink {
    pub(crate) fn new(slot: usize, board: Arc<UpdateBoard>) -> Self {
        UpdateSink {
            slot,
            board: Some(board),
        }
    }

    /// A sink whose updates go nowhere: for calls run without an event stream (recovery, a tool's own tests).
    pub fn disconnected() -> Self {
        UpdateSink { slot: 0, board: None }
    }

    /// Publishes a partial result.
    pub fn send(&self, update: ToolOutput) {
        if let Some(board) = &self.board {
            board.publish(self.slot, update);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use super::*;

    fn take(board: &UpdateBoard) -> Vec<(usize, String)> {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match board.poll_take(&mut cx) {
            Poll::Ready(updates) => updates
                .into_iter()
                .map(|(slot, update)| {
                    let text = update.content.iter().filter_map(|block| block.as_text()).collect();
                    (slot, text)
                })
                .collect(),
            Poll::Pending => Vec::new(),
        }
    }

    #[test]
    fn each_call_keeps_its_latest_update_in_the_order_calls_first_published() {
        let board = Arc::new(UpdateBoard::default());
        let (first, second) = (
            UpdateSink::new(1, Arc::clone(&board)),
            UpdateSink::new(0, Arc::clone(&board)),
        );
        first.send(ToolOutput::text("1a"));
        second.send(ToolOutput::text("0a"));
        first.send(ToolOutput::text("1b"));
        assert_eq!(take(&board), [(1, "1b".to_owned()), (0, "0a".to_owned())]);
        assert!(take(&board).is_empty(), "taken updates are gone");
        UpdateSink::disconnected().send(ToolOutput::text("nowhere"));
        assert!(take(&board).is_empty(), "a disconnected sink publishes nothing");
    }
}
