//! The `Session` Virtual Object: one exclusive `turn` per prompt, keyed by the session id, so Restate gives each
//! session one writer at a time.
//!
//! A turn's journal: `begin` (the session opened), `prompt` (appended), then one `step` per durable act of the
//! engine ([`Step`]), in the engine's order. A fresh attempt runs the agent loop on a task of its own and serves its
//! [`Ask`]s: each seal's entry before the store commit, each call's entry followed by the durable call to `Tools`.
//! A replayed attempt reads its steps back without a model: it issues the journaled calls again (Restate matches
//! them with the calls already made), and the first `step` whose closure runs marks where the dead attempt stopped:
//! [`Step::Lost`]. Then the calls it had issued are awaited and their results stored, every other call of the lost
//! response is recovered (contract §7.4), and the loop goes on from the stored transcript.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use headstart::core::model::UserMessage;
use headstart::layer::Around;
use headstart::store::{Layered, Lease, SessionSettings, StoreError};
use headstart::{Agent, AgentEvent, AgentStop, BodyEnd, CancellationToken, SessionId, Tool, TranscriptStore};
use restate_sdk::context::DurableFuture;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::deployment::Deployment;
use crate::flagged::Ran;
use crate::journal::{CallSpec, Step, TurnReport};
use crate::pump::{Ask, JournalLayer, RestateCalls};
use crate::tools::ToolsClient;

/// What `turn` takes: the prompt, and the session's own model and system prompt where given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    /// The user's prompt.
    pub prompt: String,
    /// The model to ask instead of the deployment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The system prompt instead of the deployment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
}

/// How many asks may wait for the invocation: the engine waits on each answer, so a handful suffices.
const ASKS: usize = 64;

/// The `Session` Virtual Object, bound to a deployment.
pub struct Session {
    pub(crate) deployment: Arc<Deployment>,
}

// A model may think for minutes without a seal; Restate's default inactivity timeout (1 min) would abort the attempt
// and lose the response. Raised here, per service, as the server allows.
#[restate_sdk::object(name = "Session", inactivity_timeout = "10m", abort_timeout = "30m")]
impl Session {
    /// Runs the agent loop on the session for one prompt, and answers how it ended.
    #[handler]
    async fn turn(&self, ctx: ObjectContext<'_>, request: Json<TurnRequest>) -> HandlerResult<Json<TurnReport>> {
        let request = request.into_inner();
        let _slot = self.deployment.turn_slot().await;
        let session = SessionId(ctx.key().to_owned());
        let deployment = Arc::clone(&self.deployment);
        let before = {
            let (deployment, session) = (Arc::clone(&deployment), session.clone());
            ctx.run(move || async move {
                crate::metrics::journaled("begin");
                deployment.open(&session).await.map(Json).map_err(retry)
            })
            .name("begin")
            .await?
            .into_inner()
        };
        // Every attempt (replays included) takes the session over in the store before it writes: an attempt Restate
        // replaced cannot write after this one began, whatever it still holds in memory.
        let owner = format!("restate {}", ctx.invocation_id());
        let held = deployment
            .store
            .take_over(&session, &owner, HELD)
            .await
            .map_err(retry)?
            .lease;
        let store = deployment.store.fenced(&held);
        let prompted = Ran::default();
        {
            let (store, session) = (Arc::clone(&store), session.clone());
            let prompt = UserMessage::new(request.prompt.clone());
            let clock = Arc::clone(&deployment.clock);
            ctx.run(prompted.wrap(move || async move {
                crate::metrics::journaled("prompt");
                append_prompt_once(store.as_ref(), &session, before, &prompt, clock.now_us())
                    .await
                    .map_err(retry)
            }))
            .name("prompt")
            .await?;
        }
        let fresh = prompted.now();
        // Restate routes a turn to a deployment itself: a session on Restate has no fleet queue.
        let settings = SessionSettings {
            system: request.system,
            model: request.model,
            queue: None,
        };
        let turn = Turn {
            ctx: &ctx,
            deployment,
            session,
            settings,
            store,
            held,
        };
        turn.run(fresh).await.map(Json)
    }
}

/// How long a turn's hold on its session lasts in the store: Restate, not an expiry, decides when an attempt is
/// gone (the next attempt takes the session over); the lease only keeps a fleet's workers sharing the store from
/// claiming the session meanwhile.
const HELD: Duration = Duration::from_secs(365 * 24 * 3600);

/// Appends `prompt` unless the session already holds more than `before` messages: an earlier attempt of the same
/// journal entry appended it (the entry's closure runs at least once; one writer per session makes the count
/// exact).
async fn append_prompt_once(
    store: &dyn TranscriptStore,
    session: &SessionId,
    before: u64,
    prompt: &UserMessage,
    at_us: i64,
) -> Result<(), StoreError> {
    let now = store.session(session).await?.map_or(0, |info| info.messages);
    if now == before {
        store.append_user(session, prompt, at_us).await?;
    }
    Ok(())
}

/// One invocation of `turn`.
struct Turn<'a, 'ctx> {
    ctx: &'a ObjectContext<'ctx>,
    deployment: Arc<Deployment>,
    session: SessionId,
    settings: SessionSettings,
    /// The store, fenced by this attempt's hold on the session.
    store: Arc<dyn TranscriptStore>,
    /// This attempt's hold on the session.
    held: Lease,
}

impl<'ctx> Turn<'_, 'ctx> {
    /// Replays the journal up to its end, then runs the agent loop fresh.
    async fn run(&self, mut fresh: bool) -> Result<TurnReport, HandlerError> {
        let mut issued = Calls::default();
        let mut recoveries = 0;
        while !fresh {
            let ran = Ran::default();
            let step = self
                .ctx
                .run(ran.wrap(|| async { Ok(Json(Step::Lost)) }))
                .name("step")
                .await?;
            match step.into_inner() {
                Step::Seal(_) => {}
                Step::Issue(spec) => {
                    let call_id = spec.call_id.clone();
                    issued.push(self.issue(spec), call_id);
                }
                Step::Lost => {
                    recoveries += 1;
                    if ran.now() {
                        self.settle(std::mem::take(&mut issued)).await?;
                        fresh = true;
                    }
                }
                Step::Done(report) => {
                    // The attempt that ended the turn may have died before its end reached the store.
                    self.finish(&report).await?;
                    return Ok(report);
                }
            }
        }
        let stop = self.serve_engine(recoveries > 0).await?;
        if let AgentStop::Fenced(message) = &stop {
            // Another attempt holds the session: this one's result is not the turn's.
            return Err(retry(message));
        }
        let report = TurnReport {
            session: self.session.0.clone(),
            stop,
            recoveries,
        };
        self.finish(&report).await?;
        self.journal(Step::Done(report.clone())).await?;
        Ok(report)
    }

    /// Ends this attempt's hold on the session as the turn ended: `completed`, or `failed` with the stop.
    async fn finish(&self, report: &TurnReport) -> Result<(), HandlerError> {
        self.deployment
            .store
            .finish(&self.held, report.session_end())
            .await
            .map_err(retry)
    }

    /// Journals `step` as the next `step` entry; returns once it is acknowledged.
    async fn journal(&self, step: Step) -> Result<(), TerminalError> {
        self.ctx
            .run(|| async move {
                crate::metrics::journaled("step");
                Ok(Json(step))
            })
            .name("step")
            .await
            .map(drop)
    }

    /// The durable call to `Tools` for `spec` (a new call, or on a replay the call already made).
    fn issue(&self, spec: CallSpec) -> ToolsCall<'ctx> {
        Box::pin(self.ctx.service_client::<ToolsClient>().run_call(Json(spec)).call())
    }

    /// Stores the results of the calls a lost attempt had issued, where the store has none yet, through the engine's
    /// `after` hooks as the live path stores them ([`headstart::Engine::settle_known`]); the rest of the lost
    /// response is recovered (contract §7.4) when the loop goes on.
    ///
    /// A call whose body's end is unknown (`Tools` answered interrupted: it may have begun in the lost attempt) is
    /// part of that rest: the recovery applies the deployment's policy to it as to any unfinished call, so that an
    /// idempotent one runs again (once, through `Tools`) under [`headstart::RecoveryPolicy::ReExecuteIdempotent`].
    async fn settle(&self, mut issued: Calls<'ctx, String>) -> Result<(), HandlerError> {
        let mut ends = Vec::new();
        while let Some((call_id, outcome)) = issued.next().await? {
            if outcome != BodyEnd::Interrupted {
                ends.push((call_id, outcome));
            }
        }
        let engine = self
            .deployment
            .setup
            .engine(&self.session, Arc::clone(&self.store))
            .build();
        engine.settle_known(&self.session, ends).await.map_err(retry)?;
        Ok(())
    }

    /// Runs the agent loop (after a recovery when `after_crash`) on a task of its own and serves its asks until it
    /// ends; returns how it stopped.
    async fn serve_engine(&self, after_crash: bool) -> Result<AgentStop, HandlerError> {
        let (asks_tx, mut asks) = mpsc::channel(ASKS);
        let agent = self.agent(&asks_tx);
        drop(asks_tx);
        let (session, policy) = (self.session.clone(), self.deployment.policy);
        // Drop = cancel: when Restate ends this attempt (its handler future dropped), the model stream and the
        // calls stop too instead of running on with nobody to answer.
        let cancel = CancellationToken::new();
        let _stop_engine = cancel.clone().drop_guard();
        let mut engine = tokio::spawn(async move {
            let events = if after_crash {
                match agent.resume_after_crash(&session, policy, cancel).await {
                    Ok(resumed) => resumed.events,
                    Err(error) => return AgentStop::Error(error.to_string()),
                }
            } else {
                Some(agent.resume(&session, cancel))
            };
            let mut stop = AgentStop::Completed;
            if let Some(mut events) = events {
                while let Some(event) = events.next().await {
                    if let AgentEvent::AgentEnd { stop: end } = event {
                        stop = end;
                    }
                }
            }
            stop
        });
        let mut calls = Calls::default();
        // When each admitted call's seal was asked for, until the call is issued (the seal→body figure).
        let mut sealed_at: HashMap<String, i64> = HashMap::new();
        let mut asking = true;
        loop {
            tokio::select! {
                biased;
                ask = asks.recv(), if asking => match ask {
                    Some(Ask::Seal(seal, reply)) => {
                        let now_us = self.deployment.clock.now_us();
                        sealed_at.extend(seal.admitted.iter().map(|call| (call.clone(), now_us)));
                        let journaled = self.journal(Step::Seal(seal)).await;
                        let _ = reply.send(journaled.is_ok());
                        journaled?;
                    }
                    Some(Ask::Call(mut spec, reply)) => {
                        spec.sealed_at_us = sealed_at.remove(&spec.call_id);
                        self.journal(Step::Issue(spec.clone())).await?;
                        crate::metrics::journaled("call");
                        let call = self.issue(spec);
                        calls.push(call, reply);
                    }
                    // The engine and its layers are gone; its task's end comes next.
                    None => asking = false,
                },
                answered = calls.next(), if !calls.is_empty() => {
                    if let Some((reply, outcome)) = answered? {
                        let _ = reply.send(outcome);
                    }
                }
                stop = &mut engine => {
                    return stop.map_err(|error| retry(format!("the agent loop's task failed: {error}")));
                }
            }
        }
    }

    /// The session's agent, its store and tools behind the pump's layers.
    fn agent(&self, asks: &mpsc::Sender<Ask>) -> Agent {
        let setup = &self.deployment.setup;
        let store: Arc<dyn TranscriptStore> = Arc::new(Layered::new(
            Arc::clone(&self.store),
            JournalLayer { asks: asks.clone() },
        ));
        let calls = asks.clone();
        let engine = setup
            .engine(&self.session, store)
            .tool_layer(move |tool: Arc<dyn Tool>| {
                Arc::new(Around::new(tool, RestateCalls { asks: calls.clone() })) as Arc<dyn Tool>
            })
            .build();
        Agent::new(engine, setup.model(&self.session, &self.settings))
    }
}

/// A durable call to `Tools`, as the SDK issues it.
type ToolsCall<'ctx> = Pin<Box<dyn DurableFuture<Output = Result<Json<BodyEnd>, TerminalError>> + Send + 'ctx>>;

/// The calls an invocation awaits, each with what its outcome goes to.
///
/// One future waits for all of them (the SDK's select over their handles): the SDK reads the invocation's input
/// for whichever future polls it, so awaiting calls separately (a `FuturesUnordered`, a `join_all`) can leave one
/// whose completion another consumed asleep for good. Dropping [`Calls::next`]'s future before it ends loses
/// nothing: the completions stay in the journal's state, and the next call of it selects again.
struct Calls<'ctx, T> {
    futures: DurableFuturesUnordered<ToolsCall<'ctx>>,
    /// By the index the futures gave each call.
    owners: HashMap<usize, T>,
}

impl<T> Default for Calls<'_, T> {
    fn default() -> Self {
        Calls {
            futures: DurableFuturesUnordered::new(),
            owners: HashMap::new(),
        }
    }
}

impl<'ctx, T> Calls<'ctx, T> {
    fn push(&mut self, call: ToolsCall<'ctx>, owner: T) {
        let index = self.futures.push(call);
        self.owners.insert(index, owner);
    }

    fn is_empty(&self) -> bool {
        self.futures.is_empty()
    }

    /// The next call to end, with its owner; `None` when none is left. `Err` when the invocation was cancelled.
    async fn next(&mut self) -> Result<Option<(T, BodyEnd)>, TerminalError> {
        let Some((index, result)) = self.futures.next().await? else {
            return Ok(None);
        };
        let outcome = match result {
            Ok(outcome) => outcome.into_inner(),
            Err(error) => BodyEnd::Returned(Err(headstart::ToolError::new(format!(
                "the call failed in Restate: {error}"
            )))),
        };
        Ok(self.owners.remove(&index).map(|owner| (owner, outcome)))
    }
}

/// A failure Restate should retry (a store that is briefly unavailable, say): the attempt ends and runs again.
pub(crate) fn retry(error: impl std::fmt::Display) -> HandlerError {
    HandlerError::from(std::io::Error::other(error.to_string()))
}
