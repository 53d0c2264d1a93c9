//! The scheduling decisions of SPEC §4, as a pure state machine.
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
    /// An immediate outcome (SPEC §5.3): the call is settled without executing.
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
        }
    }

    /// Admits a batch of `len` calls (after the calls already admitted); `fenced` when any of them is a per-tool
    /// sequential call. Returns the batch's call numbers. An empty batch is ignored (SPEC §3.5).
    pub fn admit(&mut self, len: usize, fenced: bool) -> Range<usize> {
        let start = self.calls.len();
        let calls = start..start + len;
        if len == 0 {
            return calls;
        }
        let batch = self.batches.len();
        self.batches.push(Batch {
            calls: calls.clone(),
            fenced,
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
        if let Some(call) = self.startable() {
            let key = match std::mem::replace(&mut self.calls[call], CallState::Done) {
                CallState::Ready(key) => key,
                other => unreachable!("startable returned a call in state {other:?}"),
            };
            self.calls[call] = CallState::Running(key);
            self.in_flight += 1;
            return Some(Action::Start(call));
        }
        if self.may_prepare_next() {
            let call = self.next_to_prepare;
            self.calls[call] = CallState::Preparing;
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
        self.calls[call] = match outcome {
            Prepared::Runnable(key) => CallState::Ready(key),
            Prepared::Settled => CallState::Done,
        };
    }

    /// Reports that a running call's body ended.
    pub fn finished(&mut self, call: usize) {
        if matches!(self.calls.get(call), Some(CallState::Running(_))) {
            self.calls[call] = CallState::Done;
            self.in_flight -= 1;
        }
    }

    /// Stops all scheduling: every call that has not started is settled now and returned, in source order, so
    /// the engine can give each its "cancelled before start" result. Running calls keep running until
    /// [`Scheduler::finished`].
    pub fn abort(&mut self) -> Vec<usize> {
        self.aborted = true;
        let mut never_started = Vec::new();
        for (call, state) in self.calls.iter_mut().enumerate() {
            if matches!(state, CallState::Queued | CallState::Preparing | CallState::Ready(_)) {
                *state = CallState::Done;
                never_started.push(call);
            }
        }
        self.next_to_prepare = self.calls.len();
        never_started
    }

    /// `true` when every admitted call is settled.
    pub fn is_idle(&self) -> bool {
        self.calls.iter().all(|state| *state == CallState::Done)
    }

    /// Number of calls admitted so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// `true` before any call is admitted.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The batches' call ranges, in admission order.
    pub fn batches(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.batches.iter().map(|batch| batch.calls.clone())
    }

    fn settled(&self, calls: Range<usize>) -> bool {
        self.calls[calls].iter().all(|state| *state == CallState::Done)
    }

    fn may_prepare_next(&self) -> bool {
        let call = self.next_to_prepare;
        if call >= self.calls.len() || self.calls[..call].contains(&CallState::Preparing) {
            return false;
        }
        let batch = &self.batches[self.batch_of[call]];
        let one_at_a_time = self.mode == ExecutionMode::Sequential || batch.fenced;
        if one_at_a_time {
            // Prepared just before it would start: everything before it has settled.
            return self.settled(0..call);
        }
        // Calls after a fence wait until it has settled.
        self.batches[..self.batch_of[call]]
            .iter()
            .filter(|earlier| earlier.fenced)
            .all(|fence| self.settled(fence.calls.clone()))
    }

    fn startable(&self) -> Option<usize> {
        if self.max_in_flight.is_some_and(|max| self.in_flight >= max) {
            return None;
        }
        (0..self.calls.len()).find(|&call| {
            let CallState::Ready(key) = &self.calls[call] else {
                return false;
            };
            // Equal keys run in source order: wait for every earlier call with the same key.
            key.as_ref().is_none_or(|key| {
                !self.calls[..call].iter().any(
                    |earlier| matches!(earlier, CallState::Ready(Some(k)) | CallState::Running(Some(k)) if k == key),
                )
            })
        })
    }
}

#[cfg(test)]
mod tests;
