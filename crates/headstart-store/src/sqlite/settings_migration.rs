//! Schema version 4 (a session's own settings, `SessionQueue::submit_with`) on a database version 3 wrote: its
//! sessions keep everything and have no settings, the queue goes on, and new submissions store theirs.

use headstart_core::model::{Message, UserMessage};
use rusqlite::Connection;

use super::schema::LATEST_VERSION;
use super::{sql, SqliteOptions, SqliteStore};
use crate::conformance::before_settings::{check_upgraded, OLD_PROMPT};
use crate::types::SessionId;

#[tokio::test]
async fn a_version_3_database_keeps_its_queue_and_then_stores_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("queue.db");
    {
        // The schema version 3 wrote (migrations are append-only, so its steps are the first three), with one
        // pending session as `submit` left it then.
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch(sql::CREATE_SCHEMA_VERSION).expect("schema_version");
        for step in &sql::MIGRATIONS[..3] {
            conn.execute_batch(step).expect("migrations 1 to 3");
        }
        conn.execute(sql::SET_SCHEMA_VERSION, [3]).expect("version 3");
        conn.execute(
            "INSERT INTO sessions (id, created_at_us, state) VALUES ('old', 7, 'pending')",
            [],
        )
        .expect("a pending session");
        let body = serde_json::to_string(&Message::User(UserMessage::new(OLD_PROMPT))).expect("encode");
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, at_us, body) VALUES ('old', 1, 'user', 7, ?1)",
            [body],
        )
        .expect("its prompt");
    }

    let refused = SqliteStore::open_read_only(&path).expect_err("version 3 read-only");
    assert!(refused.to_string().contains("older"), "{refused}");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open and upgrade");
    assert_eq!(LATEST_VERSION, 6);
    check_upgraded(&store, &SessionId::from("old")).await;
}
