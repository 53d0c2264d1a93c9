//! How the server notices that a store changed, for the live pages. One task per server watches the store and
//! counts changes on a [`watch`] channel; every live page waits on it and reloads its session when it moves.
//!
//! A SQLite file another process writes: its `PRAGMA data_version` (on the server's one read-only connection)
//! moves on every commit by another connection; polled a few times a second, it costs one pragma when nothing
//! changed. A store without such a counter (PostgreSQL: its transcript writes notify nothing; only the queue's
//! submissions do) is polled: the channel moves every interval and each page compares what it reloads.

use std::sync::Arc;
use std::time::Duration;

use headstart::store::SqliteStore;
use tokio::sync::watch;

/// How often SQLite's data version is read.
const DATA_VERSION_EVERY: Duration = Duration::from_millis(200);

/// How often a store without a change counter is reloaded.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Where changes come from.
#[derive(Clone)]
pub enum Changes {
    /// The data version of a SQLite file, read through this read-only handle.
    DataVersion(Arc<SqliteStore>),
    /// No counter: every interval may have changed something.
    Poll,
}

/// Starts watching (on the current tokio runtime); the task ends when the last receiver is dropped.
pub fn watch_store(changes: Changes) -> watch::Receiver<u64> {
    let (sender, receiver) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let every = match &changes {
                Changes::DataVersion(_) => DATA_VERSION_EVERY,
                Changes::Poll => POLL_EVERY,
            };
            tokio::time::sleep(every).await;
            if sender.is_closed() {
                return;
            }
            let changed = match &changes {
                // A failed read counts as a change: the pages reload and show the store's error.
                Changes::DataVersion(store) => {
                    let version = store.data_version().await.ok();
                    let changed = last.is_some() && version != last;
                    last = version;
                    changed || version.is_none()
                }
                Changes::Poll => true,
            };
            if changed {
                sender.send_modify(|count| *count += 1);
            }
        }
    });
    receiver
}
