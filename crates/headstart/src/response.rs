//! The stream adapter (contract §3): one model response in, one ordered stream of agent events out.
//!
//! [`ResponseDriver`] holds the state of one response and has one small method per step — accumulate an event,
//! decide whether a sealed call triggers a prefix commit, commit, admit, settle a call, end the response. Each
//! step hands the events it produces to the run's [`Emitter`]; [`drive_response`] is the loop that feeds the
//! driver. It runs on the engine's own task and never waits for the consumer (contract §6).
//!
//! Order of effects for a prefix (contract §3.3): commit (durable) → `message_end` → admit. A failed commit admits
//! nothing: the response ends as `error` naming the store failure. Admission is a type ([`Admission`]) that only
//! a successful commit produces.
//!
//! Store writes are awaited one at a time, in the order the driver makes them, so the transcript's order is
//! deterministic; a call's result is written after the calls it unblocks have started (contract §6.5, issue 11), so
//! the only durable write between a seal and a start is the commit of the call's own fragment.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use headstart_core::accumulator::{BlockKind, Ending};
use headstart_core::{
    Accumulator, Applied, AssistantMessage, DeltaEvent, ErrorReason, Message, ModelError, StopReason, ToolCall,
    ToolResultMessage, Usage,
};
use headstart_store::{CallKey, RunEnd, RunOutcome, RunState, SessionId, StoreError};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::admission::{self, Admission};
use crate::event::{AgentEvent, Role, TurnOutcome};
use crate::lease_guard::CallGate;
use crate::queue::Emitter;
use crate::runner::{RunnerEvent, ToolRunner};
use crate::shared::Shared;
use crate::telemetry::{CallTiming, ChatSpan};

/// The message a stream gets when it stops without `done`/`error` (contract §2).
pub const MISSING_TERMINAL: &str = "stream ended without a terminal event";
/// The reason given when the caller cancels (contract §5.5).
pub const CANCELLED_BY_CALLER: &str = "cancelled by the caller";

/// What woke the driver. The rare, large variants are boxed: a step is moved a few times per model delta, and a
/// small one keeps the per-delta path cheap.
enum Step {
    /// A burst of model deltas was handled in place and the stream may have more: let the others run first.
    Burst,
    /// A model delta was accumulated and needs the store next.
    FollowUp(FollowUp),
    Written(Box<(ResultWrite, Result<u64, StoreError>)>),
    Tool(Box<RunnerEvent>),
    Cancelled,
    Model(Option<Result<DeltaEvent, ModelError>>),
}

/// What an accepted delta leads to that needs the store.
enum FollowUp {
    /// The delta broke the protocol (contract §2): end the response as `error` with this message.
    Fail(String),
    /// The response ended (`done`/`error`).
    End,
    /// A sealed call triggers a prefix commit up to this index (contract §3.1).
    Commit(usize),
}

/// A tool result waiting to be written, and what its events need.
pub(crate) struct ResultWrite {
    call: Arc<ToolCall>,
    result: ToolResultMessage,
    run: Option<RunEnd>,
    never_started: bool,
}

/// The result write in flight.
struct InFlight {
    write: ResultWrite,
    future: BoxFuture<'static, Result<u64, StoreError>>,
}

/// The state of one response.
pub(crate) struct ResponseDriver<'a> {
    shared: Arc<Shared>,
    session: SessionId,
    request: u32,
    accumulator: Accumulator,
    /// Leading content blocks already committed (contract §3).
    committed: usize,
    /// The first call at or after `committed` that is not early-eligible: no prefix can pass it.
    first_ineligible: Option<usize>,
    /// Calls opened so far in this response, and the index of the first past
    /// [`EngineConfig::max_calls_per_response`](crate::EngineConfig::max_calls_per_response): that call and every later
    /// one are refused at preparation (contract §4.6.4), so none is worth a durable commit of its own.
    calls_opened: usize,
    first_over_limit: Option<usize>,
    turn_id: Option<String>,
    fragment_open: bool,
    stream_ended: bool,
    cancel_seen: bool,
    admitted_ids: HashSet<String>,
    runner: ToolRunner,
    store_failure: Option<StoreError>,
    /// Prefix fragments committed so far.
    committed_prefixes: usize,
    /// Results to write, in the order they settled (contract §6.5: durable in completion order).
    writes: VecDeque<ResultWrite>,
    writing: Option<InFlight>,
    tasks: TaskTracker,
    out: &'a mut Emitter,
    chat: ChatSpan,
    /// When each call not yet admitted was sealed (engine clock, µs), for its span.
    sealed_at_us: HashMap<String, i64>,
    /// How long the last fragment commit took (µs), for the spans of the calls it admitted.
    last_commit_us: i64,
}

impl<'a> ResponseDriver<'a> {
    fn new(
        shared: Arc<Shared>,
        session: SessionId,
        request: u32,
        tasks: TaskTracker,
        out: &'a mut Emitter,
        chat: ChatSpan,
    ) -> Self {
        let runner = ToolRunner::new(
            &shared.config,
            Arc::clone(&shared.toolbox),
            shared.hooks.clone(),
            tasks.clone(),
            CallGate::new(session.clone(), request, shared.lease_guard.clone()),
            tracing::Span::current(),
        );
        ResponseDriver {
            shared,
            session,
            request,
            accumulator: Accumulator::new(),
            committed: 0,
            first_ineligible: None,
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
            writes: VecDeque::new(),
            writing: None,
            tasks,
            out,
            chat,
            sealed_at_us: HashMap::new(),
            last_commit_us: 0,
        }
    }

    fn finished(&self) -> bool {
        self.stream_ended && self.runner.is_idle() && self.writing.is_none() && self.writes.is_empty()
    }

    fn now_us(&self) -> i64 {
        self.shared.clock.now_us()
    }

    async fn handle(&mut self, step: Step) {
        match step {
            // A deferred yield: the task runs again once the runtime has polled what else is ready, the consumer
            // included when it is the runtime's `block_on` future (an immediate wake-up would not give it a turn).
            Step::Burst => tokio::task::yield_now().await,
            Step::FollowUp(follow_up) => self.follow_up(follow_up).await,
            Step::Written(written) => {
                let (write, written) = *written;
                self.on_written(write, written);
            }
            Step::Tool(event) => self.on_runner_event(*event).await,
            Step::Cancelled => self.on_cancel().await,
            Step::Model(None) => self.fail_and_end(ErrorReason::Error, MISSING_TERMINAL).await,
            Step::Model(Some(Err(error))) => {
                let reason = if error.is_aborted() {
                    ErrorReason::Aborted
                } else {
                    ErrorReason::Error
                };
                self.fail_and_end(reason, error.into_message()).await;
            }
            Step::Model(Some(Ok(event))) => {
                if let Some(follow_up) = self.accept_delta(event) {
                    self.follow_up(follow_up).await;
                }
            }
        }
    }

    // ---- accumulate -------------------------------------------------------------------------------------------

    /// Accumulates a delta and emits its update; returns what must follow that needs the store. Synchronous, so
    /// the common case (a delta inside an open block) costs no future at all.
    fn accept_delta(&mut self, event: DeltaEvent) -> Option<FollowUp> {
        match event {
            DeltaEvent::TextDelta { index, delta } => self.accept_piece(BlockKind::Text, index, delta),
            DeltaEvent::ThinkingDelta { index, delta } => self.accept_piece(BlockKind::Thinking, index, delta),
            DeltaEvent::ToolcallDelta { index, delta } => self.accept_piece(BlockKind::ToolCall, index, delta),
            other => self.accept_event(other),
        }
    }

    /// A `*_delta` event, by its parts: only the text moves on, into the `message_update` built in place (moving
    /// whole events from slot to slot cost more than the rest of the engine's per-delta work).
    #[inline]
    fn accept_piece(&mut self, kind: BlockKind, index: usize, delta: String) -> Option<FollowUp> {
        self.note_chunk();
        if let Err(violation) = self.accumulator.apply_piece(kind, index, &delta) {
            return Some(FollowUp::Fail(violation.to_string()));
        }
        // Re-based to the open fragment (contract §3.4).
        let index = index.saturating_sub(self.committed);
        self.open_fragment();
        self.out.push_with(|| AgentEvent::MessageUpdate {
            index,
            delta: kind.delta(index, delta),
        });
        None
    }

    /// Any other event: starts, ends, `start`, `done` and `error`.
    fn accept_event(&mut self, event: DeltaEvent) -> Option<FollowUp> {
        self.note_chunk();
        match self.accumulator.apply_ref(&event) {
            Err(violation) => Some(FollowUp::Fail(violation.to_string())),
            Ok(Applied::Started) => {
                self.open_fragment();
                None
            }
            Ok(Applied::Ended) => Some(FollowUp::End),
            Ok(applied) => {
                if let Some(index) = event.index() {
                    // The accumulator copied what it keeps: the event itself moves on, re-based (contract §3.4).
                    let index = index.saturating_sub(self.committed);
                    self.open_fragment();
                    self.out.push(AgentEvent::MessageUpdate {
                        index,
                        delta: event.with_index(index),
                    });
                }
                match applied {
                    Applied::Opened(index) => {
                        self.note_eligibility(index);
                        None
                    }
                    Applied::Sealed(index) => {
                        self.note_sealed(index);
                        self.triggers_commit(index).then_some(FollowUp::Commit(index))
                    }
                    _ => None,
                }
            }
        }
    }

    /// The model sent a chunk (the `chat` span notes the first).
    #[inline]
    fn note_chunk(&mut self) {
        let clock = &self.shared.clock;
        self.chat.chunk(|| clock.now_us());
    }

    async fn follow_up(&mut self, follow_up: FollowUp) {
        match follow_up {
            FollowUp::Fail(message) => self.fail_and_end(ErrorReason::Error, message).await,
            FollowUp::End => self.end_response().await,
            FollowUp::Commit(index) => self.commit_prefix(index).await,
        }
    }

    #[inline]
    fn open_fragment(&mut self) {
        if !self.fragment_open {
            self.fragment_open = true;
            self.out.push(AgentEvent::MessageStart { role: Role::Assistant });
        }
    }

    fn is_early_eligible(&self, index: usize) -> bool {
        if self.first_over_limit.is_some_and(|first| index >= first) {
            return false;
        }
        let (Some(name), Some(flagged)) = (
            self.accumulator.call_name(index),
            self.accumulator.call_flagged_async(index),
        ) else {
            return false;
        };
        self.shared.toolbox.is_early_eligible(name, flagged)
    }

    fn note_sealed(&mut self, index: usize) {
        if let Some(id) = self.accumulator.call_id(index) {
            let now = self.shared.clock.now_us();
            self.sealed_at_us.insert(id.to_owned(), now);
        }
    }

    fn note_eligibility(&mut self, index: usize) {
        if self.accumulator.call_name(index).is_none() {
            return;
        }
        self.calls_opened += 1;
        let limit = self.shared.config.max_calls_per_response;
        if self.first_over_limit.is_none() && limit.is_some_and(|limit| self.calls_opened > limit) {
            self.first_over_limit = Some(index);
        }
        if self.first_ineligible.is_none() && !self.is_early_eligible(index) {
            self.first_ineligible = Some(index);
        }
    }

    // ---- decide to commit (contract §3.1) -------------------------------------------------------------------------

    fn triggers_commit(&self, index: usize) -> bool {
        // After a store failure the run is ending: nothing new starts early.
        self.store_failure.is_none()
            && self.shared.config.early_execution
            && self.is_early_eligible(index)
            && self
                .accumulator
                .call_id(index)
                .is_some_and(|id| !self.admitted_ids.contains(id))
            && self.first_ineligible.is_none_or(|first| first > index)
            && !self.accumulator.any_open_in(self.committed..index)
    }

    // ---- commit -----------------------------------------------------------------------------------------------

    fn turn_id(&mut self) -> String {
        if self.turn_id.is_none() {
            let id = match self.accumulator.response_id() {
                Some(id) => id.to_owned(),
                None => (self.shared.turn_ids)(self.request),
            };
            self.turn_id = Some(id);
        }
        self.turn_id.clone().unwrap_or_default()
    }

    fn calls_in(&self, range: std::ops::Range<usize>) -> Vec<(usize, ToolCall)> {
        range
            .filter_map(|index| self.accumulator.tool_call(index).map(|call| (index, call)))
            .collect()
    }

    /// The fragment holding content `range`, as it is stored.
    fn fragment(
        &mut self,
        range: std::ops::Range<usize>,
        stop_reason: StopReason,
        usage: Usage,
        error_message: Option<String>,
    ) -> AssistantMessage {
        AssistantMessage {
            turn_id: self.turn_id(),
            stop_reason,
            content: self.accumulator.content(range),
            usage,
            model: self.accumulator.model().map(str::to_owned),
            error_message,
        }
    }

    /// Writes a fragment with the admission records of `calls` (those not admitted before, contract §4.7); on success
    /// emits its `message_end` and returns the admission. On failure returns the store's message and the
    /// fragment, for a caller that still wants to show it.
    async fn commit_fragment(
        &mut self,
        fragment: AssistantMessage,
        calls: Vec<ToolCall>,
    ) -> Result<Admission, (String, AssistantMessage)> {
        self.open_fragment();
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .filter(|call| !self.admitted_ids.contains(&call.id))
            .collect();
        self.finish_write_in_flight().await;
        self.out.flush();
        let span = tracing::info_span!("fragment_commit", request = self.request, calls = calls.len());
        let started_us = self.now_us();
        let written = admission::commit_fragment(
            self.shared.store.as_ref(),
            &self.session,
            self.request,
            &fragment,
            calls,
            self.now_us(),
        )
        .instrument(span)
        .await;
        self.last_commit_us = self.now_us() - started_us;
        match written {
            Ok((seq, admission)) => {
                self.fragment_open = false;
                self.out.push(AgentEvent::MessageEnd {
                    seq: Some(seq),
                    message: Arc::new(Message::Assistant(fragment)),
                });
                Ok(admission)
            }
            Err(error) => {
                let message = error.to_string();
                tracing::error!(request = self.request, %message, "fragment commit failed");
                self.store_failure.get_or_insert(error);
                Err((message, fragment))
            }
        }
    }

    async fn commit_prefix(&mut self, index: usize) {
        let range = self.committed..index + 1;
        let calls: Vec<ToolCall> = self.calls_in(range.clone()).into_iter().map(|(_, call)| call).collect();
        let fragment = self.fragment(range, StopReason::ToolUse, Usage::default(), None);
        match self.commit_fragment(fragment, calls).await {
            Ok(admission) => {
                self.committed = index + 1;
                self.committed_prefixes += 1;
                self.admit(admission);
                self.advance().await;
            }
            // contract §3.3: nothing of this prefix executes; its content goes into the terminal fragment.
            Err((message, _)) => self.fail_and_end(ErrorReason::Error, message).await,
        }
    }

    // ---- admit and start --------------------------------------------------------------------------------------

    /// Hands a committed fragment's calls to the scheduler as one batch, without starting any.
    fn admit(&mut self, admission: Admission) {
        if admission.is_empty() {
            return;
        }
        // A call admitted before the stream ended is early (contract §3.1).
        let early = !self.stream_ended;
        let commit_us = self.last_commit_us;
        let sealed_at_us = &mut self.sealed_at_us;
        let range = self.runner.admit(admission, |call| CallTiming {
            early,
            sealed_at_us: sealed_at_us.remove(&call.id),
            commit_us,
        });
        for slot in range {
            self.admitted_ids.insert(self.runner.slot(slot).call.id.clone());
        }
    }

    /// Starts whatever the scheduler allows now, and carries out every preparation that completes at once, so a
    /// call unblocked by the one that just settled starts at once, not one poll later.
    async fn advance(&mut self) {
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
    fn start_allowed(&mut self) {
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
    fn record_started(&self, call_id: &str, now: i64) {
        let store = Arc::clone(&self.shared.store);
        let session = self.session.clone();
        let call = CallKey::new(self.request, call_id);
        self.tasks.spawn(async move {
            if let Err(error) = store.mark_started(&session, &call, now).await {
                tracing::warn!(call_id = %call.call_id, request = call.request, %error, "could not record the start of a call");
            }
        });
    }

    // ---- settle calls -----------------------------------------------------------------------------------------

    async fn on_runner_event(&mut self, event: RunnerEvent) {
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
                let run = RunEnd {
                    state: executed.run_state(),
                    outcome: executed.outcome,
                    started_at_us: entry.started_at_us,
                };
                let result = executed.into_result(&call);
                self.runner.slot_mut(slot).terminate = result.terminate;
                // The calls this one held back start now, beside its result write (contract §6.5).
                self.advance().await;
                self.record_result(&call, result, Some(run), never_started);
            }
        }
    }

    /// The result of a call that preparation settled without executing it (contract §5.3).
    fn record_immediate(&mut self, slot: usize, immediate: crate::prepare::Immediate) {
        let call = Arc::clone(&self.runner.slot(slot).call);
        let result = ToolResultMessage::error(&call, immediate.text);
        let run = RunEnd {
            state: RunState::Skipped,
            outcome: immediate.outcome,
            started_at_us: None,
        };
        self.record_result(&call, result, Some(run), true);
    }

    /// Queues a result for writing; its events follow the write (contract §6.1). A call that never executed gets its
    /// `tool_execution_start` then, immediately before its end (contract §5.7).
    fn record_result(
        &mut self,
        call: &Arc<ToolCall>,
        result: ToolResultMessage,
        run: Option<RunEnd>,
        never_started: bool,
    ) {
        self.writes.push_back(ResultWrite {
            call: Arc::clone(call),
            result,
            run,
            never_started,
        });
    }

    /// Starts the next queued write if none is in flight. Writes are made one at a time, so the transcript's order
    /// is the order results settled, whatever the threads do.
    fn start_next_write(&mut self) {
        if self.writing.is_some() {
            return;
        }
        let Some(write) = self.writes.pop_front() else {
            return;
        };
        let store = Arc::clone(&self.shared.store);
        let session = self.session.clone();
        let result = write.result.clone();
        let run = write.run;
        let at_us = self.now_us();
        let request = self.request;
        let future = async move { store.append_tool_result(&session, request, &result, run, at_us).await }.boxed();
        self.writing = Some(InFlight { write, future });
    }

    /// Polls the write in flight (starting the next one first if none is).
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        self.start_next_write();
        let Some(in_flight) = &mut self.writing else {
            return Poll::Pending;
        };
        let Poll::Ready(written) = in_flight.future.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        let InFlight { write, .. } = self.writing.take().expect("a write is in flight");
        Poll::Ready(Step::Written(Box::new((write, written))))
    }

    /// Waits for the write in flight, if any: a fragment commit goes after it, so the engine never has two writes
    /// in flight and the transcript's order is deterministic.
    async fn finish_write_in_flight(&mut self) {
        if let Some(InFlight { write, future }) = self.writing.take() {
            self.out.flush();
            let written = future.await;
            self.on_written(write, written);
        }
    }

    /// A result write ended: emit its events.
    fn on_written(&mut self, write: ResultWrite, written: Result<u64, StoreError>) {
        let seq = match written {
            Ok(seq) => Some(seq),
            Err(error) => {
                let message = error.to_string();
                tracing::error!(call_id = %write.call.id, %message, "tool result write failed");
                self.store_failure.get_or_insert(error);
                None
            }
        };
        let ResultWrite {
            call,
            result,
            run,
            never_started,
        } = write;
        self.emit_result(&call, result, run.map(|run| run.outcome), seq, never_started);
    }

    /// Emits the events of a result (`seq` is `None` when it is not stored).
    fn emit_result(
        &mut self,
        call: &Arc<ToolCall>,
        result: ToolResultMessage,
        outcome: Option<RunOutcome>,
        seq: Option<u64>,
        never_started: bool,
    ) {
        if never_started {
            self.out.push(AgentEvent::ToolExecutionStart { call: Arc::clone(call) });
        }
        self.out.push(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            is_error: result.is_error,
            outcome,
        });
        self.out.push(AgentEvent::MessageStart { role: Role::ToolResult });
        self.out.push(AgentEvent::MessageEnd {
            seq,
            message: Arc::new(Message::ToolResult(result)),
        });
    }

    /// Settles every call that has not started with `"cancelled before start: <reason>"` (contract §5.5).
    fn abort_calls(&mut self, reason: &str) {
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

    // ---- end the response (contract §3.5) -------------------------------------------------------------------------

    async fn on_cancel(&mut self) {
        self.cancel_seen = true;
        if self.stream_ended {
            self.abort_calls(CANCELLED_BY_CALLER);
        } else {
            self.fail_and_end(ErrorReason::Aborted, CANCELLED_BY_CALLER).await;
        }
    }

    async fn fail_and_end(&mut self, reason: ErrorReason, message: impl Into<String>) {
        self.accumulator.fail(reason, message);
        self.end_response().await;
    }

    async fn end_response(&mut self) {
        if self.stream_ended {
            return;
        }
        self.stream_ended = true;
        self.chat.end(
            self.accumulator.ending(),
            self.accumulator.model(),
            self.accumulator.response_id(),
        );
        let Some(Ending {
            stop_reason,
            usage,
            error_message,
        }) = self.accumulator.ending().cloned()
        else {
            return;
        };
        let range = self.committed..self.accumulator.len();
        let calls = self.calls_in(range.clone());
        let admitted: Vec<ToolCall> = calls
            .iter()
            .filter(|(index, _)| match stop_reason {
                StopReason::ToolUse => true,
                StopReason::Stop | StopReason::Length => self.is_early_eligible(*index),
                StopReason::Error | StopReason::Aborted => false,
            })
            .map(|(_, call)| call.clone())
            .collect();
        let fragment = self.fragment(range.clone(), stop_reason, usage, error_message.clone());
        // Calls stored as admitted are the scheduler's from now on, so each gets exactly one result: it runs, or,
        // when the response failed or the store did, it is cancelled before start with the rest.
        let committed = match self.commit_fragment(fragment, admitted.clone()).await {
            Ok(admission) => {
                self.committed = range.end;
                self.admit(admission);
                true
            }
            Err((_, fragment)) => {
                // The terminal fragment could not be stored: show it anyway, marked as not durable.
                self.fragment_open = false;
                self.out.push(AgentEvent::MessageEnd {
                    seq: None,
                    message: Arc::new(Message::Assistant(fragment)),
                });
                false
            }
        };
        let abort_reason = if stop_reason.is_abnormal() {
            error_message.clone().or_else(|| Some(stop_reason.to_string()))
        } else {
            self.store_failure.as_ref().map(ToString::to_string)
        };
        match abort_reason {
            Some(reason) => self.abort_calls(&reason),
            None => self.advance().await,
        }
        let admitted_now: HashSet<&str> = if committed {
            admitted.iter().map(|call| call.id.as_str()).collect()
        } else {
            HashSet::new()
        };
        for (_, call) in calls {
            if !admitted_now.contains(call.id.as_str()) {
                let text = format!("not executed: the response ended with stop reason {stop_reason}");
                let result = ToolResultMessage::error(&call, text);
                let call = Arc::new(call);
                if committed {
                    self.record_result(&call, result, None, true);
                } else {
                    // The call is not in the transcript (its fragment could not be stored): a stored result would
                    // be an orphan that no model context can hold, so it is only shown, like the fragment.
                    self.emit_result(&call, result, None, None, true);
                }
            }
        }
    }

    fn outcome(&self) -> TurnOutcome {
        let ending = self.accumulator.ending();
        TurnOutcome {
            stop_reason: ending.map_or(StopReason::Error, |ending| ending.stop_reason),
            error: ending.and_then(|ending| ending.error_message.clone()),
            admitted: self.runner.len(),
            terminated: self.runner.all_batches_terminated(),
            store_failure: self.store_failure.as_ref().map(ToString::to_string),
            fenced: matches!(self.store_failure, Some(StoreError::Fenced(_))),
            committed_prefixes: self.committed_prefixes,
        }
    }
}

/// What the driver handles next, in the priority docs/scenario-format.md fixes for things due at the same instant: tool returns,
/// timeouts and updates; then external cancellation; then model stream events.
///
/// This is a biased `select!` over the three, written out to keep the per-delta path cheap: cancellation is first
/// checked with a flag read, and its waiter (one per response, registered once) is only polled when nothing is
/// ready, which is the only time a wake-up from it is needed.
fn poll_step<S>(
    driver: &mut ResponseDriver,
    cancel: &CancellationToken,
    cancelled: Pin<&mut WaitForCancellationFutureOwned>,
    stream: Pin<&mut S>,
    cx: &mut Context<'_>,
) -> Poll<Step>
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + ?Sized,
{
    if let Poll::Ready(written) = driver.poll_write(cx) {
        return Poll::Ready(written);
    }
    if let Poll::Ready(event) = driver.runner.poll_event(cx) {
        return Poll::Ready(Step::Tool(Box::new(event)));
    }
    if !driver.cancel_seen && cancel.is_cancelled() {
        return Poll::Ready(Step::Cancelled);
    }
    if !driver.stream_ended {
        if let Poll::Ready(item) = stream.poll_next(cx) {
            return Poll::Ready(Step::Model(item));
        }
    }
    if !driver.cancel_seen && cancelled.poll(cx).is_ready() {
        return Poll::Ready(Step::Cancelled);
    }
    Poll::Pending
}

/// Model deltas handled in place, at most, before the engine's task yields (see [`poll_burst`]). A yield costs
/// about 0.6 µs on a current-thread runtime (the deferred wake goes through the I/O driver): `bench deltas` gave
/// 93, 82, 81 and 79 ns per delta with bursts of 32, 64, 128 and 256, and no gain beyond (a burst is then about the
/// queue's flush size, 256 events, about 32 KB).
const BURST: usize = 256;

/// The next step that needs more than accumulation, in [`poll_step`]'s priority.
///
/// The hot path of a text stream: a delta that is only accumulated and forwarded ([`ResponseDriver::accept_delta`]
/// returns no follow-up) is handled here, and the deltas the model stream has ready right after it are taken in the
/// same poll, up to [`BURST`], without looking at the other sources again. Nothing is lost by that: a tool return
/// or a cancellation that lands during a burst waits at most one burst (microseconds), and in a deterministic
/// replay nothing else can be due between two deltas the stream hands over without yielding, since the simulator
/// yields before each model event. After a full burst the task yields ([`Step::Burst`]), so a consumer on the same
/// thread takes the events while they are hot, not after thousands more.
fn poll_burst<S>(
    driver: &mut ResponseDriver,
    cancel: &CancellationToken,
    cancelled: Pin<&mut WaitForCancellationFutureOwned>,
    mut stream: Pin<&mut S>,
    cx: &mut Context<'_>,
) -> Poll<Step>
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + ?Sized,
{
    let mut event = match poll_step(driver, cancel, cancelled, stream.as_mut(), cx) {
        Poll::Ready(Step::Model(Some(Ok(event)))) => event,
        Poll::Ready(step) => return Poll::Ready(step),
        Poll::Pending => {
            // Waiting for the world: what this burst produced goes to the consumer now.
            driver.out.flush();
            return Poll::Pending;
        }
    };
    let mut taken = 1;
    loop {
        if let Some(follow_up) = driver.accept_delta(event) {
            return Poll::Ready(Step::FollowUp(follow_up));
        }
        if taken == BURST {
            driver.out.flush();
            return Poll::Ready(Step::Burst);
        }
        event = match stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(next))) => next,
            Poll::Ready(item) => return Poll::Ready(Step::Model(item)),
            Poll::Pending => {
                driver.out.flush();
                return Poll::Pending;
            }
        };
        taken += 1;
    }
}

/// Which response of which session [`drive_response`] drives, and its `chat` span.
pub(crate) struct Turn {
    pub session: SessionId,
    pub request: u32,
    pub chat: ChatSpan,
}

/// Drives one response: reads `stream` to its end, commits, admits and settles every call, and hands the agent
/// events, from `TurnStart` to `TurnEnd`, to `out` (contract §3, §6). Returns how the response ended. `chat` is the
/// request's span: it ends with the stream, while calls may still run; their spans are children of the current
/// span (the run's).
pub(crate) async fn drive_response<S>(
    shared: Arc<Shared>,
    Turn { session, request, chat }: Turn,
    stream: S,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
    out: &mut Emitter,
) -> TurnOutcome
where
    S: Stream<Item = Result<DeltaEvent, ModelError>>,
{
    out.push(AgentEvent::TurnStart { request });
    let mut driver = ResponseDriver::new(shared, session, request, tasks.clone(), out, chat);
    let mut stream = pin!(stream);
    let mut cancelled = pin!(cancel.clone().cancelled_owned());
    while !driver.finished() {
        let step =
            std::future::poll_fn(|cx| poll_burst(&mut driver, cancel, cancelled.as_mut(), stream.as_mut(), cx)).await;
        driver.handle(step).await;
        // A model stream that is always ready (a fast local source) would otherwise keep this task from yielding:
        // the cooperative budget hands the thread to the consumer now and then, so events are taken while hot.
        tokio::task::consume_budget().await;
    }
    let outcome = driver.outcome();
    driver.out.push(AgentEvent::TurnEnd {
        request,
        outcome: outcome.clone(),
    });
    driver.out.flush();
    outcome
}
