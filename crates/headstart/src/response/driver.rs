//! [`ResponseDriver`]: the state of one response. Its steps are in the files beside this one, one file per step:
//! accumulating deltas and deciding on commits (`accumulate`), committing (`commit`), admitting, starting and settling
//! calls (`calls`), writing results (`results`), ending the response (`ending`); `drive` is the loop that feeds them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use headstart_core::{Accumulator, StopReason};
use headstart_store::{SessionId, StoreError};
use tokio_util::task::TaskTracker;

use crate::events::event::{AgentEvent, ResponseOutcome, Role};
use crate::events::outbox::Outbox;
use crate::parts::EngineParts;
use crate::response::lease_guard::CallGate;
use crate::response::runner::ToolRunner;
use crate::response::telemetry::ChatSpan;
use crate::response::write_queue::WriteQueue;

/// The state of one response.
pub(crate) struct ResponseDriver<'a> {
    pub(super) parts: Arc<EngineParts>,
    pub(super) session: SessionId,
    pub(super) request: u32,
    pub(super) accumulator: Accumulator,
    /// Leading content blocks already committed (contract §3).
    pub(super) committed: usize,
    /// The first call at or after `committed` that is not early: no prefix can pass it.
    pub(super) first_not_early: Option<usize>,
    /// Calls opened so far in this response, and the index of the first past
    /// [`EngineConfig::max_calls_per_response`](crate::EngineConfig::max_calls_per_response): that call and every later
    /// one are refused at preparation (contract §4.6.4), so none is worth a durable commit of its own.
    pub(super) calls_opened: usize,
    pub(super) first_over_limit: Option<usize>,
    pub(super) turn_id: Option<String>,
    pub(super) fragment_open: bool,
    pub(super) stream_ended: bool,
    pub(super) cancel_seen: bool,
    pub(super) admitted_ids: HashSet<String>,
    pub(super) runner: ToolRunner,
    pub(super) store_failure: Option<StoreError>,
    /// Prefix fragments committed so far.
    pub(super) committed_prefixes: usize,
    /// Results to write, in the order they settled (contract §6.5: durable in completion order).
    pub(super) results: WriteQueue,
    pub(super) tasks: TaskTracker,
    pub(super) out: &'a mut Outbox,
    pub(super) chat: ChatSpan,
    /// When each call not yet admitted was sealed (engine clock, µs), for its span.
    pub(super) sealed_at_us: HashMap<String, i64>,
    /// How long the last fragment commit took (µs), for the spans of the calls it admitted.
    pub(super) last_commit_us: i64,
    /// How many provider-async calls the response may leave running (contract §3.7.5): an agent loop delivers
    /// their results later. 0 without a loop.
    pub(super) deliver_later: usize,
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
        ResponseDriver {
            parts,
            session,
            request,
            accumulator: Accumulator::new(),
            committed: 0,
            first_not_early: None,
            calls_opened: 0,
            first_over_limit: None,
            turn_id: None,
            fragment_open: false,
            stream_ended: false,
            cancel_seen: false,
            admitted_ids: HashSet::new(),
            runner,
            store_failure: None,
            committed_prefixes: 0,
            results,
            tasks,
            out,
            chat,
            sealed_at_us: HashMap::new(),
            last_commit_us: 0,
            deliver_later,
        }
    }

    pub(super) fn finished(&self) -> bool {
        self.stream_ended && self.results.is_empty() && (self.runner.is_idle() || self.ends_before_results())
    }

    /// The response ends with calls running (contract §3.7.5): it ended normally, and only calls whose results
    /// may be delivered later are left, no more than it may leave. A cancelled or failed response waits for its
    /// running calls as usual.
    pub(super) fn ends_before_results(&self) -> bool {
        !self.cancel_seen
            && self.store_failure.is_none()
            && (self.accumulator.ending()).is_some_and(|ending| !ending.stop_reason.is_abnormal())
            && self.runner.only_deliverable_later_left(self.deliver_later)
    }

    pub(super) fn now_us(&self) -> i64 {
        self.parts.clock.now_us()
    }

    #[inline]
    pub(super) fn open_fragment(&mut self) {
        if !self.fragment_open {
            self.fragment_open = true;
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
            store_failure: self.store_failure.as_ref().map(ToString::to_string),
            fenced: matches!(self.store_failure, Some(StoreError::Fenced(_))),
            committed_prefixes: self.committed_prefixes,
            pending: Vec::new(),
        }
    }
}
