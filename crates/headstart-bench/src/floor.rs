//! The SQLite floor: what SQLite alone needs for one durable write, measured beside the engine's own.
//!
//! A second database file in the benchmark's directory, opened with the store's pragmas (WAL, the same
//! `synchronous`, foreign keys on), one connection. A sample is one `BEGIN IMMEDIATE`, an insert of a row of a set
//! size and `COMMIT`, on tokio's blocking pool, timed around the SQLite calls only (no hand-off is counted). The
//! statements are prepared once and cached, as the store's are, so the floor pays for no SQL parsing.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headstart::{Message, SessionId, TranscriptStore};

use crate::{BenchError, Durability};

/// The size of each assistant fragment `session` stored, in write order, as the store encodes it: what a floor row
/// is sized after.
pub(crate) async fn fragment_bytes(store: &dyn TranscriptStore, session: &SessionId) -> Result<Vec<usize>, BenchError> {
    let mut sizes = Vec::new();
    for stored in store.load_log(session).await? {
        if matches!(stored.message, Message::Assistant(_)) {
            let body = serde_json::to_string(&stored.message)
                .map_err(|error| BenchError::new(format!("cannot encode a stored fragment: {error}")))?;
            sizes.push(body.len());
        }
    }
    Ok(sizes)
}

/// The floor's database.
pub(crate) struct Floor {
    conn: Arc<Mutex<rusqlite::Connection>>,
    body: Arc<String>,
}

impl Floor {
    /// Opens (creates) the floor's database at `path`.
    pub fn open(path: &Path, durability: Durability) -> Result<Self, BenchError> {
        let conn = rusqlite::Connection::open(path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(BenchError::new(format!(
                "the floor database is in journal mode {mode}, not WAL"
            )));
        }
        conn.execute_batch(match durability {
            Durability::Full => "PRAGMA synchronous = FULL",
            Durability::Normal => "PRAGMA synchronous = NORMAL",
        })?;
        conn.execute_batch("PRAGMA foreign_keys = ON")?;
        conn.execute_batch("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")?;
        Ok(Floor {
            conn: Arc::new(Mutex::new(conn)),
            body: Arc::new(String::new()),
        })
    }

    /// Samples from now on insert rows of `bytes` bytes (the size of what the store writes in the write compared).
    pub fn resize(&mut self, bytes: usize) {
        self.body = Arc::new("x".repeat(bytes));
    }

    /// One durable insert, timed around the SQLite calls.
    pub async fn sample(&self) -> Result<Duration, BenchError> {
        let conn = Arc::clone(&self.conn);
        let body = Arc::clone(&self.body);
        tokio::task::spawn_blocking(move || {
            let conn = conn
                .lock()
                .map_err(|_| BenchError::new("the floor connection is poisoned"))?;
            let started = Instant::now();
            conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            conn.prepare_cached("INSERT INTO floor (body) VALUES (?1)")?
                .execute([body.as_str()])?;
            conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(started.elapsed())
        })
        .await
        .map_err(|error| BenchError::new(format!("the floor sample did not run: {error}")))?
    }
}
