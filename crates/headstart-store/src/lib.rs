//! # headstart-store
//!
//! The transcript store (contract §7): a small, backend-neutral [`TranscriptStore`] trait and its embedded default,
//! [`SqliteStore`].
//!
//! The trait speaks only in transcript terms (sessions, messages with sequence numbers, tool runs); nothing about
//! connections, pragmas or row ids leaks through it, so other backends (PostgreSQL for fleets of workers) can give
//! the same guarantees behind the same methods.
//!
//! Guarantees every implementation gives:
//! - every method that writes is one transaction, and returns only after the write is durable at the configured
//!   level ([`Durability`]);
//! - [`TranscriptStore::commit_fragment`] writes an assistant fragment and the `admitted` run records of its calls
//!   together or not at all (contract §7.2): a call can only ever be admitted with a durable owner;
//! - messages are append-only with a per-session sequence number starting at 1 and without gaps.
//!
//! Who runs a session, and whether another process may take it, is the [`owner`] module's: processes on one
//! machine hold an OS lock beside a SQLite file, workers of a fleet a lease.
//!
//! Fleets of workers sharing one store (contract §7.5) use the [`SessionQueue`] on top: submitted sessions, claims
//! under leases, and writes fenced by the lease's epoch (see the [`lease`] module), and [`wake`]-ups that tell an
//! idle worker a session is waiting. Single-process use never touches it.
//!
//! The `conformance` feature exposes the module `conformance`, the test suite every backend passes (the SQLite
//! store in this crate's tests, PostgreSQL in `headstart-postgres`'s); enable it in dev-dependencies only.
#![warn(missing_docs)]

pub mod backend;
mod backoff;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod error;
pub mod layer;
pub mod lease;
mod listing;
pub mod owner;
mod queue_name;
mod sqlite;
mod transcript;
mod types;
pub mod wake;

pub use backoff::{Backoff, Failures};
pub use error::{DatabaseCode, Detail, StoreError};
pub use layer::{Layered, Write, WriteFuture, WriteLayer, Written};
pub use lease::{idempotency_key, Claim, Lease, SessionEnd, SessionQueue};
pub use listing::{SessionsPage, SessionsQuery};
pub use queue_name::{QueueName, QueueNameError};
pub use sqlite::{SqliteOptions, SqliteStore};
pub use transcript::TranscriptStore;
pub use types::{
    AdmittedCall, CallKey, Durability, NewResult, RunEnd, RunOutcome, RunState, SessionId, SessionInfo,
    SessionSettings, SessionState, StoredMessage, ToolRun, UnfinishedCall,
};
pub use wake::{WakeUp, WakeUps};
