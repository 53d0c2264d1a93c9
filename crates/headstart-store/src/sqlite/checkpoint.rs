//! Checkpoints off the commit path.
//!
//! By default SQLite checkpoints the WAL inside the `COMMIT` that grows it past 1,000 pages: that commit's caller
//! waits while every page is copied into the database file and synced. Any commit can be that one, a prefix commit
//! between a call's seal and its start included. The store replaces SQLite's automatic checkpoint with its own: a
//! WAL hook notes how many pages the WAL holds after each commit, and the code that made the commit checkpoints
//! (`PASSIVE`) once the writers it committed for have their replies. The WAL stays as bounded as before; the wait
//! moves to where nobody is waiting on it (the group-commit leader between groups), or, with group commit off, to
//! the end of the write that crossed the threshold.
//!
//! The page count travels in a thread-local: SQLite calls the hook inside `COMMIT`, on the thread that runs it, and
//! every commit path calls [`if_due`] on that same thread right after, while it still holds the connection.

use std::cell::Cell;
use std::os::raw::c_int;

use rusqlite::hooks::Wal;
use rusqlite::Connection;

use super::sql;

/// The WAL size, in pages, past which the store checkpoints (SQLite's own default threshold).
const CHECKPOINT_PAGES: c_int = 1000;

thread_local! {
    /// Pages in the WAL after the last commit made on this thread, until [`if_due`] takes it.
    static WAL_PAGES: Cell<c_int> = const { Cell::new(0) };
}

/// Takes over checkpointing on a writing connection (installing a WAL hook turns SQLite's automatic checkpoint off).
pub(super) fn take_over(conn: &Connection) {
    conn.wal_hook(Some(note_wal_pages));
}

fn note_wal_pages(_wal: &Wal, pages: c_int) -> rusqlite::Result<()> {
    WAL_PAGES.set(pages);
    Ok(())
}

/// Checkpoints when the commits just made on this thread left the WAL at or past [`CHECKPOINT_PAGES`]. A failed
/// checkpoint is only logged: nothing is lost, the WAL keeps the pages, and the next commit tries again.
pub(super) fn if_due(conn: &Connection) {
    if WAL_PAGES.replace(0) < CHECKPOINT_PAGES {
        return;
    }
    if let Err(err) = conn.query_row(sql::CHECKPOINT_PASSIVE, [], |_| Ok(())) {
        tracing::warn!(error = %err, "WAL checkpoint failed; the next commit retries it");
    }
}
