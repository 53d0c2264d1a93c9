//! The agent loop (SPEC §3.6): model requests until no continuation.

use std::sync::Arc;

use futures::StreamExt;
use headstart_core::{Message, Model, ModelRequest, UserMessage};
use headstart_store::SessionId;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::{Engine, EventStream};
use crate::event::{AgentEvent, AgentStop, Role};

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
    /// the store (SPEC §7.3); another request follows while the last response admitted calls and neither
    /// terminated nor failed (SPEC §3.6), up to `max_turns`. Cancelling `cancel` aborts the current response,
    /// cancels running calls and ends the run. `AgentEnd` is always the last event.
    pub fn run(&self, session: &SessionId, prompt: UserMessage, cancel: CancellationToken) -> EventStream {
        self.run_inner(session.clone(), Some(prompt), cancel)
    }

    /// Runs the loop on a session without a new prompt (after recovery, say): the model sees the stored context.
    pub fn resume(&self, session: &SessionId, cancel: CancellationToken) -> EventStream {
        self.run_inner(session.clone(), None, cancel)
    }

    fn run_inner(&self, session: SessionId, prompt: Option<UserMessage>, cancel: CancellationToken) -> EventStream {
        let engine = self.engine.clone();
        let model = Arc::clone(&self.model);
        Box::pin(async_stream::stream! {
            yield AgentEvent::AgentStart { session: session.clone() };
            let store = Arc::clone(engine.store());
            let clock = Arc::clone(engine.clock());
            if let Some(prompt) = prompt {
                yield AgentEvent::MessageStart { role: Role::User };
                match store.append_user(&session, &prompt, clock.now_us()).await {
                    Ok(seq) => yield AgentEvent::MessageEnd { seq: Some(seq), message: Arc::new(Message::User(prompt)) },
                    Err(error) => {
                        yield AgentEvent::AgentEnd { stop: AgentStop::Error(error.to_string()) };
                        return;
                    }
                }
            }
            let max_turns = engine.config().max_turns;
            let mut request = 0u32;
            let stop = loop {
                if cancel.is_cancelled() {
                    break AgentStop::Cancelled;
                }
                if request >= max_turns {
                    break AgentStop::MaxTurns;
                }
                let context = match store.model_context(&session).await {
                    Ok(context) => context,
                    Err(error) => break AgentStop::Error(error.to_string()),
                };
                let span = tracing::info_span!("request", request);
                let model_request = ModelRequest { request, context, tools: engine.toolbox().definitions() };
                let opened = tokio::select! {
                    opened = model.stream(model_request).instrument(span.clone()) => opened,
                    () = cancel.cancelled() => break AgentStop::Cancelled,
                };
                let stream = match opened {
                    Ok(stream) => stream,
                    Err(error) => break AgentStop::Error(error.message),
                };
                let mut events = engine.wrap(&session, request, stream, cancel.clone());
                let mut outcome = None;
                while let Some(event) = events.next().instrument(span.clone()).await {
                    if let AgentEvent::TurnEnd { outcome: turn, .. } = &event {
                        outcome = Some(turn.clone());
                    }
                    yield event;
                }
                request += 1;
                let Some(outcome) = outcome else {
                    break AgentStop::Error("internal error: a response ended without its turn_end".to_owned());
                };
                if let Some(failure) = outcome.store_failure {
                    break AgentStop::Error(failure);
                }
                if cancel.is_cancelled() {
                    break AgentStop::Cancelled;
                }
                if outcome.stop_reason.is_abnormal() {
                    break AgentStop::ResponseFailed;
                }
                if outcome.admitted > 0 && outcome.terminated {
                    break AgentStop::Terminated;
                }
                if !outcome.wants_continuation() {
                    break AgentStop::Completed;
                }
            };
            yield AgentEvent::AgentEnd { stop };
        })
    }
}
