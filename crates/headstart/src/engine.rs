//! [`Engine`]: the store, tools, hooks, config and clock that every response shares, and the entry point for
//! wrapping a model stream you already have.

use std::sync::Arc;

use futures::Stream;
use headstart_core::{DeltaEvent, ModelContext, ModelError};
use headstart_store::{SessionId, StoreError, TranscriptStore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::body_end::BodyEnd;
use crate::clock::{Clock, SystemClock};
use crate::config::EngineConfig;
use crate::context_cache::{ContextCache, SessionContext};
use crate::events::outbox::Outbox;
use crate::events::queue::EventStream;
use crate::lease::LeaseGuard;
use crate::parts::EngineParts;
pub use crate::parts::TurnIdSource;
use crate::recovery::{recover_with_tools, RecoveredCall, RecoveryPolicy};
use crate::response::drive::{drive_response, DrivenResponse};
use crate::response::telemetry::ChatSpan;
use crate::tools::hooks::Hooks;
use crate::tools::layer::ToolLayer;
use crate::tools::toolbox::Toolbox;

/// What one run (a wrapped response, or an agent loop) is made of: its tasks, its cancellation (the caller's
/// token's child, also cancelled when the consumer drops the stream), and both ends of its event queue.
pub(crate) struct Run {
    pub tasks: TaskTracker,
    pub cancel: CancellationToken,
    pub out: Outbox,
    pub events: EventStream,
}

/// The early-execution engine. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Engine {
    pub(crate) parts: Arc<EngineParts>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("toolbox", &self.parts.toolbox)
            .field("config", &self.parts.config)
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
            lease_guard: None,
        }
    }

    /// The transcript store.
    pub fn store(&self) -> &Arc<dyn TranscriptStore> {
        &self.parts.store
    }

    /// The tools.
    pub fn toolbox(&self) -> &Toolbox {
        &self.parts.toolbox
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.parts.config
    }

    /// The clock timestamps are read from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.parts.clock
    }

    /// Creates a session in the store, stamped with the engine's clock.
    pub async fn create_session(&self) -> Result<SessionId, StoreError> {
        self.parts.store.create_session(self.parts.clock.now_us()).await
    }

    /// The request number `session`'s next response gets: one past the highest request of its stored assistant
    /// fragments, 0 for a session without any.
    ///
    /// It comes from the durable log, not from a count of this engine's requests, so it is right after a restart
    /// and when another process (a fleet worker) ran the session's previous requests. A response whose every commit
    /// failed left no fragment, and its number is given again: nothing durable refers to it. The engine reads only
    /// the messages written since it last read the session ([`EngineConfig::cached_contexts`]).
    pub async fn next_request(&self, session: &SessionId) -> Result<u32, StoreError> {
        self.read_context(session, SessionContext::next_request).await
    }

    /// The canonical model context of `session`'s next request (contract §7.3): what
    /// [`TranscriptStore::model_context`] reads, kept in memory between calls and brought up to date with the
    /// messages written since ([`EngineConfig::cached_contexts`]).
    pub async fn model_context(&self, session: &SessionId) -> Result<ModelContext, StoreError> {
        self.read_context(session, |context| context.context().clone()).await
    }

    /// What `read` takes from the cached context of `session`, brought up to date; the context goes back to the cache.
    async fn read_context<T>(
        &self,
        session: &SessionId,
        read: impl FnOnce(&SessionContext) -> T,
    ) -> Result<T, StoreError> {
        let context = self.session_context(session).await?;
        let value = read(&context);
        self.parts.contexts.put(context);
        Ok(value)
    }

    /// The cached context of `session`, taken out of the cache and brought up to date; put it back when done.
    pub(crate) async fn session_context(&self, session: &SessionId) -> Result<SessionContext, StoreError> {
        let cached = self.parts.contexts.take(session);
        SessionContext::refreshed(cached, self.parts.store.as_ref(), session).await
    }

    /// [`Engine::wrap`] with the request number the engine keeps ([`Engine::next_request`]).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn wrap_next<S>(
        &self,
        session: &SessionId,
        stream: S,
        cancel: CancellationToken,
    ) -> Result<EventStream, StoreError>
    where
        S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static,
    {
        let request = self.next_request(session).await?;
        Ok(self.wrap(session, request, stream, cancel))
    }

    /// Wraps one model response (request number `request` of `session`) and returns its agent events, from
    /// `ResponseStart` to `ResponseEnd` (contract §3, §6).
    ///
    /// The engine reads `stream` on a task of its own, at the stream's pace, whatever the consumer does: each early
    /// tool call is committed with its transcript prefix the moment it is sealed, and only then starts; sync calls
    /// run as one batch after the stream ends. `ResponseEnd` comes once every call has its durable result, and carries
    /// the [`ResponseOutcome`](crate::ResponseOutcome) the agent loop decides on. Cancelling `cancel`, or dropping the
    /// returned stream, ends the response as `aborted` ("cancelled by the caller"), cancels running calls and
    /// settles every admitted call (contract §5.5, §6.7).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the engine spawns its task on the current one).
    pub fn wrap<S>(&self, session: &SessionId, request: u32, stream: S, cancel: CancellationToken) -> EventStream
    where
        S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static,
    {
        let Run {
            tasks,
            cancel,
            mut out,
            events,
        } = self.open_run(&cancel);
        let parts = Arc::clone(&self.parts);
        let session = session.clone();
        let tracker = tasks.clone();
        // The engine's task belongs to the caller's span; the model is the caller's, so the `chat` span names none.
        let chat = ChatSpan::open(&session, request, None, None, self.parts.clock.now_us());
        tasks.spawn(
            async move {
                // Without an agent loop nobody could deliver a result later: the response waits for every call.
                let response = DrivenResponse {
                    session,
                    request,
                    chat,
                    deliver_later: 0,
                };
                drive_response(parts, response, stream, &cancel, &tracker, &mut out).await;
            }
            .instrument(tracing::Span::current()),
        );
        tasks.close();
        events
    }

    /// A new run: a task tracker (closed by the caller once its main task is spawned), a cancellation token that
    /// the caller's `cancel` and the dropping of the event stream both cancel, and the event queue.
    pub(crate) fn open_run(&self, cancel: &CancellationToken) -> Run {
        let tasks = TaskTracker::new();
        let cancel = cancel.child_token();
        let (sink, events) = EventStream::channel(cancel.clone(), tasks.clone());
        Run {
            tasks,
            cancel,
            out: Outbox::new(sink, Arc::clone(&self.parts.clock)),
            events,
        }
    }

    /// The engine's parts, for the responses and recoveries it drives.
    pub(crate) fn parts(&self) -> &Arc<EngineParts> {
        &self.parts
    }

    /// Recovers `session` with `policy` (contract §7.4), using this engine's tools and hooks for re-execution. Calls
    /// run one at a time in admission order.
    pub async fn recover(&self, session: &SessionId, policy: RecoveryPolicy) -> Result<Vec<RecoveredCall>, StoreError> {
        recover_with_tools(&self.parts, session, policy).await
    }

    /// Stores the results of unfinished calls whose bodies ran elsewhere and whose ends a crash kept (`ends`, by
    /// call id: a host such as Restate's `Tools` journaled them), through this engine's `after` hooks, as the live
    /// path stores a result; an interrupted end is recovered as [`recover_session`](crate::recover_session) does.
    /// The other unfinished calls are left for [`recover`](Self::recover). Take the session first, as for recovery.
    pub async fn settle_known(
        &self,
        session: &SessionId,
        ends: Vec<(String, BodyEnd)>,
    ) -> Result<Vec<RecoveredCall>, StoreError> {
        crate::recovery::settle_known(&self.parts, session, ends).await
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
    lease_guard: Option<Arc<dyn LeaseGuard>>,
}

impl EngineBuilder {
    /// The tools.
    pub fn toolbox(mut self, toolbox: Toolbox) -> Self {
        self.toolbox = toolbox;
        self
    }

    /// Wraps every tool of the builder's toolbox with `layer` ([`Toolbox::layer`]): behaviour around execution added
    /// by whoever builds the engine, on top of the tools an application chose. A toolbox set afterwards with
    /// [`toolbox`](Self::toolbox) replaces this one, layers included.
    pub fn tool_layer(mut self, layer: impl ToolLayer + Send + Sync + 'static) -> Self {
        self.toolbox = self.toolbox.layer(layer);
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

    /// For a worker of a fleet (contract §7.5.4): asked immediately before each call's `execute`; while it says the
    /// lease may have expired, calls do not start and settle as `cancelled before start:
    /// <`[`LEASE_MAY_HAVE_EXPIRED`](crate::LEASE_MAY_HAVE_EXPIRED)`>` (default: none, every call may start).
    pub fn lease_guard(mut self, guard: Arc<dyn LeaseGuard>) -> Self {
        self.lease_guard = Some(guard);
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        Engine {
            parts: Arc::new(EngineParts {
                store: self.store,
                toolbox: Arc::new(self.toolbox),
                hooks: self.hooks,
                clock: self.clock,
                turn_ids: self.turn_ids,
                lease_guard: self.lease_guard,
                contexts: ContextCache::new(self.config.cached_contexts),
                config: self.config,
            }),
        }
    }
}
