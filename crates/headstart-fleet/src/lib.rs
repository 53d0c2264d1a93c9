//! # headstart-fleet
//!
//! The worker runtime of a fleet (contract §7.5): many worker processes share one store (PostgreSQL across
//! machines, or one SQLite file on one machine) through its [`SessionQueue`](headstart::store::SessionQueue). A
//! [`Worker`]
//!
//! - claims pending sessions and sessions whose owner's lease expired, up to its concurrency limit: at once when the
//!   queue's [wake-ups](headstart::store::SessionQueue::wake_ups) say a session was submitted or released
//!   (PostgreSQL's `LISTEN`; a burst of them makes one claim), and every poll interval besides, so that a wake-up
//!   that never comes costs one interval, never a session ([`WorkerEvent::WakeUpsLost`] says when they stop);
//! - renews its leases every third of the lease time, and stops a session whose lease it lost;
//! - runs each claimed session on an [`Engine`](headstart::Engine) of its own that writes through the lease's
//!   fenced handle and asks the lease, on the worker's own monotonic clock, before every call's `execute` (§7.5.4);
//! - runs recovery (§7.4) before continuing a session, so a session taken over from a dead worker continues from a
//!   valid transcript, then continues it with [`Agent::resume`](headstart::Agent::resume);
//! - finishes each session: completed, failed, or released back to the queue when the worker shuts down;
//! - when its store fails a claim or a renewal (down, unreachable), tries it again after a wait that doubles with
//!   each failure in a row, from 100 ms up to 30 s ([`Backoff`]), and says so once per wait
//!   ([`WorkerEvent::StoreUnreachable`]);
//! - claims only sessions of its [queues](WorkerConfig::queues) (default: the default queue);
//! - when a session's model request fails on the provider's side (connection refused or reset, 5xx, 429 after the
//!   model's own retries, overloaded: [`ModelErrorKind::is_transient`](headstart::ModelErrorKind::is_transient)),
//!   releases it to its queue with a backoff ([`SessionEnd::Retry`](headstart::store::SessionEnd::Retry)) instead of
//!   failing it, until [`WorkerConfig::max_attempts`]; a failure that is the session's (an invalid request) fails it
//!   at once;
//! - after [`BreakerConfig::threshold`] such outages in a row, stops claiming for a cool-down that doubles while
//!   the provider stays down, then probes with one claim ([`WorkerEvent::BreakerOpened`],
//!   [`WorkerEvent::BreakerClosed`], the `headstart_worker_claiming` gauge), so that a healthy worker on the same
//!   queue takes the work.
//!
//! It counts what it does in [`WorkerStats`] and, through the `metrics` facade, in the metrics of [`metrics`]
//! (claims, ends, leases, fenced writes, claim time, sessions running): an application's own recorder (a
//! Prometheus exporter, say) picks them up.
//!
//! The application plugs in its model and tools through [`SessionSetup`]:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use headstart::{Engine, EngineBuilder, Model, SessionId, Toolbox, TranscriptStore};
//! # use headstart::store::{SessionQueue, SessionSettings, SqliteStore, SqliteOptions};
//! use headstart_fleet::{SessionSetup, Worker, WorkerConfig};
//!
//! struct MyAgent { model: Arc<dyn Model> }
//!
//! impl SessionSetup for MyAgent {
//!     fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
//!         Engine::builder(store).toolbox(Toolbox::new() /* .with(MyTool)? */)
//!     }
//!     fn model(&self, _session: &SessionId, _settings: &SessionSettings) -> Arc<dyn Model> {
//!         Arc::clone(&self.model) // or one asking `settings.model`, with `settings.system`, when given
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

mod breaker;
mod claim_schedule;
mod config;
mod context;
mod events;
pub mod metrics;
mod provider_watch;
mod session;
mod worker;

pub use crate::breaker::BreakerConfig;
pub use crate::config::{WorkerConfig, WorkerError};
pub use crate::events::{WorkerEvent, WorkerStats};
pub use crate::worker::Worker;
pub use headstart::store::Backoff;
/// How an application runs its sessions, the engine's own trait ([`headstart::SessionSetup`]), which a Restate
/// deployment takes too.
pub use headstart::SessionSetup;
