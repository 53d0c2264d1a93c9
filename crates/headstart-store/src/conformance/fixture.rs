//! How the suite gets at a backend.

use async_trait::async_trait;

use crate::types::SessionId;
use crate::SessionQueue;

/// How the suite gets at a backend: a fresh database per case, more handles on it, and the faults the backend can
/// produce on demand.
#[async_trait]
pub trait Fixture: Send + Sync {
    /// The store type under test.
    type Store: SessionQueue + Clone + 'static;

    /// The store under test, on a database of its own that started empty.
    fn store(&self) -> Self::Store;

    /// A new handle on the same database with its own connection(s), as another worker process would open it.
    async fn connect(&self) -> Self::Store;

    /// Makes every insert of a tool run fail inside its transaction with a database error (a fault after the
    /// fragment is written, before its runs are), or stops doing so. Returns `false` when the backend cannot.
    async fn fail_run_inserts(&self, on: bool) -> bool;

    /// Overwrites the stored body of message `seq` of `session` with text that is not JSON. Returns `false` when
    /// the backend cannot.
    async fn damage_body(&self, session: &SessionId, seq: u64) -> bool;
}
