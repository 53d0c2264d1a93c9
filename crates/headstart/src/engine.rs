//! [`Engine`]: the store, tools, hooks, config and clock that every response shares, and the entry point for
//! wrapping a model stream you already have.

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::Stream;
use headstart_core::{DeltaEvent, ModelError};
use headstart_store::{SessionId, TranscriptStore};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::config::EngineConfig;
use crate::event::AgentEvent;
use crate::hooks::Hooks;
use crate::response::response_events;
use crate::toolbox::Toolbox;

/// Generates a `turn_id` for a response whose provider gave no response id.
pub type TurnIdSource = Arc<dyn Fn(u32) -> String + Send + Sync>;

/// A boxed stream of agent events.
pub type EventStream = BoxStream<'static, AgentEvent>;

pub(crate) struct Shared {
    pub store: Arc<dyn TranscriptStore>,
    pub toolbox: Arc<Toolbox>,
    pub hooks: Hooks,
    pub config: EngineConfig,
    pub clock: Arc<dyn Clock>,
    pub turn_ids: TurnIdSource,
}

/// The early-execution engine. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("toolbox", &self.shared.toolbox)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts building an engine around a transcript store.
    pub fn builder(store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        EngineBuilder {
            store,
            toolbox: Toolbox::new(),
            hooks: Hooks::new(),
            config: EngineConfig::default(),
            clock: Arc::new(SystemClock),
            turn_ids: Arc::new(|_| uuid::Uuid::now_v7().to_string()),
        }
    }

    /// The transcript store.
    pub fn store(&self) -> &Arc<dyn TranscriptStore> {
        &self.shared.store
    }

    /// The tools.
    pub fn toolbox(&self) -> &Toolbox {
        &self.shared.toolbox
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    /// The clock timestamps are read from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Wraps one model response (request number `request` of `session`) and yields its agent events, from
    /// `TurnStart` to `TurnEnd` (SPEC §3, §6).
    ///
    /// As the stream is polled, each async tool call is committed with its transcript prefix the moment it is
    /// sealed, and only then starts; sync calls run as one batch after the stream ends. `TurnEnd` comes once every
    /// call has its result, and carries the [`TurnOutcome`](crate::TurnOutcome) the agent loop decides on.
    /// Cancelling `cancel` ends the response as `aborted` ("cancelled by the caller") and cancels running calls.
    pub fn wrap<S>(&self, session: &SessionId, request: u32, stream: S, cancel: CancellationToken) -> EventStream
    where
        S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static,
    {
        Box::pin(response_events(
            Arc::clone(&self.shared),
            session.clone(),
            request,
            stream,
            cancel,
        ))
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn TranscriptStore>,
    toolbox: Toolbox,
    hooks: Hooks,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    turn_ids: TurnIdSource,
}

impl EngineBuilder {
    /// The tools.
    pub fn toolbox(mut self, toolbox: Toolbox) -> Self {
        self.toolbox = toolbox;
        self
    }

    /// The hooks.
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// The configuration.
    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// The clock timestamps are read from (default: [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How `turn_id`s are made when the provider gives no response id (default: a UUIDv7). Replays use a
    /// deterministic source so their reports are byte-identical.
    pub fn turn_ids(mut self, source: TurnIdSource) -> Self {
        self.turn_ids = source;
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        Engine {
            shared: Arc::new(Shared {
                store: self.store,
                toolbox: Arc::new(self.toolbox),
                hooks: self.hooks,
                config: self.config,
                clock: self.clock,
                turn_ids: self.turn_ids,
            }),
        }
    }
}
