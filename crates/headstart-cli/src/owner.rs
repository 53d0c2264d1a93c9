//! Taking a session of a SQLite file for this process (`run`, `resume`, `recover`): the store's
//! [`SessionLocks`], with the refusal worded for the command line.
//!
//! The lock files are `<db>.owners/<session>.lock` beside the database; each holds the owner's pid, host and
//! start time, which a refusal names. A process killed with SIGKILL loses its locks with it, so its sessions are
//! free at once; `--force` takes a session over from a process that holds it but is known to be gone or hung.

use std::path::Path;

use headstart::store::owner::{OwnershipError, Refusal, SessionLock, SessionLocks, Take};
use headstart::{Clock, SessionId, SystemClock};

/// The hint after a refusal that `--force` can override.
const FORCE_HINT: &str = "use --force if that process is gone";

/// A refusal in words: the owner, and the `--force` hint when forcing would take the session.
pub fn refusal_text(refusal: &Refusal) -> String {
    if refusal.forcible() {
        format!("{refusal}; {FORCE_HINT}")
    } else {
        refusal.to_string()
    }
}

/// What taking a session can end with: the session is someone else's, or the lock could not be taken at all.
pub enum NotTaken {
    /// A live owner holds it.
    Refused(Refusal),
    /// The lock file could not be made or locked.
    Failed(String),
}

impl NotTaken {
    /// The message for the user.
    pub fn text(&self) -> String {
        match self {
            NotTaken::Refused(refusal) => refusal_text(refusal),
            NotTaken::Failed(message) => message.clone(),
        }
    }
}

/// Takes `session` of the SQLite file `db` for this process until the lock is dropped; `force` takes it over from
/// a live holder, which is said on standard error.
pub fn take(db: &Path, session: &SessionId, force: bool) -> Result<SessionLock, NotTaken> {
    let lock = SessionLocks::beside(db)
        .take(session, force, SystemClock.now_us())
        .map_err(|error| match error {
            OwnershipError::Refused(refusal) => NotTaken::Refused(refusal),
            other => NotTaken::Failed(other.to_string()),
        })?;
    if let Take::TakeOver(record) = lock.taken() {
        let from = record.as_ref().map_or_else(
            || "a process that had not recorded itself".to_owned(),
            ToString::to_string,
        );
        eprintln!("headstart: --force: took session {session} over from {from}");
    }
    Ok(lock)
}
