//! Schema version 2 (call ids unique per response, contract §7.2.2) on a database the first schema wrote: runs are
//! keyed by (session, request, call id), results of admitted calls get their request, and nothing is lost.
#![cfg(unix)]

use headstart_core::model::Message;
use headstart_postgres::testing;
use headstart_store::conformance::before_call_keys::{OldSession, OLD_RUNS};

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
    let old = OldSession::default();
    {
        let client = database.client().await;
        client.batch_execute(VERSION_1).await.expect("the version 1 schema");
        for (seq, request, message) in &old.messages() {
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
            .batch_execute(&format!(
                "INSERT INTO headstart.tool_runs (session_id, call_id, admission, tool_name, request, fragment_seq,
                     state, outcome, admitted_at_us, started_at_us, ended_at_us, result_seq)
                 VALUES {OLD_RUNS}"
            ))
            .await
            .expect("runs");
    }

    let store = database.upgrade_older_schema().await;
    old.check_upgraded(&store).await;
}
