//! The conformance suite (`crate::conformance`) on the SQLite store: a fresh database file per case; other
//! handles open the same file with their own connection, as other worker processes on the machine would.

use std::path::PathBuf;

use async_trait::async_trait;
use rusqlite::Connection;

use super::{SqliteOptions, SqliteStore};
use crate::conformance::Fixture;
use crate::SessionId;

struct SqliteFixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: SqliteStore,
}

impl SqliteFixture {
    /// Runs `sql` on a connection of its own (the store's connection sees the schema change at its next statement).
    fn execute(&self, sql: &str, params: impl rusqlite::Params) {
        let conn = Connection::open(&self.path).expect("test: open a second connection");
        conn.execute(sql, params).expect("test: run the fault's SQL");
    }
}

#[async_trait]
impl Fixture for SqliteFixture {
    type Store = SqliteStore;

    fn store(&self) -> SqliteStore {
        self.store.clone()
    }

    async fn connect(&self) -> SqliteStore {
        SqliteStore::open(&self.path, SqliteOptions::default()).expect("test: open another handle")
    }

    async fn fail_run_inserts(&self, on: bool) -> bool {
        if on {
            self.execute(
                "CREATE TRIGGER fail_run_inserts BEFORE INSERT ON tool_runs
                 BEGIN SELECT RAISE(ABORT, 'injected fault: tool run inserts fail'); END",
                [],
            );
        } else {
            self.execute("DROP TRIGGER fail_run_inserts", []);
        }
        true
    }

    async fn damage_body(&self, session: &SessionId, seq: u64) -> bool {
        self.execute(
            "UPDATE messages SET body = '{not json' WHERE session_id = ?1 AND seq = ?2",
            rusqlite::params![session.0, seq as i64],
        );
        true
    }
}

async fn fixture() -> Option<SqliteFixture> {
    let dir = tempfile::tempdir().expect("test: tempdir");
    let path = dir.path().join("transcript.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("test: open");
    Some(SqliteFixture { _dir: dir, path, store })
}

crate::conformance_tests!(fixture());
