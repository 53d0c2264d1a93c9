//! [`ResponseDriver`]: the state of one response, in the parts its steps own. Its steps are in the files beside this
//! one, one file per step: accumulating deltas (`accumulate`, with the commit decision in `prefix`), committing
//! (`commit`), admitting, starting and settling calls (`calls`), writing results (`results`), ending the response
//! (`ending`); `drive` is the loop that feeds them.

use std::sync::Arc;

use headstart_core::{Accumulator, StopReason};
use headstart_store::{SessionId, StoreError};
use tokio_util::task::TaskTracker;

use crate::events::event::{AgentEvent, ResponseOutcome, Role};
use crate::events::outbox::Outbox;
use crate::parts::EngineParts;
use crate::response::lease_guard::CallGate;
use crate::response::prefix::Prefix;
use crate::response::runner::ToolRunner;
use crate::response::telemetry::{ChatSpan, SealTimes};
use crate::response::write_queue::WriteQueue;

/// The state of one response.
pub(crate) struct ResponseDriver<'a> {
    /// The engine's parts, and which response of which session this is.
    pub(super) parts: Arc<EngineParts>,
    pub(super) session: SessionId,
    pub(super) request: u32,
    /// How many provider-async calls the response may leave running (contract §3.7.5): an agent loop delivers
    /// their results later. 0 without a loop.
    pub(super) deliver_later: usize,
    /// What the model delivered (`accumulate`).
    pub(super) accumulator: Accumulator,
    /// How far it is committed, and what moves that point (`accumulate` decides, `commit` moves it).
    pub(super) prefix: Prefix,
    /// Where the response is in its life (every step).
    pub(super) progress: Progress,
    /// The calls (`calls`).
    pub(super) runner: ToolRunner,
    /// Results to write, in the order they settled (contract §6.5: durable in completion order; `results`).
    pub(super) results: WriteQueue,
    /// Where the events go.
    pub(super) out: &'a mut Outbox,
    /// The request's span, and the calls' seal times for theirs.
    pub(super) chat: ChatSpan,
    pub(super) seal_times: SealTimes,
    /// The run's background tasks (the `started` marks).
    pub(super) tasks: TaskTracker,
}

/// Where a response is in its life: pure flags, and the decisions that read only them.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The response's turn id, once a fragment needed it.
    pub turn_id: Option<String>,
    /// A fragment's `message_start` was emitted and its `message_end` not yet.
    pub fragment_open: bool,
    /// The model stream ended (or the response was ended for it).
    pub stream_ended: bool,
    /// The caller's cancellation was handled.
    pub cancel_seen: bool,
    /// The first store failure: the run is ending, nothing new starts early.
    pub store_failure: Option<StoreError>,
}

impl Progress {
    /// Whether a response that ended with `stop_reason` may end with calls running (contract §3.7.5): it ended
    /// normally, was not cancelled, and the store did not fail. A cancelled or failed response waits for its running
    /// calls as usual.
    pub fn may_end_before_results(&self, stop_reason: Option<StopReason>) -> bool {
        !self.cancel_seen && self.store_failure.is_none() && stop_reason.is_some_and(|reason| !reason.is_abnormal())
    }
}

impl<'a> ResponseDriver<'a> {
    pub(super) fn new(
        parts: Arc<EngineParts>,
        session: SessionId,
        request: u32,
        tasks: TaskTracker,
        out: &'a mut Outbox,
        chat: ChatSpan,
        deliver_later: usize,
    ) -> Self {
        let runner = ToolRunner::new(
            &parts.config,
            Arc::clone(&parts.toolbox),
            parts.hooks.clone(),
            tasks.clone(),
            CallGate::new(session.clone(), request, parts.lease_guard.clone()),
            tracing::Span::current(),
        );
        let results = WriteQueue::new(
            Arc::clone(&parts.store),
            session.clone(),
            request,
            Arc::clone(&parts.clock),
        );
        let prefix = Prefix::new(parts.config.max_calls_per_response, parts.config.early_execution);
        ResponseDriver {
            parts,
            session,
            request,
            deliver_later,
            accumulator: Accumulator::new(),
            prefix,
            progress: Progress::default(),
            runner,
            results,
            out,
            chat,
            seal_times: SealTimes::default(),
            tasks,
        }
    }

    pub(super) fn finished(&self) -> bool {
        self.progress.stream_ended && self.results.is_empty() && (self.runner.is_idle() || self.ends_before_results())
    }

    /// The response ends with calls running (contract §3.7.5): it may ([`Progress::may_end_before_results`]), and
    /// only calls whose results may be delivered later are left, no more than it may leave.
    pub(super) fn ends_before_results(&self) -> bool {
        let stop_reason = self.accumulator.ending().map(|ending| ending.stop_reason);
        self.progress.may_end_before_results(stop_reason) && self.runner.only_deliverable_later_left(self.deliver_later)
    }

    pub(super) fn now_us(&self) -> i64 {
        self.parts.clock.now_us()
    }

    #[inline]
    pub(super) fn open_fragment(&mut self) {
        if !self.progress.fragment_open {
            self.progress.fragment_open = true;
            self.out.push(AgentEvent::MessageStart { role: Role::Assistant });
        }
    }

    /// The model sent a chunk (the `chat` span notes the first).
    #[inline]
    pub(super) fn note_chunk(&mut self) {
        let clock = &self.parts.clock;
        self.chat.chunk(|| clock.now_us());
    }

    pub(super) fn outcome(&self) -> ResponseOutcome {
        let ending = self.accumulator.ending();
        ResponseOutcome {
            stop_reason: ending.map_or(StopReason::Error, |ending| ending.stop_reason),
            error: ending.and_then(|ending| ending.error_message.clone()),
            admitted: self.runner.len(),
            terminated: self.runner.all_batches_terminated(),
            store_failure: self.progress.store_failure.as_ref().map(ToString::to_string),
            fenced: matches!(self.progress.store_failure, Some(StoreError::Fenced(_))),
            committed_prefixes: self.prefix.prefixes(),
            pending: Vec::new(),
        }
    }
}
