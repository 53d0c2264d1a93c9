//! [`open_location`]: a transcript store from its location as the language packages take it, a PostgreSQL
//! connection string or the path of a SQLite file. One opener serves Python's and Node's `Engine(store, ...)`,
//! `inspect(store)` and Python's `submit(store, ...)`.

use std::sync::Arc;

use headstart_store::owner::{OwnershipError, SessionLock, SessionLocks};
use headstart_store::{Durability, SessionId, SessionQueue, SqliteOptions, SqliteStore, StoreError, TranscriptStore};

use crate::session_hold::DatabaseLocks;
use crate::{is_connection_string, PgOptions, PgSessionHold, PgStore};

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write; a SQLite file is created when missing, with this durability.
    Write(Durability),
    /// Read only: a SQLite file must exist, a PostgreSQL database must hold the store already.
    Read,
}

/// Opens the store at `location`: a PostgreSQL connection string ([`is_connection_string`]), else the path of a
/// SQLite file, opened on tokio's blocking pool (so it needs a tokio runtime).
pub async fn open_location(location: &str, access: Access) -> Result<Arc<dyn TranscriptStore>, StoreError> {
    Ok(match open(location, access).await? {
        Opened::Postgres(store) => Arc::new(store),
        Opened::Sqlite(store) => Arc::new(store),
    })
}

/// [`open_location`], as a fleet's queue (to submit sessions to).
pub async fn open_queue_location(location: &str, access: Access) -> Result<Arc<dyn SessionQueue>, StoreError> {
    Ok(match open(location, access).await? {
        Opened::Postgres(store) => Arc::new(store),
        Opened::Sqlite(store) => Arc::new(store),
    })
}

/// The locks that make one process a session's only owner (contract §7.4.4) for the store at `location`: the lock
/// files beside a SQLite file ([`SessionLocks::beside`]), which `run`, `resume` and `recover` of the CLI take too,
/// or a PostgreSQL database's advisory locks ([`PgStore::hold_session`]).
pub fn session_locks(location: &str) -> SessionLocksAt {
    if is_connection_string(location) {
        SessionLocksAt::Database(DatabaseLocks::new(location))
    } else {
        SessionLocksAt::Files(SessionLocks::beside(std::path::Path::new(location)))
    }
}

/// Where a store's sessions are held one process at a time ([`session_locks`]).
#[derive(Debug, Clone)]
pub enum SessionLocksAt {
    /// Lock files beside a SQLite file.
    Files(SessionLocks),
    /// The advisory locks of a PostgreSQL database, through one pool shared by every take.
    Database(DatabaseLocks),
}

/// A process's hold on one session; dropping it releases the session.
#[derive(Debug)]
pub enum SessionHold {
    /// A lock file's.
    File(SessionLock),
    /// A database connection's.
    Database(PgSessionHold),
}

impl SessionLocksAt {
    /// Holds `session` for this process (taken at `now_us`): [`OwnershipError::Refused`], naming the holder, when
    /// another process (or a worker's lease) holds it; [`OwnershipError::Lock`] when the lock cannot be made (the
    /// folder, or the database, cannot be reached). Nothing is written to the store.
    pub async fn take(&self, session: &SessionId, now_us: i64) -> Result<SessionHold, OwnershipError> {
        match self {
            SessionLocksAt::Files(locks) => locks.take(session, false, now_us).map(SessionHold::File),
            SessionLocksAt::Database(locks) => locks.take(session, now_us).await.map(SessionHold::Database),
        }
    }
}

/// A store as opened, before it is seen through one of its traits.
enum Opened {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

async fn open(location: &str, access: Access) -> Result<Opened, StoreError> {
    if is_connection_string(location) {
        let store = match access {
            Access::Write(_) => PgStore::connect(location, PgOptions::default()).await?,
            Access::Read => PgStore::connect_read_only(location, PgOptions::default()).await?,
        };
        return Ok(Opened::Postgres(store));
    }
    let path = location.to_owned();
    let opened = tokio::task::spawn_blocking(move || match access {
        Access::Write(durability) => SqliteStore::open(
            &path,
            SqliteOptions {
                durability,
                ..SqliteOptions::default()
            },
        ),
        Access::Read => SqliteStore::open_read_only(&path),
    })
    .await
    .map_err(|error| StoreError::Open {
        path: location.to_owned(),
        message: format!("the opening task stopped: {error}").into(),
    })?;
    Ok(Opened::Sqlite(opened?))
}
