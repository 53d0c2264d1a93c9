//! The agent loop (contract §3.6): model requests until no continuation.

use std::sync::Arc;

use headstart_core::{Message, Model, ModelRequest, UserMessage};
use headstart_store::{SessionId, StoreError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::AsyncDelivery;
use crate::context_cache::SessionContext;
use crate::engine::{Engine, Run};
use crate::events::event::{AgentEvent, AgentStop, Role};
use crate::events::outbox::Outbox;
use crate::events::queue::EventStream;
use crate::pending::PendingCalls;
use crate::recovery::{expects_answer, RecoveryPolicy, Resumed};
use crate::response::drive::{drive_response, DrivenResponse};
use crate::response::telemetry::{self, ChatSpan};

/// An agent: a model and an [`Engine`].
#[derive(Clone)]
pub struct Agent {
    engine: Engine,
    model: Arc<dyn Model>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent asking `model`, running tools through `engine`.
    pub fn new(engine: Engine, model: Arc<dyn Model>) -> Self {
        Agent { engine, model }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Appends `prompt` to `session` and runs the loop: each request's context is the canonical model view from
    /// the store (contract §7.3); another request follows while the last response admitted calls and neither
    /// terminated nor failed (contract §3.6), up to `max_requests`. Cancelling `cancel`, or dropping the returned
    /// stream, aborts the current response, cancels running calls, settles every admitted call and ends the run
    /// (contract §5.5, §6.7). `AgentEnd` is always the last event.
    ///
    /// The loop runs on a task of its own and never waits for the consumer (contract §6).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn run(&self, session: &SessionId, prompt: UserMessage, cancel: CancellationToken) -> EventStream {
        self.run_inner(session.clone(), Some(prompt), cancel)
    }

    /// Runs the loop on a session without a new prompt (after recovery, say): the model sees the stored context.
    /// Requests are numbered after the last stored one; `max_requests` counts the requests of this run. A session whose
    /// stored conversation does not wait for the model ([`expects_answer`]: it is empty, ends with a final answer, or
    /// has calls without results) ends at once as `Completed`.
    pub fn resume(&self, session: &SessionId, cancel: CancellationToken) -> EventStream {
        self.run_inner(session.clone(), None, cancel)
    }

    /// Resumes `session` after a crash (contract §7.4): gives every unfinished call its result under `policy`, then,
    /// if the stored conversation still expects the model to answer ([`expects_answer`]), continues the agent loop
    /// from the stored transcript ([`Agent::resume`]).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn resume_after_crash(
        &self,
        session: &SessionId,
        policy: RecoveryPolicy,
        cancel: CancellationToken,
    ) -> Result<Resumed, StoreError> {
        let recovered = self.engine().recover(session, policy).await?;
        let context = self.engine().model_context(session).await?;
        let events = expects_answer(&context).then(|| self.resume(session, cancel));
        Ok(Resumed { recovered, events })
    }

    fn run_inner(&self, session: SessionId, prompt: Option<UserMessage>, cancel: CancellationToken) -> EventStream {
        let Run {
            tasks,
            cancel,
            mut out,
            events,
        } = self.engine.open_run(&cancel);
        let engine = self.engine.clone();
        let model = Arc::clone(&self.model);
        let tracker = tasks.clone();
        let span = telemetry::invoke_agent(&session, model.provider(), model.model_name());
        tasks.spawn(
            async move {
                let stop = run_loop(&engine, model.as_ref(), &session, prompt, &cancel, &tracker, &mut out).await;
                out.push(AgentEvent::AgentEnd { stop });
            }
            .instrument(span),
        );
        tasks.close();
        events
    }
}

/// The loop itself, on the run's own task: it never waits for the consumer, so the next request follows as soon
/// as the last response settled (contract §6). Returns why it stopped.
async fn run_loop(
    engine: &Engine,
    model: &dyn Model,
    session: &SessionId,
    prompt: Option<UserMessage>,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
    out: &mut Outbox,
) -> AgentStop {
    out.push(AgentEvent::AgentStart {
        session: session.clone(),
    });
    // The loop keeps the session's context in memory for the run and reads only what each step wrote; the cache
    // gets it back when the run ends, for the session's next run.
    let mut context = match engine.session_context(session).await {
        Ok(context) => context,
        Err(error) => return store_stop(&error),
    };
    let mut pending = PendingCalls::new(Arc::clone(engine.store()), Arc::clone(engine.clock()), session.clone());
    let stop = run_requests(engine, model, &mut context, &mut pending, prompt, cancel, tasks, out).await;
    let stop = settle_pending(&mut pending, stop, cancel, out).await;
    engine.parts().contexts.put(context);
    stop
}

/// The run stops with `stop`: calls still pending (contract §3.7.5) finish first, or are cancelled when the run was
/// cancelled, failed (`Error`) or lost its session (`Fenced`), and their results are stored for the session's next
/// run. A result that could not be written turns the stop into an error.
async fn settle_pending(
    pending: &mut PendingCalls,
    stop: AgentStop,
    cancel: &CancellationToken,
    out: &mut Outbox,
) -> AgentStop {
    let mut failure = None;
    // A run that failed or lost its session cannot use what the calls would bring: they stop now, as on cancel.
    let stop_them = matches!(stop, AgentStop::Cancelled | AgentStop::Error(_) | AgentStop::Fenced(_));
    out.flush();
    loop {
        if stop_them || cancel.is_cancelled() {
            pending.cancel();
        }
        let delivered = tokio::select! {
            delivered = pending.next() => delivered,
            () = cancel.cancelled(), if !cancel.is_cancelled() => continue,
        };
        let Some(delivered) = delivered else { break };
        if let Some(error) = delivered.show(out) {
            failure.get_or_insert(error);
        }
        out.flush();
    }
    match (failure, &stop) {
        (
            Some(error),
            AgentStop::Completed | AgentStop::MaxRequests | AgentStop::Terminated | AgentStop::ResponseFailed,
        ) => store_stop(&error),
        _ => stop,
    }
}

/// Shows the pending calls' results written since the last look; `Err` with the stop when one could not be written.
fn show_ready(pending: &mut PendingCalls, out: &mut Outbox) -> Result<usize, AgentStop> {
    let ready = pending.ready();
    let count = ready.len();
    let mut failure = None;
    for delivered in ready {
        if let Some(error) = delivered.show(out) {
            failure.get_or_insert(error);
        }
    }
    match failure {
        Some(error) => Err(store_stop(&error)),
        None => Ok(count),
    }
}

/// Waits for what [`AsyncDelivery`] asks before a request made only to deliver pending results: the first result
/// (as ready), or every one (all pending); shows them. `Err` with the stop when the run was cancelled or a write
/// failed.
async fn wait_for_pending(
    pending: &mut PendingCalls,
    delivery: AsyncDelivery,
    cancel: &CancellationToken,
    out: &mut Outbox,
) -> Result<(), AgentStop> {
    out.flush();
    loop {
        let delivered = tokio::select! {
            delivered = pending.next() => delivered,
            () = cancel.cancelled() => return Err(AgentStop::Cancelled),
        };
        let Some(delivered) = delivered else { return Ok(()) };
        if let Some(error) = delivered.show(out) {
            return Err(store_stop(&error));
        }
        // Results ready at the same moment go in the same request.
        show_ready(pending, out)?;
        out.flush();
        if delivery == AsyncDelivery::AsReady || pending.is_empty() {
            return Ok(());
        }
    }
}

/// The requests of one run, on the session's cached `context`; calls whose results come later go to `pending`.
#[allow(clippy::too_many_arguments)]
async fn run_requests(
    engine: &Engine,
    model: &dyn Model,
    context: &mut SessionContext,
    pending: &mut PendingCalls,
    prompt: Option<UserMessage>,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
    out: &mut Outbox,
) -> AgentStop {
    let session = &context.session().clone();
    let store = engine.store();
    let clock = engine.clock();
    // The loop numbers its requests after the stored ones, so every request of a session keeps one number however
    // many runs it took (`run --session`, a resume, a session taken over by another worker, contract §7.5.3).
    let first_request = context.next_request();
    // Resuming a loop that had already ended (its owner stopped between the final answer and finishing the
    // session): there is nothing to ask the model.
    if prompt.is_none() && !expects_answer(context.context()) {
        return AgentStop::Completed;
    }
    if let Some(prompt) = prompt {
        out.push(AgentEvent::MessageStart { role: Role::User });
        out.flush();
        match store.append_user(session, &prompt, clock.now_us()).await {
            Ok(seq) => out.push(AgentEvent::MessageEnd {
                seq: Some(seq),
                message: Arc::new(Message::User(prompt)),
            }),
            Err(error) => return store_stop(&error),
        }
    }
    let max_requests = engine.config().max_requests;
    let mut continuations = engine.config().continue_after_failed_stream.unwrap_or(0);
    let mut request = first_request;
    loop {
        if cancel.is_cancelled() {
            return AgentStop::Cancelled;
        }
        if request - first_request >= max_requests {
            return AgentStop::MaxRequests;
        }
        out.flush();
        // The context and the streaming mark under one lock: a pending result is in this request or marked after it.
        let mut streaming = pending.streaming().lock().await;
        if let Err(error) = context.refresh(store.as_ref()).await {
            return store_stop(&error);
        }
        *streaming = Some(request);
        drop(streaming);
        let chat = ChatSpan::open(session, request, model.provider(), model.model_name(), clock.now_us());
        let model_request = ModelRequest {
            request,
            context: context.context().clone(),
            tools: engine.toolbox().definitions(),
        };
        let opened = tokio::select! {
            opened = model.stream(model_request).instrument(chat.span().clone()) => opened,
            () = cancel.cancelled() => return AgentStop::Cancelled,
        };
        let stream = match opened {
            Ok(stream) => stream,
            Err(error) => {
                chat.request_failed();
                return AgentStop::Error(error.into_message());
            }
        };
        let parts = Arc::clone(engine.parts());
        let response = DrivenResponse {
            session: session.clone(),
            request,
            chat,
            deliver_later: engine.config().max_pending_calls.saturating_sub(pending.len()),
        };
        let (outcome, detached) = drive_response(parts, response, stream, cancel, tasks, out).await;
        *pending.streaming().lock().await = None;
        if let Some(detached) = detached {
            pending.adopt(detached, request, tasks);
        }
        request += 1;
        // Results of earlier calls that became ready while the model streamed: written, not yet seen by the model.
        let arrived = match show_ready(pending, out) {
            Ok(arrived) => arrived,
            Err(stop) => return stop,
        };
        if let Some(failure) = outcome.store_failure {
            return if outcome.fenced {
                AgentStop::Fenced(failure)
            } else {
                AgentStop::Error(failure)
            };
        }
        if cancel.is_cancelled() {
            return AgentStop::Cancelled;
        }
        if outcome.failed_after_progress() && continuations > 0 {
            // contract §3.6.4: the committed calls ran and their results are stored; the next request's canonical
            // context carries them, so the model continues rather than redoing the work.
            continuations -= 1;
            tracing::info!(request, error = ?outcome.error, "the stream failed after committed prefixes; continuing");
            continue;
        }
        if outcome.stop_reason.is_abnormal() {
            return AgentStop::ResponseFailed;
        }
        if outcome.admitted > 0 && outcome.terminated {
            return AgentStop::Terminated;
        }
        // contract §3.7.6: a request follows at once when the model has results it has not seen (this response's, or
        // pending ones that arrived meanwhile); with only pending calls left, the loop waits for them as
        // `async_delivery` says, rather than asking the model again for nothing.
        let unseen = outcome.admitted > outcome.pending.len() || arrived > 0;
        if !unseen && !pending.is_empty() {
            if let Err(stop) = wait_for_pending(pending, engine.config().async_delivery, cancel, out).await {
                return stop;
            }
            continue;
        }
        // With the returns above, `unseen` is `wants_continuation` (a call admitted and settled) plus the pending
        // results that arrived meanwhile.
        if !unseen {
            return AgentStop::Completed;
        }
    }
}

/// How a store failure stops the loop: a fenced write (contract §7.5.2) is told apart, so a worker stops the session
/// instead of failing it.
fn store_stop(error: &StoreError) -> AgentStop {
    match error {
        StoreError::Fenced(_) => AgentStop::Fenced(error.to_string()),
        _ => AgentStop::Error(error.to_string()),
    }
}
