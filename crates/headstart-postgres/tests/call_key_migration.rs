//! Schema version 2 (call ids unique per response, contract §7.2.2) on a database the first schema wrote: runs are
//! keyed by (session, request, call id), results of admitted calls get their request, and nothing is lost.
#![cfg(unix)]

use headstart_core::model::{Message, StopReason, ToolResultMessage, Usage, UserMessage};
use headstart_postgres::testing;
use headstart_postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use headstart_store::conformance::data::{admit, call, finished, fragment, prefix, result};
use headstart_store::{CallKey, RunState, SessionId, StoreError, TranscriptStore};

/// The schema as version 1 wrote it (its one migration, verbatim), and its version row.
const VERSION_1: &str = "CREATE SCHEMA headstart;
    CREATE TABLE headstart.schema_version (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        version BIGINT NOT NULL
    );
    CREATE TABLE headstart.sessions (
        id                  TEXT PRIMARY KEY,
        ordinal             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        created_at_us       BIGINT NOT NULL,
        state               TEXT NOT NULL DEFAULT 'unqueued'
                            CHECK (state IN ('unqueued', 'pending', 'running', 'completed', 'failed')),
        owner               TEXT,
        epoch               BIGINT NOT NULL DEFAULT 0 CHECK (epoch >= 0),
        lease_expires_at_us BIGINT,
        failure             TEXT
    );
    CREATE INDEX sessions_claimable ON headstart.sessions (ordinal) WHERE state IN ('pending', 'running');
    CREATE INDEX sessions_by_creation ON headstart.sessions (created_at_us, ordinal);
    CREATE TABLE headstart.messages (
        session_id TEXT NOT NULL REFERENCES headstart.sessions (id),
        seq        BIGINT NOT NULL CHECK (seq >= 1),
        role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result')),
        request    BIGINT CHECK (request IS NULL OR (role = 'assistant' AND request >= 0)),
        turn_id    TEXT CHECK (turn_id IS NULL OR role = 'assistant'),
        at_us      BIGINT NOT NULL,
        body       TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE headstart.tool_runs (
        session_id     TEXT NOT NULL REFERENCES headstart.sessions (id),
        call_id        TEXT NOT NULL,
        admission      BIGINT NOT NULL CHECK (admission >= 1),
        tool_name      TEXT NOT NULL,
        request        BIGINT NOT NULL CHECK (request >= 0),
        fragment_seq   BIGINT NOT NULL,
        state          TEXT NOT NULL
                       CHECK (state IN ('admitted', 'started', 'finished', 'cancelled', 'skipped')),
        outcome        TEXT,
        admitted_at_us BIGINT NOT NULL,
        started_at_us  BIGINT,
        ended_at_us    BIGINT,
        result_seq     BIGINT,
        PRIMARY KEY (session_id, call_id),
        UNIQUE (session_id, admission),
        FOREIGN KEY (session_id, fragment_seq) REFERENCES headstart.messages (session_id, seq),
        FOREIGN KEY (session_id, result_seq) REFERENCES headstart.messages (session_id, seq)
    );
    INSERT INTO headstart.schema_version (id, version) VALUES (1, 1);
    INSERT INTO headstart.sessions (id, created_at_us) VALUES ('old', 0);";

fn body(message: &Message) -> String {
    serde_json::to_string(message).expect("encode")
}

#[tokio::test]
async fn a_version_1_database_reads_back_and_then_takes_repeated_call_ids() {
    let Some(database) = testing::database().await else {
        return;
    };
    let (a, b, d) = (call("a", "lookup"), call("b", "lookup"), call("d", "lookup"));
    let first = prefix("r0", "checking", &[a.clone(), b.clone(), d.clone()]);
    let second = fragment("r1", StopReason::Stop, "done", &[], Usage::default());
    {
        // The prompt, a response with a (finished), b (started when the process stopped) and d (never admitted,
        // its "not executed" result), and a second response.
        let client = database.client().await;
        client.batch_execute(VERSION_1).await.expect("the version 1 schema");
        let messages: [(i64, Option<i64>, Message); 5] = [
            (1, None, Message::User(UserMessage::new("go"))),
            (2, Some(0), Message::Assistant(first.clone())),
            (3, None, Message::ToolResult(result(&a, "A"))),
            (
                4,
                None,
                Message::ToolResult(ToolResultMessage::error(&d, "not executed")),
            ),
            (5, Some(1), Message::Assistant(second.clone())),
        ];
        for (seq, request, message) in &messages {
            let turn_id = match message {
                Message::Assistant(fragment) => Some(fragment.turn_id.clone()),
                _ => None,
            };
            client
                .execute(
                    "INSERT INTO headstart.messages (session_id, seq, role, request, turn_id, at_us, body)
                     VALUES ('old', $1, $2, $3, $4, $1, $5)",
                    &[seq, &message.role(), request, &turn_id, &body(message)],
                )
                .await
                .expect("insert a message");
        }
        client
            .batch_execute(
                "INSERT INTO headstart.tool_runs (session_id, call_id, admission, tool_name, request, fragment_seq,
                     state, outcome, admitted_at_us, started_at_us, ended_at_us, result_seq)
                 VALUES ('old', 'a', 1, 'lookup', 0, 2, 'finished', 'finished', 2, 2, 3, 3),
                        ('old', 'b', 2, 'lookup', 0, 2, 'started', NULL, 2, 2, NULL, NULL)",
            )
            .await
            .expect("runs");
    }

    let err = PgStore::connect_read_only(database.url(), PgOptions::default())
        .await
        .expect_err("a version 1 schema read-only");
    assert!(
        matches!(&err, StoreError::Open { message, .. } if message.contains("older")),
        "{err:?}"
    );
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect and upgrade");
    assert_eq!(SCHEMA_VERSION, 2);
    let session = SessionId::from("old");
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(
        log.iter().map(|m| (m.seq, m.request)).collect::<Vec<_>>(),
        [(1, None), (2, Some(0)), (3, Some(0)), (4, None), (5, Some(1))],
        "the result of an admitted call gets its run's request; a never-admitted call's keeps none"
    );
    assert_eq!(log[1].message, Message::Assistant(first.clone()));
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
    let err = store
        .commit_fragment(&session, 2, &again, &admit(&[&a]), 8)
        .await
        .expect_err("a again within request 2");
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.contains("already admitted")),
        "{err:?}"
    );
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);
}
