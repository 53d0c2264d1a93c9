//! The scheduling decisions of contract §4, as a pure state machine.
//!
//! No tokio, no tools, no clock: the engine tells the [`Scheduler`] what happened (a batch was admitted, a call
//! was prepared, a call finished) and asks it what to do next ([`Scheduler::next_action`]). That keeps every rule
//! testable exhaustively without a runtime.
//!
//! Calls are numbered in source order across all batches of a response. The rules:
//! - preparation runs one call at a time, in source order (§4.1);
//! - parallel mode: a call is prepared as soon as every earlier call is prepared, without waiting for a slot, and
//!   starts once prepared, subject to `max_in_flight` (§4.6) and conflict keys (§4.5);
//! - sequential mode: a call is prepared only after every earlier call settled, then starts (§4.3);
//! - a fenced batch (one holding a per-tool sequential call, §4.4) is prepared only after every earlier batch
//!   settled, runs one call at a time, and holds back the preparation of later batches until it has settled.
//!
//! Every decision is O(log n) amortized: the state is indexed (a settled-prefix counter, one source-ordered queue of
//! holders per conflict key, the set of calls ready to start and free of key conflicts, a count of unsettled calls
//! per batch), so one hostile response of 100,000 keyed calls is scheduled in well under a second.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ops::Range;

use crate::config::ExecutionMode;

/// What the engine should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Prepare this call (lookup, arguments, validation, `before` hooks).
    Prepare(usize),
    /// Start this call's body.
    Start(usize),
}

/// How a preparation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// Ready to start, with its conflict key.
    Runnable(Option<String>),
    /// An immediate outcome (contract §5.3): the call is settled without executing.
    Settled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum CallState {
    Queued,
    Preparing,
    Ready(Option<String>),
    Running(Option<String>),
    Done,
}

#[derive(Debug, Clone)]
struct Batch {
    calls: Range<usize>,
    fenced: bool,
    /// The last fenced batch before this one: calls of an unfenced batch are prepared once it has settled (and
    /// fences settle in order, so then every earlier fence has).
    previous_fence: Option<usize>,
    /// Calls of this batch not yet settled.
    unsettled: usize,
}

/// The pure scheduler of one response.
#[derive(Debug, Clone)]
pub struct Scheduler {
    mode: ExecutionMode,
    max_in_flight: Option<usize>,
    calls: Vec<CallState>,
    batch_of: Vec<usize>,
    batches: Vec<Batch>,
    next_to_prepare: usize,
    in_flight: usize,
    aborted: bool,
    // Indexes over `calls`, kept in step with it by `set`; they hold nothing the states do not determine.
    /// Every call before this one is settled.
    settled_prefix: usize,
    /// Calls settled so far.
    settled: usize,
    /// The call being prepared (at most one: preparation is sequential).
    preparing: Option<usize>,
    /// Per conflict key, the ready and running calls holding it, in source order: only the first may run.
    holders: HashMap<String, VecDeque<usize>>,
    /// Ready calls that no earlier call blocks on a key; the smallest starts next.
    startable: BTreeSet<usize>,
}

impl Scheduler {
    /// A scheduler for one response.
    pub fn new(mode: ExecutionMode, max_in_flight: Option<usize>) -> Self {
        Scheduler {
            mode,
            max_in_flight: max_in_flight.map(|n| n.max(1)),
            calls: Vec::new(),
            batch_of: Vec::new(),
            batches: Vec::new(),
            next_to_prepare: 0,
            in_flight: 0,
            aborted: false,
            settled_prefix: 0,
            settled: 0,
            preparing: None,
            holders: HashMap::new(),
            startable: BTreeSet::new(),
        }
    }

    /// Admits a batch of `len` calls (after the calls already admitted); `fenced` when any of them is a per-tool
    /// sequential call. Returns the batch's call numbers. An empty batch is ignored (contract §3.5).
    pub fn admit(&mut self, len: usize, fenced: bool) -> Range<usize> {
        let start = self.calls.len();
        let calls = start..start + len;
        if len == 0 {
            return calls;
        }
        let batch = self.batches.len();
        let previous_fence = match self.batches.last() {
            Some(last) if last.fenced => Some(batch - 1),
            Some(last) => last.previous_fence,
            None => None,
        };
        self.batches.push(Batch {
            calls: calls.clone(),
            fenced,
            previous_fence,
            unsettled: len,
        });
        self.calls.extend(std::iter::repeat_n(CallState::Queued, len));
        self.batch_of.extend(std::iter::repeat_n(batch, len));
        calls
    }

    /// The next thing to do, if anything; the returned action is already reflected in the state. Call it until it
    /// returns `None` after every change.
    pub fn next_action(&mut self) -> Option<Action> {
        if self.aborted {
            return None;
        }
        if let Some(call) = self.next_startable() {
            let key = match &self.calls[call] {
                CallState::Ready(key) => key.clone(),
                other => unreachable!("the startable set holds a call in state {other:?}"),
            };
            self.set(call, CallState::Running(key));
            return Some(Action::Start(call));
        }
        if self.may_prepare_next() {
            let call = self.next_to_prepare;
            self.set(call, CallState::Preparing);
            self.next_to_prepare += 1;
            return Some(Action::Prepare(call));
        }
        None
    }

    /// Reports the end of a call's preparation.
    pub fn prepared(&mut self, call: usize, outcome: Prepared) {
        if self.calls.get(call) != Some(&CallState::Preparing) {
            return;
        }
        let state = match outcome {
            Prepared::Runnable(key) => CallState::Ready(key),
            Prepared::Settled => CallState::Done,
        };
        self.set(call, state);
    }

    /// Reports that a running call's body ended.
    pub fn finished(&mut self, call: usize) {
        if matches!(self.calls.get(call), Some(CallState::Running(_))) {
            self.set(call, CallState::Done);
        }
    }

    /// Stops all scheduling: every call that has not started is settled now and returned, in source order, so
    /// the engine can give each its "cancelled before start" result. Running calls keep running until
    /// [`Scheduler::finished`].
    pub fn abort(&mut self) -> Vec<usize> {
        self.aborted = true;
        let never_started: Vec<usize> = (self.settled_prefix..self.calls.len())
            .filter(|&call| {
                matches!(
                    self.calls[call],
                    CallState::Queued | CallState::Preparing | CallState::Ready(_)
                )
            })
            .collect();
        for &call in &never_started {
            self.set(call, CallState::Done);
        }
        self.next_to_prepare = self.calls.len();
        never_started
    }

    /// `true` when every admitted call is settled.
    pub fn is_idle(&self) -> bool {
        self.settled == self.calls.len()
    }

    /// Number of admitted calls not settled yet.
    pub fn unsettled(&self) -> usize {
        self.calls.len() - self.settled
    }

    /// Number of calls admitted so far.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// `true` before any call is admitted.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The batches' call ranges, in admission order.
    pub fn batches(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.batches.iter().map(|batch| batch.calls.clone())
    }

    /// Moves `call` to `state`, keeping every index in step. The only place a call's state changes.
    fn set(&mut self, call: usize, state: CallState) {
        let old = std::mem::replace(&mut self.calls[call], state);
        match &old {
            CallState::Preparing => self.preparing = None,
            CallState::Ready(_) => {
                self.startable.remove(&call);
            }
            CallState::Running(_) => self.in_flight -= 1,
            CallState::Queued | CallState::Done => {}
        }
        if let CallState::Ready(Some(key)) | CallState::Running(Some(key)) = &old {
            let leaves = !matches!(self.calls[call], CallState::Running(_));
            if leaves {
                self.release_key(key, call);
            }
        }
        match &self.calls[call] {
            CallState::Preparing => self.preparing = Some(call),
            CallState::Ready(key) => self.hold_key(key.clone(), call),
            CallState::Running(_) => self.in_flight += 1,
            CallState::Done => self.settle(call),
            CallState::Queued => {}
        }
    }

    /// A ready call joins its key's queue; it may start when nobody before it holds the key.
    fn hold_key(&mut self, key: Option<String>, call: usize) {
        let Some(key) = key else {
            self.startable.insert(call);
            return;
        };
        let queue = self.holders.entry(key).or_default();
        // Calls get ready in source order, so pushing at the back keeps the queue sorted.
        queue.push_back(call);
        if queue.front() == Some(&call) {
            self.startable.insert(call);
        }
    }

    /// A call gives its key up (it finished, or was settled without starting); the next holder may start.
    fn release_key(&mut self, key: &str, call: usize) {
        let Some(queue) = self.holders.get_mut(key) else {
            return;
        };
        if let Some(position) = queue.iter().position(|&holder| holder == call) {
            queue.remove(position);
        }
        let next = queue.front().copied();
        if queue.is_empty() {
            self.holders.remove(key);
        }
        if let Some(next) = next {
            if matches!(self.calls[next], CallState::Ready(_)) {
                self.startable.insert(next);
            }
        }
    }

    fn settle(&mut self, call: usize) {
        self.settled += 1;
        self.batches[self.batch_of[call]].unsettled -= 1;
        while self.calls.get(self.settled_prefix) == Some(&CallState::Done) {
            self.settled_prefix += 1;
        }
    }

    fn batch_settled(&self, batch: usize) -> bool {
        self.batches[batch].unsettled == 0
    }

    fn may_prepare_next(&self) -> bool {
        let call = self.next_to_prepare;
        if call >= self.calls.len() || self.preparing.is_some() {
            return false;
        }
        let batch = &self.batches[self.batch_of[call]];
        let one_at_a_time = self.mode == ExecutionMode::Sequential || batch.fenced;
        if one_at_a_time {
            // Prepared just before it would start: everything before it has settled.
            return self.settled_prefix >= call;
        }
        // Calls after a fence wait until it has settled.
        batch.previous_fence.is_none_or(|fence| self.batch_settled(fence))
    }

    fn next_startable(&self) -> Option<usize> {
        if self.max_in_flight.is_some_and(|max| self.in_flight >= max) {
            return None;
        }
        self.startable.first().copied()
    }
}

#[cfg(test)]
mod tests;
