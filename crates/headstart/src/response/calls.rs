//! Admitting, starting and settling calls: the driver's side of the [`ToolRunner`](crate::response::runner::ToolRunner).

use std::sync::Arc;
use std::task::Poll;

use headstart_core::ToolResultMessage;
use headstart_store::{CallKey, RunEnd, RunOutcome, RunState};

use crate::events::event::AgentEvent;
use crate::response::admission::Admission;
use crate::response::driver::ResponseDriver;
use crate::response::prepare::Immediate;
use crate::response::runner::RunnerEvent;

impl ResponseDriver<'_> {
    /// Hands a committed fragment's calls to the scheduler as one batch, without starting any.
    pub(super) fn admit(&mut self, admission: Admission) {
        if admission.is_empty() {
            return;
        }
        // A call admitted before the stream ended is early (contract §3.1).
        let early = !self.progress.stream_ended;
        let seal_times = &mut self.seal_times;
        let range = self
            .runner
            .admit(admission, |call| seal_times.admitted(&call.id, early));
        for slot in range {
            self.prefix.admitted(self.runner.slot(slot).call.id.clone());
        }
    }

    /// Starts whatever the scheduler allows now, and carries out every preparation that completes at once, so a
    /// call unblocked by the one that just settled starts at once, not one poll later.
    pub(super) async fn advance(&mut self) {
        loop {
            self.start_allowed();
            let prepared = std::future::poll_fn(|cx| Poll::Ready(self.runner.poll_preparation(cx))).await;
            match prepared {
                Poll::Ready(RunnerEvent::Immediate { slot, immediate }) => self.record_immediate(slot, immediate),
                Poll::Ready(_) => {}
                Poll::Pending => return,
            }
        }
    }

    /// Starts the calls the scheduler allows now.
    pub(super) fn start_allowed(&mut self) {
        let now = self.now_us();
        for slot in self.runner.advance(now) {
            let call = Arc::clone(&self.runner.slot(slot).call);
            tracing::info!(request = self.request, call_id = %call.id, tool = %call.name, "tool call started");
            self.record_started(&call.id, now);
            self.out.push(AgentEvent::ToolExecutionStart { call });
        }
    }

    /// The `started` mark is informational (recovery shows whether a call had begun); the result write carries
    /// the start time too, so this write stays off the path to `execute`. A late mark never moves a run back.
    pub(super) fn record_started(&self, call_id: &str, now: i64) {
        let store = Arc::clone(&self.parts.store);
        let session = self.session.clone();
        let call = CallKey::new(self.request, call_id);
        self.tasks.spawn(async move {
            if let Err(error) = store.mark_started(&session, &call, now).await {
                tracing::warn!(call_id = %call.call_id, request = call.request, %error, "could not record the start of a call");
            }
        });
    }

    pub(super) async fn on_runner_event(&mut self, event: RunnerEvent) {
        match event {
            RunnerEvent::Updates(updates) => {
                for (slot, update) in updates {
                    let tool_call_id = self.runner.slot(slot).call.id.clone();
                    self.out.push(AgentEvent::ToolExecutionUpdate { tool_call_id, update });
                }
            }
            RunnerEvent::Prepared => self.advance().await,
            RunnerEvent::Immediate { slot, immediate } => {
                self.advance().await;
                self.record_immediate(slot, immediate);
            }
            RunnerEvent::Executed { slot, executed } => {
                let entry = self.runner.slot(slot);
                let call = Arc::clone(&entry.call);
                // A call the lease guard refused never started (contract §7.5.4).
                let never_started = entry.started_at_us.is_none();
                let (result, run) = executed.settle(&call, entry.started_at_us);
                self.runner.slot_mut(slot).terminate = result.terminate;
                // The calls this one held back start now, beside its result write (contract §6.5).
                self.advance().await;
                self.record_result(&call, result, Some(run), never_started);
            }
        }
    }

    /// The result of a call that preparation settled without executing it (contract §5.3).
    pub(super) fn record_immediate(&mut self, slot: usize, immediate: Immediate) {
        let call = Arc::clone(&self.runner.slot(slot).call);
        let result = ToolResultMessage::error(&call, immediate.text);
        let run = RunEnd {
            state: RunState::Skipped,
            outcome: immediate.outcome,
            started_at_us: None,
        };
        self.record_result(&call, result, Some(run), true);
    }

    /// Settles every call that has not started with `"cancelled before start: <reason>"` (contract §5.5).
    pub(super) fn abort_calls(&mut self, reason: &str) {
        for slot in self.runner.abort() {
            let call = Arc::clone(&self.runner.slot(slot).call);
            let result = ToolResultMessage::error(&call, format!("cancelled before start: {reason}"));
            let run = RunEnd {
                state: RunState::Skipped,
                outcome: RunOutcome::Skipped,
                started_at_us: None,
            };
            self.record_result(&call, result, Some(run), true);
        }
    }
}
