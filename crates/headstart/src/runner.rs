//! The tokio plumbing around the pure [`Scheduler`]: it owns the in-flight preparation and the running call
//! futures of one response, and reports what happened, one [`RunnerEvent`] at a time.
//!
//! Call futures are polled by the response's own task rather than spawned. That makes the order of simultaneous
//! happenings deterministic (FORMAT.md: tool returns, timeouts and updates come before model events due at the
//! same instant), which the engine's driver relies on through a biased `select!`. Preparation and execution
//! catch panics themselves (`catch_unwind`), so a tool can never take the engine down. A body that blocks its thread blocks the response:
//! CPU-heavy tools should move their work to `spawn_blocking`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use headstart_core::ToolCall;
use headstart_store::RunOutcome;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::execute::{execute, Executed};
use crate::hooks::Hooks;
use crate::prepare::{prepare, Immediate, ReadyCall};
use crate::scheduler::{Action, Prepared, Scheduler};
use crate::tool::{ToolContext, ToolOutput, UpdateSink};
use crate::toolbox::Toolbox;

/// Something that happened to a call.
pub(crate) enum RunnerEvent {
    /// A running call published a partial result.
    Update { slot: usize, update: ToolOutput },
    /// A call passed preparation; `advance` starts it when the scheduler allows.
    Prepared,
    /// A preparation settled the call without executing it.
    Immediate { slot: usize, immediate: Immediate },
    /// A call's body and finalize phase ended.
    Executed { slot: usize, executed: Executed },
}

/// One admitted call.
pub(crate) struct Slot {
    pub call: Arc<ToolCall>,
    pub started_at_us: Option<i64>,
    pub settled: bool,
    pub terminate: bool,
    ready: Option<ReadyCall>,
}

type Preparing = (usize, BoxFuture<'static, Result<ReadyCall, Immediate>>);

/// Runs the calls of one response.
pub(crate) struct ToolRunner {
    scheduler: Scheduler,
    slots: Vec<Slot>,
    toolbox: Arc<Toolbox>,
    hooks: Hooks,
    preparing: Option<Preparing>,
    running: FuturesUnordered<BoxFuture<'static, (usize, Executed)>>,
    updates_tx: UnboundedSender<(usize, ToolOutput)>,
    updates_rx: UnboundedReceiver<(usize, ToolOutput)>,
    held_back: Option<(usize, Executed)>,
    cancel: CancellationToken,
}

impl ToolRunner {
    pub fn new(config: &EngineConfig, toolbox: Arc<Toolbox>, hooks: Hooks) -> Self {
        let (updates_tx, updates_rx) = unbounded_channel();
        ToolRunner {
            scheduler: Scheduler::new(config.tool_execution, config.max_in_flight),
            slots: Vec::new(),
            toolbox,
            hooks,
            preparing: None,
            running: FuturesUnordered::new(),
            updates_tx,
            updates_rx,
            held_back: None,
            cancel: CancellationToken::new(),
        }
    }

    /// Admits a batch; returns its slots.
    pub fn admit(&mut self, calls: Vec<ToolCall>) -> std::ops::Range<usize> {
        let fenced = calls.iter().any(|call| self.toolbox.fences(call));
        let range = self.scheduler.admit(calls.len(), fenced);
        self.slots.extend(calls.into_iter().map(|call| Slot {
            call: Arc::new(call),
            started_at_us: None,
            settled: false,
            terminate: false,
            ready: None,
        }));
        range
    }

    /// Carries out the scheduler's decisions; returns the slots that started now (their bodies run from the next
    /// poll of [`ToolRunner::poll_event`]).
    pub fn advance(&mut self, now_us: i64) -> Vec<usize> {
        let mut started = Vec::new();
        while let Some(action) = self.scheduler.next_action() {
            match action {
                Action::Prepare(slot) => self.begin_preparation(slot),
                Action::Start(slot) => {
                    self.start(slot, now_us);
                    started.push(slot);
                }
            }
        }
        started
    }

    fn begin_preparation(&mut self, slot: usize) {
        let call = Arc::clone(&self.slots[slot].call);
        let toolbox = Arc::clone(&self.toolbox);
        let hooks = self.hooks.clone();
        let future = async move { prepare(&call, &toolbox, &hooks).await };
        self.preparing = Some((slot, future.boxed()));
    }

    fn start(&mut self, slot: usize, now_us: i64) {
        let entry = &mut self.slots[slot];
        entry.started_at_us = Some(now_us);
        let Some(ready) = entry.ready.take() else {
            // The scheduler only starts prepared calls; a missing preparation is an engine bug, reported as one.
            let executed = Executed::error(RunOutcome::Error, "internal error: call started without preparation");
            self.running.push(async move { (slot, executed) }.boxed());
            return;
        };
        let call = Arc::clone(&entry.call);
        let context = ToolContext {
            call_id: call.id.clone(),
            cancel: self.cancel.child_token(),
            updates: UpdateSink::new(slot, self.updates_tx.clone()),
        };
        let hooks = self.hooks.clone();
        let future = async move { (slot, execute(ready, call, hooks, context).await) };
        self.running.push(future.boxed());
    }

    /// The next thing that happened, in the documented priority: updates, then call returns (an update a call
    /// sent before returning is reported before its return), then preparations. Pending while nothing is active.
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<RunnerEvent> {
        if self.running.is_empty() && self.preparing.is_none() && self.held_back.is_none() {
            // Nothing is active, so nothing can happen (an update of a settled call is dropped anyway, when the
            // channel is next drained): skip registering wake-ups. This keeps streaming text free of them.
            return Poll::Pending;
        }
        loop {
            if let Poll::Ready(Some((slot, update))) = self.updates_rx.poll_recv(cx) {
                if self.slots.get(slot).is_some_and(|entry| !entry.settled) {
                    return Poll::Ready(RunnerEvent::Update { slot, update });
                }
                continue; // late update of a settled call: dropped
            }
            break;
        }
        if let Some((slot, executed)) = self.held_back.take() {
            return Poll::Ready(self.settle_executed(slot, executed));
        }
        if let Poll::Ready(Some((slot, executed))) = self.running.poll_next_unpin(cx) {
            // Updates sent during this poll precede the return: report them first.
            if !self.updates_rx.is_empty() {
                self.held_back = Some((slot, executed));
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            return Poll::Ready(self.settle_executed(slot, executed));
        }
        if let Some((slot, future)) = &mut self.preparing {
            if let Poll::Ready(prepared) = Pin::new(future).poll(cx) {
                let slot = *slot;
                self.preparing = None;
                match prepared {
                    Ok(ready) => {
                        let key = ready.conflict_key.clone();
                        self.slots[slot].ready = Some(ready);
                        self.scheduler.prepared(slot, Prepared::Runnable(key));
                    }
                    Err(immediate) => {
                        self.scheduler.prepared(slot, Prepared::Settled);
                        self.slots[slot].settled = true;
                        return Poll::Ready(RunnerEvent::Immediate { slot, immediate });
                    }
                }
                return Poll::Ready(RunnerEvent::Prepared);
            }
        }
        Poll::Pending
    }

    fn settle_executed(&mut self, slot: usize, executed: Executed) -> RunnerEvent {
        self.scheduler.finished(slot);
        self.slots[slot].settled = true;
        RunnerEvent::Executed { slot, executed }
    }

    /// Stops everything: running calls see their tokens cancelled (their own returns are still reported), and
    /// every call that has not started is settled now and returned for its "cancelled before start" result.
    pub fn abort(&mut self) -> Vec<usize> {
        self.cancel.cancel();
        self.preparing = None;
        let never_started = self.scheduler.abort();
        for &slot in &never_started {
            self.slots[slot].settled = true;
        }
        never_started
    }

    /// `true` once every admitted call is settled.
    pub fn is_idle(&self) -> bool {
        self.scheduler.is_idle() && self.held_back.is_none()
    }

    pub fn slot(&self, slot: usize) -> &Slot {
        &self.slots[slot]
    }

    pub fn slot_mut(&mut self, slot: usize) -> &mut Slot {
        &mut self.slots[slot]
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every non-empty batch has only results with `terminate = true` (SPEC §5.6).
    pub fn all_batches_terminated(&self) -> bool {
        let mut batches = self.scheduler.batches().peekable();
        batches.peek().is_some() && batches.all(|batch| self.slots[batch].iter().all(|slot| slot.terminate))
    }
}
