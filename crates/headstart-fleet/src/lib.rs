//! # headstart-fleet
//!
//! The worker runtime of a fleet (contract §7.5): many worker processes share one store (PostgreSQL across
//! machines, or one SQLite file on one machine) through its [`SessionQueue`]. A [`Worker`]
//!
//! - claims pending sessions and sessions whose owner's lease expired, up to its concurrency limit;
//! - renews its leases every third of the lease time, and stops a session whose lease it lost;
//! - runs each claimed session on an [`Engine`](headstart::Engine) of its own that writes through the lease's fenced handle and asks the
//!   lease, on the worker's own monotonic clock, before every call's `execute` (§7.5.4);
//! - runs recovery (§7.4) before continuing a session, so a session taken over from a dead worker continues from a
//!   valid transcript, then continues it with [`Agent::resume`](headstart::Agent::resume);
//! - finishes each session: completed, failed, or released back to the queue when the worker shuts down;
//! - when its store fails a claim or a renewal (down, unreachable), tries it again after a wait that doubles with
//!   each failure in a row, from 100 ms up to 30 s ([`Backoff`]), and says so once per wait
//!   ([`WorkerEvent::StoreUnreachable`]).
//!
//! The application plugs in its model and tools through [`SessionSetup`]:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use headstart::{Engine, EngineBuilder, Model, SessionId, Toolbox, TranscriptStore};
//! # use headstart::store::{SessionQueue, SqliteStore, SqliteOptions};
//! use headstart_fleet::{SessionSetup, Worker, WorkerConfig};
//!
//! struct MyAgent { model: Arc<dyn Model> }
//!
//! impl SessionSetup for MyAgent {
//!     fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
//!         Engine::builder(store).toolbox(Toolbox::new() /* .with(MyTool)? */)
//!     }
//!     fn model(&self, _session: &SessionId) -> Arc<dyn Model> {
//!         Arc::clone(&self.model)
//!     }
//! }
//!
//! # async fn demo(model: Arc<dyn Model>) -> Result<(), Box<dyn std::error::Error>> {
//! let queue: Arc<dyn SessionQueue> = Arc::new(SqliteStore::open("fleet.db", SqliteOptions::default())?);
//! let worker = Worker::new(queue, Arc::new(MyAgent { model }), WorkerConfig::new("worker-1"))?;
//! let stats = worker.run(headstart::CancellationToken::new()).await;
//! # let _ = stats; Ok(()) }
//! ```
#![warn(missing_docs)]

mod backoff;
mod session;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use headstart::store::{Lease, SessionEnd, SessionQueue, StoreError};
use headstart::{CancellationToken, EngineBuilder, Model, RecoveryPolicy, SessionId, TranscriptStore};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use crate::backoff::Backoff;
use crate::backoff::Failures;

/// How an application runs its sessions: the engine (tools, hooks, configuration) and the model of each claimed
/// session. The worker sets the builder's store (the lease's fenced handle, passed in) and its lease guard.
pub trait SessionSetup: Send + Sync {
    /// The engine of `session`, built on `store` (`Engine::builder(store)` plus the application's tools).
    fn engine(&self, session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder;

    /// The model that answers `session`'s requests. A session continued after a takeover resumes from its stored
    /// context, so the model should answer from the context it is given.
    fn model(&self, session: &SessionId) -> Arc<dyn Model>;
}

/// A worker's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The worker's name in the queue (the owner of its leases). Unique within the fleet, by convention: the
    /// epoch fences even two workers that share a name.
    pub id: String,
    /// The most sessions it runs at once (default 8).
    pub concurrency: usize,
    /// How long a claim or renewal holds a session (default 10 s). Renewed every third of it.
    pub lease: Duration,
    /// How often it looks for work when it has room (default 250 ms).
    pub poll_interval: Duration,
    /// What recovery does with the unfinished calls of a session it takes over (default: re-execute calls of
    /// idempotent tools, fail the others as interrupted).
    pub recovery: RecoveryPolicy,
    /// How long it waits before trying its store again after a failed claim or renewal (default: 100 ms, doubled
    /// after each failure in a row, up to 30 s).
    pub retry: Backoff,
}

impl WorkerConfig {
    /// The defaults, for worker `id`.
    pub fn new(id: impl Into<String>) -> Self {
        WorkerConfig {
            id: id.into(),
            concurrency: 8,
            lease: Duration::from_secs(10),
            poll_interval: Duration::from_millis(250),
            recovery: RecoveryPolicy::ReExecuteIdempotent,
            retry: Backoff::default(),
        }
    }
}

/// A worker configuration that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// Concurrency 0: the worker could never claim anything.
    #[error("a worker's concurrency must be at least 1")]
    NoConcurrency,
    /// A lease too short to renew (under 3 ms, a third of it would round to nothing).
    #[error("a worker's lease must be at least 3 ms (it is renewed every third of it), not {0:?}")]
    LeaseTooShort(Duration),
    /// An empty worker id.
    #[error("a worker's id must not be empty")]
    NoId,
}

/// What a worker did, as it happens (for logs; see [`Worker::observe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEvent {
    /// A session was claimed; `previous_owner` is set when it was taken over from a worker whose lease expired.
    Claimed {
        /// The session.
        session: SessionId,
        /// The claim's epoch.
        epoch: u64,
        /// The worker that held it before.
        previous_owner: Option<String>,
    },
    /// Recovery gave `calls` unfinished calls of a taken-over session their result before it continued.
    Recovered {
        /// The session.
        session: SessionId,
        /// How many calls.
        calls: usize,
    },
    /// The worker finished the session as `end` says.
    Finished {
        /// The session.
        session: SessionId,
        /// How.
        end: SessionEnd,
    },
    /// The worker lost the session (another worker holds it now, or it ended elsewhere) and stopped it.
    Lost {
        /// The session.
        session: SessionId,
        /// How the loss showed.
        reason: String,
    },
    /// A write of the session was fenced (contract §7.5.2): nothing was written.
    FencedWrite {
        /// The session.
        session: SessionId,
    },
    /// A claim or a renewal failed: the store is down, unreachable, or refused it. The worker neither claims nor
    /// renews before `retry_in` has passed, a wait that doubles with each failure in a row ([`WorkerConfig::retry`])
    /// and starts over after a success: one event per wait, however long the store stays away.
    StoreUnreachable {
        /// What failed, and why.
        message: String,
        /// How long the worker waits before it tries the store again.
        retry_in: Duration,
    },
    /// Finishing a session in the queue failed (its lease lapses and a worker claims it again).
    QueueError {
        /// What failed.
        message: String,
    },
}

impl std::fmt::Display for WorkerEvent {
    /// One line, as `headstart worker` logs it: the event's name, then the session (or what failed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerEvent::Claimed {
                session,
                epoch,
                previous_owner: Some(previous),
            } => write!(f, "claimed {session} epoch {epoch} from {previous}"),
            WorkerEvent::Claimed { session, epoch, .. } => write!(f, "claimed {session} epoch {epoch}"),
            WorkerEvent::Recovered { session, calls } => write!(f, "recovered {session} {calls} call(s)"),
            WorkerEvent::Finished { session, end } => match end {
                SessionEnd::Completed => write!(f, "finished {session} completed"),
                SessionEnd::Failed(reason) => write!(f, "finished {session} failed: {reason}"),
                SessionEnd::Released => write!(f, "finished {session} released"),
            },
            WorkerEvent::Lost { session, reason } => write!(f, "lost {session}: {reason}"),
            WorkerEvent::FencedWrite { session } => write!(f, "fenced-write {session}"),
            WorkerEvent::StoreUnreachable { message, retry_in } => write!(
                f,
                "store-unreachable cannot reach the store: {message}; retrying in {:.1} s",
                retry_in.as_secs_f64()
            ),
            WorkerEvent::QueueError { message } => write!(f, "queue-error {message}"),
        }
    }
}

/// What a worker did over its run ([`Worker::run`], [`Worker::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Sessions claimed.
    pub claimed: u64,
    /// Of which taken over from another worker.
    pub taken_over: u64,
    /// Unfinished calls recovery settled before sessions continued.
    pub recovered_calls: u64,
    /// Sessions finished as completed.
    pub completed: u64,
    /// Sessions finished as failed.
    pub failed: u64,
    /// Sessions released back to the queue (shutdown).
    pub released: u64,
    /// Sessions lost to another worker.
    pub lost: u64,
    /// Writes the store fenced.
    pub fenced_writes: u64,
}

#[derive(Default)]
struct Counters {
    claimed: AtomicU64,
    taken_over: AtomicU64,
    recovered_calls: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    fenced_writes: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> WorkerStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WorkerStats {
            claimed: get(&self.claimed),
            taken_over: get(&self.taken_over),
            recovered_calls: get(&self.recovered_calls),
            completed: get(&self.completed),
            failed: get(&self.failed),
            released: get(&self.released),
            lost: get(&self.lost),
            fenced_writes: get(&self.fenced_writes),
        }
    }
}

type Observer = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;

/// What a worker and its session tasks share.
struct Context {
    queue: Arc<dyn SessionQueue>,
    setup: Arc<dyn SessionSetup>,
    config: WorkerConfig,
    counters: Counters,
    observer: Option<Observer>,
}

impl Context {
    fn report(&self, event: WorkerEvent) {
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }
}

/// A claimed session as the worker's loop and the session's task both see it.
struct Held {
    /// The current lease: renewals replace it; the lease guard reads its `held_until`.
    lease: Mutex<Lease>,
    /// Stops the session's run: the lease was lost, or the worker shuts down.
    cancel: CancellationToken,
    /// Set before `cancel` when the lease was lost (the session then must not be finished by this worker).
    lost: AtomicBool,
    /// Set before the session is finished in the queue: a renewal that misses it then is no loss.
    finishing: AtomicBool,
}

impl Held {
    fn lease(&self) -> Lease {
        self.lease.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn may_have_expired(&self) -> bool {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .may_have_expired()
    }
}

/// A worker of a fleet. See the [crate documentation](crate).
pub struct Worker {
    context: Arc<Context>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.context.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker taking sessions from `queue` and running them as `setup` says.
    pub fn new(
        queue: Arc<dyn SessionQueue>,
        setup: Arc<dyn SessionSetup>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        if config.concurrency == 0 {
            return Err(WorkerError::NoConcurrency);
        }
        if config.lease < Duration::from_millis(3) {
            return Err(WorkerError::LeaseTooShort(config.lease));
        }
        if config.id.is_empty() {
            return Err(WorkerError::NoId);
        }
        Ok(Worker {
            context: Arc::new(Context {
                queue,
                setup,
                config,
                counters: Counters::default(),
                observer: None,
            }),
        })
    }

    /// Calls `observer` with every [`WorkerEvent`], on the worker's tasks (keep it quick). Set it before
    /// [`run`](Self::run).
    pub fn observe(mut self, observer: impl Fn(&WorkerEvent) + Send + Sync + 'static) -> Self {
        if let Some(context) = Arc::get_mut(&mut self.context) {
            context.observer = Some(Arc::new(observer));
        }
        self
    }

    /// What the worker did so far.
    pub fn stats(&self) -> WorkerStats {
        self.context.counters.snapshot()
    }

    /// Runs until `shutdown` is cancelled: claims, renews, runs sessions. On shutdown it stops claiming, cancels
    /// its sessions (their admitted calls settle as on any cancellation, contract §5.5), releases them to the
    /// queue, and returns once every session task ended.
    ///
    /// While its store fails, it neither claims nor renews before the wait of [`WorkerConfig::retry`] has passed.
    pub async fn run(&self, shutdown: CancellationToken) -> WorkerStats {
        let context = &self.context;
        let config = &context.config;
        let renew_every = config.lease / 3;
        let mut held: HashMap<SessionId, Arc<Held>> = HashMap::new();
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut task_sessions: HashMap<tokio::task::Id, SessionId> = HashMap::new();
        let mut next_renewal = Instant::now() + renew_every;
        let mut next_claim = Instant::now();
        // The store is not tried again before then (a failed claim or renewal moves it on).
        let mut retry_at = Instant::now();
        let mut failures = Failures::default();
        while !shutdown.is_cancelled() {
            if held.len() < config.concurrency && Instant::now() >= next_claim {
                next_claim = Instant::now() + config.poll_interval;
                let claimed = self.claim(&mut held, &mut tasks, &mut task_sessions).await;
                if let Some(at) = self.settle("claim", claimed, &mut failures) {
                    (retry_at, next_claim) = (at, at);
                    next_renewal = next_renewal.max(at);
                }
            }
            if Instant::now() >= next_renewal {
                next_renewal = Instant::now() + renew_every;
                if let Some(renewed) = self.renew(&held).await {
                    if let Some(at) = self.settle("renew", renewed, &mut failures) {
                        // Sooner than the next third of the lease while the waits are short: the leases may still
                        // be saved.
                        (retry_at, next_renewal) = (at, at);
                        next_claim = next_claim.max(at);
                    }
                }
            }
            let wake = if held.len() < config.concurrency {
                next_claim.min(next_renewal)
            } else {
                next_renewal
            };
            tokio::select! {
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    // A task that panicked is forgotten too: its lease lapses and another worker recovers it.
                    let id = match done {
                        Ok((id, _)) => id,
                        Err(error) => error.id(),
                    };
                    if let Some(session) = task_sessions.remove(&id) {
                        held.remove(&session);
                    }
                    // Room again: look for work now rather than at the next poll (unless the store is being
                    // left alone).
                    next_claim = Instant::now().max(retry_at);
                }
                () = tokio::time::sleep_until(wake) => {}
                () = shutdown.cancelled() => {}
            }
        }
        for entry in held.values() {
            entry.cancel.cancel();
        }
        while tasks.join_next().await.is_some() {}
        self.stats()
    }

    /// After a claim or renewal: a success starts the retry schedule over; a failure is reported with its wait,
    /// and gives the instant before which the store is not tried again.
    fn settle(&self, operation: &str, outcome: Result<(), StoreError>, failures: &mut Failures) -> Option<Instant> {
        let context = &self.context;
        match outcome {
            Ok(()) => {
                failures.succeeded();
                None
            }
            Err(error) => {
                let retry_in = failures.failed(&context.config.retry, fastrand::f64());
                context.report(WorkerEvent::StoreUnreachable {
                    message: format!("{operation}: {error}"),
                    retry_in,
                });
                Some(Instant::now() + retry_in)
            }
        }
    }

    /// Claims what there is room for and starts each claimed session's task.
    async fn claim(
        &self,
        held: &mut HashMap<SessionId, Arc<Held>>,
        tasks: &mut JoinSet<()>,
        task_sessions: &mut HashMap<tokio::task::Id, SessionId>,
    ) -> Result<(), StoreError> {
        let context = &self.context;
        let config = &context.config;
        let room = config.concurrency - held.len();
        let claims = context.queue.claim(&config.id, config.lease, room).await?;
        for claim in claims {
            let session = claim.lease.session.clone();
            context.counters.claimed.fetch_add(1, Ordering::Relaxed);
            if claim.previous_owner.is_some() {
                context.counters.taken_over.fetch_add(1, Ordering::Relaxed);
            }
            context.report(WorkerEvent::Claimed {
                session: session.clone(),
                epoch: claim.lease.epoch,
                previous_owner: claim.previous_owner.clone(),
            });
            let entry = Arc::new(Held {
                lease: Mutex::new(claim.lease),
                cancel: CancellationToken::new(),
                lost: AtomicBool::new(false),
                finishing: AtomicBool::new(false),
            });
            held.insert(session.clone(), Arc::clone(&entry));
            let task = tasks.spawn(session::drive(Arc::clone(context), entry));
            task_sessions.insert(task.id(), session);
        }
        Ok(())
    }

    /// Renews the leases of the sessions not being finished; `None` when there was none (the store was not
    /// asked). On an error the leases keep their old deadlines: the guard stops calls once they may have lapsed.
    async fn renew(&self, held: &HashMap<SessionId, Arc<Held>>) -> Option<Result<(), StoreError>> {
        let context = &self.context;
        let leases: Vec<Lease> = held
            .values()
            .filter(|entry| !entry.finishing.load(Ordering::SeqCst))
            .map(|entry| entry.lease())
            .collect();
        if leases.is_empty() {
            return None;
        }
        let renewed = match context.queue.renew(&leases, context.config.lease).await {
            Ok(renewed) => renewed,
            Err(error) => return Some(Err(error)),
        };
        let mut kept: HashMap<&SessionId, &Lease> = HashMap::new();
        for lease in &renewed {
            kept.insert(&lease.session, lease);
        }
        for (session, entry) in held {
            match kept.get(session) {
                Some(lease) => *entry.lease.lock().unwrap_or_else(PoisonError::into_inner) = (*lease).clone(),
                None if entry.finishing.load(Ordering::SeqCst) => {}
                None => session::lose(context, session, entry, "the lease could not be renewed"),
            }
        }
        Some(Ok(()))
    }
}

impl Context {
    fn count_end(&self, end: &SessionEnd) {
        let counter = match end {
            SessionEnd::Completed => &self.counters.completed,
            SessionEnd::Failed(_) => &self.counters.failed,
            SessionEnd::Released => &self.counters.released,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
