//! Schema version 3 (call ids unique per response, contract §7.2.2) on a database the previous schema wrote: the
//! tables are rebuilt, nothing is lost, results of admitted calls get their request, and the foreign keys still
//! hold.

use headstart_core::model::Message;
use rusqlite::{params, Connection};

use super::{sql, SqliteOptions, SqliteStore};
use crate::backend::encode;
use crate::conformance::before_call_keys::{OldSession, OLD_RUNS};

/// Inserts message `seq` of session `old` as the version-2 store wrote it (results had no request).
fn insert(conn: &Connection, seq: i64, request: Option<i64>, message: &Message) {
    let turn_id = match message {
        Message::Assistant(fragment) => Some(fragment.turn_id.clone()),
        _ => None,
    };
    conn.execute(
        "INSERT INTO messages (session_id, seq, role, request, turn_id, at_us, body)
         VALUES ('old', ?1, ?2, ?3, ?4, ?1, ?5)",
        params![
            seq,
            message.role(),
            request,
            turn_id,
            encode(message, "test").expect("encode")
        ],
    )
    .expect("insert a message");
}

#[tokio::test]
async fn a_version_2_database_reads_back_and_then_takes_repeated_call_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("transcript.db");
    let old = OldSession::default();
    {
        // The schema version 2 wrote (migrations are append-only, so its steps are the first two).
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch(sql::CREATE_SCHEMA_VERSION).expect("schema_version");
        conn.execute_batch(sql::MIGRATIONS[0]).expect("migration 1");
        conn.execute_batch(sql::MIGRATIONS[1]).expect("migration 2");
        conn.execute(sql::SET_SCHEMA_VERSION, [2]).expect("version 2");
        conn.execute("INSERT INTO sessions (id, created_at_us) VALUES ('old', 0)", [])
            .expect("session");
        for (seq, request, message) in &old.messages() {
            insert(&conn, *seq, *request, message);
        }
        conn.execute_batch(&format!(
            "INSERT INTO tool_runs (session_id, call_id, admission, tool_name, request, fragment_seq, state, outcome,
                 admitted_at_us, started_at_us, ended_at_us, result_seq)
             VALUES {OLD_RUNS}"
        ))
        .expect("runs");
    }

    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open and upgrade");
    old.check_upgraded(&store).await;

    // The rebuilt tables keep their foreign keys, pointing at the renamed `messages`.
    let conn = Connection::open(&path).expect("raw open");
    conn.execute_batch(sql::ENABLE_FOREIGN_KEYS).expect("foreign keys");
    let runs_sql: String = conn
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'tool_runs'", [], |row| {
            row.get(0)
        })
        .expect("tool_runs' schema");
    assert!(!runs_sql.contains("messages_v3"), "{runs_sql}");
    let orphan = conn.execute(
        "INSERT INTO tool_runs (session_id, call_id, admission, tool_name, request, fragment_seq, state,
             admitted_at_us)
         VALUES ('old', 'x', 99, 'lookup', 5, 999, 'admitted', 8)",
        [],
    );
    assert!(orphan.is_err(), "a run whose fragment does not exist was stored");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .expect("tables");
    assert_eq!(tables, ["messages", "schema_version", "sessions", "tool_runs"]);
}
