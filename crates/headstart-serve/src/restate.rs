//! What a Restate server knows of a session's turns, shown beside the store's record when `headstart serve
//! --restate ADMIN_URL` runs: the session page lists them, and `/api/sessions/{id}` carries them as `restate`.
//! The server reads them through [`RestateTurns`], so this crate needs no Restate client of its own.

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Value};

/// One turn of a session as the Restate server sees it (an invocation of `Session/{id}/turn`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestateTurn {
    /// The invocation id (`inv_…`).
    pub invocation: String,
    /// Restate's status: `pending`, `running`, `backing-off`, `suspended`, `completed`, …
    pub status: String,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Why the last attempt failed, when one did.
    pub last_failure: Option<String>,
    /// When the turn was submitted (RFC 3339, as the server writes it).
    pub created_at: Option<String>,
    /// The calls it issued to `Tools` that are not done and whose attempts fail: what it waits on.
    pub failing_calls: Vec<RestateCall>,
}

/// A `Tools/run_call` invocation a turn waits on, whose last attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestateCall {
    /// The invocation id (`inv_…`).
    pub invocation: String,
    /// Restate's status (`backing-off`, …).
    pub status: String,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Why the last attempt failed.
    pub last_failure: Option<String>,
}

/// Where the turns come from: a Restate server's admin API (the CLI's implementation).
pub trait RestateTurns: Send + Sync {
    /// The turns of `session`, oldest first; `Err` says why the server could not be asked.
    fn turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Vec<RestateTurn>, String>>;
}

/// The turns of a session as a page or the JSON API shows them: the list, or why it could not be read (the store's
/// record is shown either way).
pub type Turns = Result<Vec<RestateTurn>, String>;

/// The turns as the JSON API and `inspect --json --restate` carry them: the list, or `{"error": "…"}`.
pub fn turns_json(turns: &Turns) -> Value {
    match turns {
        Ok(turns) => json!(turns),
        Err(error) => json!({ "error": error }),
    }
}
