//! The store's error type.

/// Why a store operation failed. Every variant's message names the failure in words a user can act on.
///
/// Non-exhaustive: backends grow new ways to fail (the fleet store added [`StoreError::Fenced`] and
/// [`StoreError::Unavailable`]); match the variants you act on and treat the rest as failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened or created.
    #[error("cannot open transcript store {path}: {message}")]
    Open {
        /// The path that was opened.
        path: String,
        /// Why.
        message: String,
    },
    /// The database file is not a valid database, or its contents are damaged.
    #[error("transcript store is corrupt: {0}")]
    Corrupt(String),
    /// The database cannot be written (read-only file, file system or connection).
    #[error("transcript store is read-only: {0}")]
    ReadOnly(String),
    /// Another connection holds a lock that did not clear in time.
    #[error("transcript store is locked: {0}")]
    Locked(String),
    /// The storage is full (disk full, or the database's size limit).
    #[error("transcript store is full: {0}")]
    Full(String),
    /// The database was written by a newer headstart.
    #[error("transcript store has schema version {found}, newer than the supported {supported}: upgrade headstart")]
    NewerSchema {
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The session does not exist.
    #[error("no session {0}")]
    NoSession(String),
    /// A write contradicts what is stored (a duplicate call id, a result for an unknown run, …).
    #[error("transcript store rejected the write: {0}")]
    Conflict(String),
    /// A stored record could not be decoded.
    #[error("transcript store holds an unreadable record: {0}")]
    Decode(String),
    /// The write was refused because the writer no longer holds the session's lease (contract §7.5): another worker
    /// claimed it since (a higher epoch), the session ended, or a writer without a lease tried to write a session a
    /// worker holds. Nothing was written. A worker stops the session on this error; it must not retry.
    #[error("transcript store fenced the write: {0}")]
    Fenced(String),
    /// The database server cannot be reached, or dropped the connection (it stopped, restarted, or refuses new
    /// connections). Whether a write that failed this way was committed is unknown only when the connection broke
    /// during its `COMMIT`; recovery (contract §7.4) settles it either way.
    #[error("transcript store is unavailable: {0}")]
    Unavailable(String),
    /// Any other backend failure.
    #[error("transcript store failure: {0}")]
    Backend(String),
}
