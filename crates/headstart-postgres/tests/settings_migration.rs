//! Schema version 3 (a session's own settings, `SessionQueue::submit_with`) on a database version 2 wrote: its
//! sessions keep everything and have no settings, the queue goes on, and new submissions store theirs.
#![cfg(unix)]

use headstart_core::model::UserMessage;
use headstart_postgres::testing;
use headstart_postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use headstart_store::conformance::before_settings::{check_upgraded, OLD_PROMPT};
use headstart_store::SessionQueue;

/// Version 5 is version 2 plus six columns and an index (two columns by version 3, the runs' seal time by version
/// 4, the queue, attempts and backoff by version 5): dropping them and the version row gives back what version 2
/// wrote.
const BACK_TO_VERSION_2: &str = "DROP INDEX headstart.sessions_claimable_by_queue;
    ALTER TABLE headstart.sessions DROP COLUMN system_prompt, DROP COLUMN model, DROP COLUMN queue,
        DROP COLUMN attempts, DROP COLUMN not_before_us;
    ALTER TABLE headstart.tool_runs DROP COLUMN sealed_at_us;
    UPDATE headstart.schema_version SET version = 2";

#[tokio::test]
async fn a_version_2_database_keeps_its_queue_and_then_stores_settings() {
    let Some(database) = testing::database().await else {
        return;
    };
    assert_eq!(SCHEMA_VERSION, 5);
    let old = {
        let store = PgStore::connect(database.url(), PgOptions::default())
            .await
            .expect("a fresh store");
        let old = store.submit(&UserMessage::new(OLD_PROMPT), 7).await.expect("submit");
        database
            .client()
            .await
            .batch_execute(BACK_TO_VERSION_2)
            .await
            .expect("the version 2 schema");
        old
    };

    let store = database.upgrade_older_schema().await;
    check_upgraded(&store, &old).await;
}
