//! The store's error type, and the database error it keeps.
//!
//! A [`StoreError`]'s variant is the class of a failure (what a caller acts on: retry a [`StoreError::Locked`],
//! stop on a [`StoreError::Fenced`], …); its [`Detail`] says in words what failed and keeps the database's own
//! error behind it. That error is the one [`std::error::Error::source`] returns: a `rusqlite::Error` from the SQLite
//! store, a `tokio_postgres::Error` from the PostgreSQL store (downcast it to reach everything the driver knows).
//! The database's code for the failure is also kept in a backend-neutral form, [`DatabaseCode`], so a caller can
//! read a SQLSTATE ([`StoreError::sqlstate`]) without depending on the driver; this crate does not depend on
//! tokio-postgres.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a store operation failed. Every variant's message names the failure in words a user can act on; the
/// database error behind it, when there is one, is the error's [`source`](Error::source) and its code is
/// [`StoreError::code`].
///
/// Non-exhaustive: backends grow new ways to fail (the fleet store added [`StoreError::Fenced`] and
/// [`StoreError::Unavailable`]); match the variants you act on and treat the rest as failures.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened or created.
    Open {
        /// The path that was opened.
        path: String,
        /// Why.
        message: Detail,
    },
    /// The database file is not a valid database, or its contents are damaged.
    Corrupt(Detail),
    /// The database cannot be written (read-only file, file system or connection).
    ReadOnly(Detail),
    /// Another connection holds a lock that did not clear in time.
    Locked(Detail),
    /// The storage is full (disk full, or the database's size limit).
    Full(Detail),
    /// The database was written by a newer headstart.
    NewerSchema {
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The session does not exist (the id asked for).
    NoSession(String),
    /// A write contradicts what is stored (a duplicate call id, a result for an unknown run, …).
    Conflict(Detail),
    /// A stored record could not be decoded.
    Decode(Detail),
    /// The write was refused because the writer no longer holds the session's lease (contract §7.5): another worker
    /// claimed it since (a higher epoch), the session ended, or a writer without a lease tried to write a session a
    /// worker holds. Nothing was written. A worker stops the session on this error; it must not retry.
    Fenced(String),
    /// The database server cannot be reached, or dropped the connection (it stopped, restarted, or refuses new
    /// connections). Whether a write that failed this way was committed is unknown only when the connection broke
    /// during its `COMMIT`; recovery (contract §7.4) settles it either way.
    Unavailable(Detail),
    /// Any other backend failure.
    Backend(Detail),
}

impl StoreError {
    /// The failure's words and database error; `None` for the variants that carry neither
    /// ([`NewerSchema`](Self::NewerSchema), [`NoSession`](Self::NoSession), [`Fenced`](Self::Fenced)).
    pub fn detail(&self) -> Option<&Detail> {
        match self {
            Self::Open { message, .. } => Some(message),
            Self::Corrupt(detail)
            | Self::ReadOnly(detail)
            | Self::Locked(detail)
            | Self::Full(detail)
            | Self::Conflict(detail)
            | Self::Decode(detail)
            | Self::Unavailable(detail)
            | Self::Backend(detail) => Some(detail),
            Self::NewerSchema { .. } | Self::NoSession(_) | Self::Fenced(_) => None,
        }
    }

    /// The database's code for the failure, when the database raised it.
    pub fn code(&self) -> Option<&DatabaseCode> {
        self.detail()?.code()
    }

    /// PostgreSQL's SQLSTATE for the failure (`"40P01"` for a deadlock, …), when PostgreSQL raised it.
    pub fn sqlstate(&self) -> Option<&str> {
        match self.code()? {
            DatabaseCode::Sqlstate(code) => Some(code),
            DatabaseCode::Sqlite(_) => None,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open { path, message } => write!(f, "cannot open transcript store {path}: {message}"),
            Self::Corrupt(detail) => write!(f, "transcript store is corrupt: {detail}"),
            Self::ReadOnly(detail) => write!(f, "transcript store is read-only: {detail}"),
            Self::Locked(detail) => write!(f, "transcript store is locked: {detail}"),
            Self::Full(detail) => write!(f, "transcript store is full: {detail}"),
            Self::NewerSchema { found, supported } => write!(
                f,
                "transcript store has schema version {found}, newer than the supported {supported}: upgrade headstart"
            ),
            Self::NoSession(session) => write!(f, "no session {session}"),
            Self::Conflict(detail) => write!(f, "transcript store rejected the write: {detail}"),
            Self::Decode(detail) => write!(f, "transcript store holds an unreadable record: {detail}"),
            Self::Fenced(message) => write!(f, "transcript store fenced the write: {message}"),
            Self::Unavailable(detail) => write!(f, "transcript store is unavailable: {detail}"),
            Self::Backend(detail) => write!(f, "transcript store failure: {detail}"),
        }
    }
}

impl Error for StoreError {
    /// The database's own error (a `rusqlite::Error`, a `tokio_postgres::Error`), when it raised the failure.
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.detail()?.database_error()
    }
}

/// What failed, in words, and the database error behind it.
///
/// It displays as its message alone: the message already says what the database reported, so an error chain
/// printed through [`Error::source`] repeats the driver's words once, not the message.
///
/// Cloning shares the database error. Two details are equal when their messages and codes are.
#[derive(Clone)]
pub struct Detail {
    message: String,
    cause: Option<Cause>,
}

/// The database error behind a [`Detail`].
#[derive(Clone)]
struct Cause {
    code: Option<DatabaseCode>,
    error: Arc<dyn Error + Send + Sync>,
}

impl Detail {
    /// A failure headstart found itself (no database error behind it).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            cause: None,
        }
    }

    /// A failure the database raised: `error` is its own error (shared, so one error can fail several writes),
    /// `code` the code it gave.
    pub fn caused_by(
        message: impl Into<String>,
        code: Option<DatabaseCode>,
        error: Arc<dyn Error + Send + Sync>,
    ) -> Self {
        Self {
            message: message.into(),
            cause: Some(Cause { code, error }),
        }
    }

    /// The same failure and database error in other words (a backend adds what it knows about the cause).
    pub fn with_message(self, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..self
        }
    }

    /// What failed, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The database's code for the failure, when the database raised it.
    pub fn code(&self) -> Option<&DatabaseCode> {
        self.cause.as_ref()?.code.as_ref()
    }

    /// The database's own error, when it raised the failure.
    pub fn database_error(&self) -> Option<&(dyn Error + 'static)> {
        let error: &(dyn Error + 'static) = self.cause.as_ref()?.error.as_ref();
        Some(error)
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Detail");
        debug.field("message", &self.message);
        if let Some(cause) = &self.cause {
            debug.field("code", &cause.code).field("source", &cause.error);
        }
        debug.finish()
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.code() == other.code()
    }
}

impl Eq for Detail {}

impl From<String> for Detail {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for Detail {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// A database's code for a failure, in a form that needs no database driver to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DatabaseCode {
    /// SQLite's extended result code (<https://sqlite.org/rescode.html>): `5` `SQLITE_BUSY`, `517`
    /// `SQLITE_BUSY_SNAPSHOT`, `11` `SQLITE_CORRUPT`, …; its low byte is the primary code.
    Sqlite(i32),
    /// PostgreSQL's SQLSTATE (<https://www.postgresql.org/docs/current/errcodes-appendix.html>): `"23505"`
    /// `unique_violation`, `"40P01"` `deadlock_detected`, …
    Sqlstate(String),
}

impl fmt::Display for DatabaseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(code) => write!(f, "SQLite result code {code}"),
            Self::Sqlstate(code) => write!(f, "SQLSTATE {code}"),
        }
    }
}
