//! How an operation reaches the connection: on tokio's blocking pool (see the module documentation of `sqlite` for
//! why), reads and lone writes directly, writes under group commit through the queue of `group.rs`.

use std::sync::Arc;

use rusqlite::Connection;

use super::group::{self, WriteJob, POISONED};
use super::{checkpoint, Inner, SqliteStore, MEMORY_LABEL};
use crate::backend;
use crate::StoreError;

impl SqliteStore {
    /// Refuses writes on a store opened with [`open_read_only`](Self::open_read_only), before touching SQLite.
    pub(super) fn writable(&self, what: &str) -> Result<(), StoreError> {
        if self.inner.read_only {
            let label = self
                .inner
                .path
                .as_deref()
                .map_or_else(|| MEMORY_LABEL.to_owned(), |path| path.display().to_string());
            return Err(backend::read_only(&label, what));
        }
        Ok(())
    }

    /// Runs `op` on the connection on tokio's blocking pool (see the module documentation for why).
    pub(super) async fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let locked = move || {
            let mut guard = inner.conn.lock().map_err(|_| StoreError::Backend(POISONED.into()))?;
            let result = op(&mut guard);
            // A write made alone (group commit off) may have grown the WAL past the checkpoint threshold.
            checkpoint::if_due(&guard);
            result
        };
        if self.inner.inline {
            return locked();
        }
        let task = tokio::task::spawn_blocking(locked);
        match task.await {
            Ok(result) => result,
            Err(err) if err.is_panic() => Err(StoreError::Backend("a store operation panicked".into())),
            Err(err) => Err(StoreError::Backend(
                format!("a store operation did not run: {err}").into(),
            )),
        }
    }

    /// Performs a write: `op` runs inside an `IMMEDIATE` transaction and names itself in errors with `what`; the
    /// result comes back once the transaction is durable. With group commit on, the write joins the queue of the
    /// group-commit leader (starting one on the blocking pool if none runs, see `group.rs`); off, it runs alone
    /// through [`SqliteStore::run`].
    pub(super) async fn write<T, F>(&self, what: String, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, outcome) = WriteJob::queued(what, op);
        if self.inner.group_commit {
            match self.inner.writes.push(job) {
                Ok(false) => {}
                Ok(true) => {
                    let ticket = LeaderTicket(Some(Arc::clone(&self.inner)));
                    // Detached: the leader hands every outcome back through the jobs' channels.
                    drop(tokio::task::spawn_blocking(move || ticket.lead()));
                }
                Err(_) => return Err(StoreError::Backend("the write queue is unusable".into())),
            }
        } else {
            self.run(move |conn| {
                group::commit_alone(conn, job);
                Ok(())
            })
            .await?;
        }
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Backend("a store operation panicked".into())),
        }
    }
}

/// The right to lead the write queue, handed to a blocking task. If the task never runs (its runtime is shutting
/// down), dropping the ticket gives the role back, so that a later write starts a new leader.
struct LeaderTicket(Option<Arc<Inner>>);

impl LeaderTicket {
    fn lead(mut self) {
        if let Some(inner) = self.0.take() {
            inner.writes.lead(&inner.conn);
        }
    }
}

impl Drop for LeaderTicket {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.writes.resign();
        }
    }
}
