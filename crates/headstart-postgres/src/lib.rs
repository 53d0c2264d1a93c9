//! # headstart-postgres
//!
//! The transcript store on PostgreSQL ([`PgStore`]): the [`TranscriptStore`](headstart_store::TranscriptStore) of
//! contract §7 and the [`SessionQueue`](headstart_store::SessionQueue) of §7.5, for fleets of worker processes on
//! several machines sharing one database. It gives every guarantee of the SQLite store (it passes the same
//! conformance suite, `headstart_store::conformance`), plus leases and fencing across machines.
//!
//! ```no_run
//! # async fn demo() -> Result<(), headstart_store::StoreError> {
//! use std::time::Duration;
//! use headstart_postgres::{PgOptions, PgStore};
//! use headstart_core::model::UserMessage;
//! use headstart_store::{SessionQueue, TranscriptStore};
//!
//! let store = PgStore::connect("postgresql://agent@db.internal/agents", PgOptions::default()).await?;
//! store.submit(&UserMessage::new("summarise the incident"), 0).await?;
//! for claim in store.claim("worker-1", Duration::from_secs(30), 4).await? {
//!     let session = store.fenced(&claim.lease); // every write checks the lease in its own transaction
//!     let _context = session.model_context(&claim.lease.session).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! The `testing` feature adds the module `testing`: a throwaway PostgreSQL cluster for tests (enable it in
//! dev-dependencies only).
#![warn(missing_docs)]

mod certificate;
mod claims;
mod connect;
mod conninfo;
mod errors;
mod listener;
mod listing;
mod location;
pub mod metrics;
mod ops;
mod pgpass;
mod schema;
mod session_hold;
mod sql;
mod store;
#[cfg(all(unix, feature = "testing"))]
pub mod testing;
mod tls;

pub use conninfo::{is_connection_string, redact, PgEnvironment};
pub use listener::LISTENER_NAME;
pub use location::{open_location, open_queue_location, session_locks, Access, SessionHold, SessionLocksAt};
pub use schema::LATEST_VERSION as SCHEMA_VERSION;
pub use session_hold::{DatabaseLocks, PgSessionHold};
pub use store::{PgOptions, PgStore};

/// The channel on which the queue announces its changes (`LISTEN headstart_queue`), each once it is committed.
/// The payload is the session's new state and its id: `pending <id>` for a session submitted or released,
/// `completed <id>` or `failed <id>` for one finished. Workers listen for the first
/// ([`SessionQueue::wake_ups`](headstart_store::SessionQueue::wake_ups)); an application can wait on the others
/// for its session's answer.
pub const NOTIFY_CHANNEL: &str = sql::CHANNEL;
