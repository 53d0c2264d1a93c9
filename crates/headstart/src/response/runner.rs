//! The tokio plumbing around the pure [`Scheduler`]: it owns the in-flight preparation and the running calls of one
//! response, and reports what happened, one [`RunnerEvent`] at a time.
//!
//! Each call body runs on a task of its own, so tool bodies use every core of a multi-thread runtime, and a body
//! that blocks its thread stalls neither the model stream nor other calls. Preparation (lookup, validation,
//! `before` hooks) stays on the response's task: it runs one call at a time in source order anyway (contract §4.1).
//! Preparation and execution catch panics themselves, so a tool can never take the engine down.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use headstart_core::ToolCall;
use headstart_store::RunOutcome;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, Span};

use crate::config::EngineConfig;
use crate::response::admission::Admission;
use crate::response::execute::{execute, Executed};
use crate::response::lease_guard::CallGate;
use crate::response::prepare::{prepare, Immediate, ReadyCall};
use crate::response::scheduler::{Action, Prepared, Scheduler};
use crate::response::telemetry::{self, CallTiming};
use crate::tools::hooks::Hooks;
use crate::tools::output::ToolOutput;
use crate::tools::toolbox::Toolbox;
use crate::tools::updates::{UpdateBoard, UpdateSink};

/// Something that happened to a call.
pub(crate) enum RunnerEvent {
    /// Running calls published partial results (oldest first).
    Updates(Vec<(usize, ToolOutput)>),
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
    timing: CallTiming,
}

/// Calls of a response that ended before their results (contract §3.7.5): their returns, by slot, with each call
/// and its start time.
pub(crate) struct DetachedCalls {
    pub calls: std::collections::HashMap<usize, (Arc<ToolCall>, Option<i64>)>,
    pub returns: FuturesUnordered<BoxFuture<'static, (usize, Executed)>>,
    /// Cancels them (the response's call token).
    pub cancel: CancellationToken,
}

impl DetachedCalls {
    /// No call was handed over.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The ids of the calls handed over, in source order.
    pub fn ids(&self) -> Vec<String> {
        let mut slots: Vec<&usize> = self.calls.keys().collect();
        slots.sort();
        slots.into_iter().map(|slot| self.calls[slot].0.id.clone()).collect()
    }
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
    /// Running calls whose results may reach the model in a later request (contract §3.7.5): kept apart so the
    /// response can end without them ([`ToolRunner::detach`]).
    deliverable_later: FuturesUnordered<BoxFuture<'static, (usize, Executed)>>,
    updates: Arc<UpdateBoard>,
    cancel: CancellationToken,
    tasks: TaskTracker,
    gate: CallGate,
    /// The run's span: each call's `execute_tool` span is its child.
    parent: Span,
    capture_content: bool,
    /// Calls of the response past this many settle as refused without preparing (contract §4.6.4).
    max_calls: Option<usize>,
}

impl ToolRunner {
    /// A runner whose call tasks are tracked by `tasks`, whose calls pass `gate` before they start, and whose calls'
    /// spans are children of `parent`.
    pub fn new(
        config: &EngineConfig,
        toolbox: Arc<Toolbox>,
        hooks: Hooks,
        tasks: TaskTracker,
        gate: CallGate,
        parent: Span,
    ) -> Self {
        ToolRunner {
            scheduler: Scheduler::new(config.tool_execution, config.max_in_flight),
            slots: Vec::new(),
            toolbox,
            hooks,
            preparing: None,
            running: FuturesUnordered::new(),
            deliverable_later: FuturesUnordered::new(),
            updates: Arc::default(),
            cancel: CancellationToken::new(),
            tasks,
            gate,
            parent,
            capture_content: config.capture_content,
            max_calls: config.max_calls_per_response,
        }
    }

    /// Admits the calls of a committed fragment as one batch; returns its slots. `timing` says, for its span, how
    /// each call got here.
    pub fn admit(
        &mut self,
        admission: Admission,
        mut timing: impl FnMut(&ToolCall) -> CallTiming,
    ) -> std::ops::Range<usize> {
        let calls = admission.into_calls();
        let fenced = calls.iter().any(|call| self.toolbox.fences(call));
        let range = self.scheduler.admit(calls.len(), fenced);
        self.slots.extend(calls.into_iter().map(|call| Slot {
            timing: timing(&call),
            call: Arc::new(call),
            started_at_us: None,
            settled: false,
            terminate: false,
            ready: None,
        }));
        range
    }

    /// Carries out the scheduler's decisions; returns the slots that started now (their bodies are running on
    /// their own tasks). A call the lease guard refused is not among them: it settles unstarted (contract §7.5.4).
    pub fn advance(&mut self, now_us: i64) -> Vec<usize> {
        let mut started = Vec::new();
        while let Some(action) = self.scheduler.next_action() {
            match action {
                Action::Prepare(slot) => self.begin_preparation(slot),
                Action::Start(slot) => {
                    if self.start(slot, now_us) {
                        started.push(slot);
                    }
                }
            }
        }
        started
    }

    fn begin_preparation(&mut self, slot: usize) {
        // Slots are numbered in source order across the response's batches: slot N is the response's call N.
        if let Some(limit) = self.max_calls.filter(|&limit| slot >= limit) {
            let refused = Err(Immediate::too_many_calls(limit));
            self.preparing = Some((slot, async move { refused }.boxed()));
            return;
        }
        let call = Arc::clone(&self.slots[slot].call);
        let toolbox = Arc::clone(&self.toolbox);
        let hooks = self.hooks.clone();
        let future = async move { prepare(&call, &toolbox, &hooks).await };
        self.preparing = Some((slot, future.boxed()));
    }

    /// Starts a call's body; `false` when the gate refused it (it then settles without a start time).
    fn start(&mut self, slot: usize, now_us: i64) -> bool {
        if let Some(refused) = self.gate.refusal() {
            self.slots[slot].ready = None;
            self.running.push(async move { (slot, refused) }.boxed());
            return false;
        }
        let entry = &mut self.slots[slot];
        entry.started_at_us = Some(now_us);
        let Some(ready) = entry.ready.take() else {
            // The scheduler only starts prepared calls; a missing preparation is an engine bug, reported as one.
            let executed = Executed::error(RunOutcome::Error, "internal error: call started without preparation");
            self.running.push(async move { (slot, executed) }.boxed());
            return true;
        };
        let call = Arc::clone(&entry.call);
        let timing = entry.timing;
        let context = self.gate.context(
            &call.id,
            self.cancel.child_token(),
            UpdateSink::new(slot, Arc::clone(&self.updates)),
        );
        let hooks = self.hooks.clone();
        let capture = self.capture_content;
        // The span is entered on the call's task, where the body runs, and parented to the run, not to whatever
        // the engine's task has entered.
        let span = telemetry::execute_tool(&self.parent, &call, timing, now_us, capture);
        crate::metrics::call_started(timing.early, timing.sealed_at_us.map(|sealed| now_us - sealed));
        let body = self.tasks.spawn(
            async move {
                let executed = execute(ready, call, hooks, context).await;
                telemetry::record_executed(&Span::current(), &executed, capture);
                executed
            }
            .instrument(span),
        );
        let returned = async move {
            // `execute` catches panics itself; a join error means the runtime is shutting down.
            let executed = body.await.unwrap_or_else(|error| {
                Executed::error(
                    RunOutcome::Error,
                    format!("internal error: the call's task failed: {error}"),
                )
            });
            (slot, executed)
        }
        .boxed();
        if self.toolbox.delivers_later(&self.slots[slot].call) {
            self.deliverable_later.push(returned);
        } else {
            self.running.push(returned);
        }
        true
    }

    /// The next thing that happened, in the documented priority: updates, then call returns (an update a call
    /// published before returning is reported before its return), then preparations. Pending while nothing is
    /// active.
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<RunnerEvent> {
        if self.running.is_empty() && self.deliverable_later.is_empty() && self.preparing.is_none() {
            // Nothing runs, so nothing can publish or return: skip registering wake-ups (this keeps streaming text
            // free of them). A late update of a settled call stays on the board until the next drain drops it.
            return Poll::Pending;
        }
        if let Poll::Ready(updates) = self.updates.poll_take(cx) {
            let live: Vec<(usize, ToolOutput)> = updates
                .into_iter()
                .filter(|(slot, _)| self.slots.get(*slot).is_some_and(|entry| !entry.settled))
                .collect();
            if !live.is_empty() {
                return Poll::Ready(RunnerEvent::Updates(live));
            }
        }
        if let Poll::Ready(Some((slot, executed))) = self.running.poll_next_unpin(cx) {
            return Poll::Ready(self.settle_executed(slot, executed));
        }
        if let Poll::Ready(Some((slot, executed))) = self.deliverable_later.poll_next_unpin(cx) {
            return Poll::Ready(self.settle_executed(slot, executed));
        }
        self.poll_preparation(cx)
    }

    /// Polls the preparation in flight, if any.
    pub(crate) fn poll_preparation(&mut self, cx: &mut Context<'_>) -> Poll<RunnerEvent> {
        let Some((slot, future)) = &mut self.preparing else {
            return Poll::Pending;
        };
        let Poll::Ready(prepared) = Pin::new(future).poll(cx) else {
            return Poll::Pending;
        };
        let slot = *slot;
        self.preparing = None;
        match prepared {
            Ok(ready) => {
                let key = ready.conflict_key.clone();
                self.slots[slot].ready = Some(ready);
                self.scheduler.prepared(slot, Prepared::Runnable(key));
                Poll::Ready(RunnerEvent::Prepared)
            }
            Err(immediate) => {
                self.scheduler.prepared(slot, Prepared::Settled);
                self.slots[slot].settled = true;
                Poll::Ready(RunnerEvent::Immediate { slot, immediate })
            }
        }
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
        self.scheduler.is_idle()
    }

    /// `true` when the only calls not settled are running calls whose results may be delivered later, at most
    /// `limit` of them: nothing else of the response waits for them.
    pub fn only_deliverable_later_left(&self, limit: usize) -> bool {
        !self.deliverable_later.is_empty()
            && self.deliverable_later.len() <= limit
            && self.preparing.is_none()
            && self.scheduler.unsettled() == self.deliverable_later.len()
    }

    /// Hands over the running calls whose results may be delivered later, with what their results need; the
    /// response no longer waits for them. Their tokens stay children of [`DetachedCalls::cancel`]. Their partial
    /// results are no longer shown.
    pub fn detach(&mut self) -> DetachedCalls {
        let returns = std::mem::take(&mut self.deliverable_later);
        let mut calls = Vec::new();
        for (slot, entry) in self.slots.iter_mut().enumerate() {
            if !entry.settled && entry.started_at_us.is_some() {
                entry.settled = true;
                self.scheduler.finished(slot);
                calls.push((slot, (Arc::clone(&entry.call), entry.started_at_us)));
            }
        }
        DetachedCalls {
            calls: calls.into_iter().collect(),
            returns,
            cancel: self.cancel.clone(),
        }
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

    /// Every non-empty batch has only results with `terminate = true` (contract §5.6).
    pub fn all_batches_terminated(&self) -> bool {
        let mut batches = self.scheduler.batches().peekable();
        batches.peek().is_some() && batches.all(|batch| self.slots[batch].iter().all(|slot| slot.terminate))
    }
}
