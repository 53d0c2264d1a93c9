//! Schema version 3 (call ids unique per response, contract §7.2.2) on a database the previous schema wrote: the
//! tables are rebuilt, nothing is lost, results of admitted calls get their request, and the foreign keys still
//! hold.

use headstart_core::model::{Message, StopReason, ToolResultMessage, Usage, UserMessage};
use rusqlite::{params, Connection};

use super::schema::LATEST_VERSION;
use super::{sql, SqliteOptions, SqliteStore};
use crate::backend::encode;
use crate::conformance::data::{admit, call, finished, fragment, prefix, result};
use crate::types::{CallKey, RunState, SessionId};
use crate::TranscriptStore;

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
    let (a, b, d) = (call("a", "lookup"), call("b", "lookup"), call("d", "lookup"));
    let first = prefix("r0", "checking", &[a.clone(), b.clone(), d.clone()]);
    let second = fragment("r1", StopReason::Stop, "done", &[], Usage::default());
    {
        // The schema version 2 wrote (migrations are append-only, so its steps are the first two), holding: the
        // prompt, a response with a (finished), b (started when the process stopped) and d (never admitted, its
        // "not executed" result), and a second response.
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch(sql::CREATE_SCHEMA_VERSION).expect("schema_version");
        conn.execute_batch(sql::MIGRATIONS[0]).expect("migration 1");
        conn.execute_batch(sql::MIGRATIONS[1]).expect("migration 2");
        conn.execute(sql::SET_SCHEMA_VERSION, [2]).expect("version 2");
        conn.execute("INSERT INTO sessions (id, created_at_us) VALUES ('old', 0)", [])
            .expect("session");
        insert(&conn, 1, None, &Message::User(UserMessage::new("go")));
        insert(&conn, 2, Some(0), &Message::Assistant(first.clone()));
        insert(&conn, 3, None, &Message::ToolResult(result(&a, "A")));
        insert(
            &conn,
            4,
            None,
            &Message::ToolResult(ToolResultMessage::error(&d, "not executed")),
        );
        insert(&conn, 5, Some(1), &Message::Assistant(second.clone()));
        conn.execute(
            "INSERT INTO tool_runs (session_id, call_id, admission, tool_name, request, fragment_seq, state, outcome,
                 admitted_at_us, started_at_us, ended_at_us, result_seq)
             VALUES ('old', 'a', 1, 'lookup', 0, 2, 'finished', 'finished', 2, 2, 3, 3),
                    ('old', 'b', 2, 'lookup', 0, 2, 'started', NULL, 2, 2, NULL, NULL)",
            [],
        )
        .expect("runs");
    }

    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open and upgrade");
    assert_eq!(LATEST_VERSION, 3);
    let session = SessionId::from("old");
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(
        log.iter().map(|m| (m.seq, m.request)).collect::<Vec<_>>(),
        [(1, None), (2, Some(0)), (3, Some(0)), (4, None), (5, Some(1))],
        "the result of an admitted call gets its run's request; a never-admitted call's keeps none"
    );
    assert_eq!(log[1].message, Message::Assistant(first.clone()));
    assert_eq!(log[4].message, Message::Assistant(second.clone()));
    let runs = store.tool_runs(&session).await.expect("runs");
    let summary: Vec<(CallKey, RunState, Option<u64>)> =
        runs.iter().map(|r| (r.key(), r.state, r.result_seq)).collect();
    assert_eq!(
        summary,
        [
            (CallKey::new(0, "a"), RunState::Finished, Some(3)),
            (CallKey::new(0, "b"), RunState::Started, None)
        ]
    );
    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    assert_eq!(unfinished.len(), 1);
    assert_eq!(
        (unfinished[0].run.key(), &unfinished[0].call),
        (CallKey::new(0, "b"), &b)
    );
    let context = store.model_context(&session).await.expect("context");
    let shape: Vec<String> = context
        .iter()
        .map(|message| match message {
            Message::ToolResult(r) => format!("result {}", r.tool_call_id),
            other => other.role().to_owned(),
        })
        .collect();
    assert_eq!(shape, ["user", "assistant", "result a", "result d", "assistant"]);

    // The upgraded store works on: b's result ends its run, and a later response admits "a" again.
    store
        .append_tool_result(&session, 0, &result(&b, "B"), finished(None), 6)
        .await
        .expect("b's result");
    let again = prefix("r2", "again", std::slice::from_ref(&a));
    assert_eq!(
        store.commit_fragment(&session, 2, &again, &admit(&[&a]), 7).await,
        Ok(7)
    );
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);

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
