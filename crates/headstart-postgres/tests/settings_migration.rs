//! Schema version 3 (a session's own settings, `SessionQueue::submit_with`) on a database version 2 wrote: its
//! sessions keep everything and have no settings, the queue goes on, and new submissions store theirs.
#![cfg(unix)]

use std::time::Duration;

use headstart_core::model::{Message, UserMessage};
use headstart_postgres::testing;
use headstart_postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use headstart_store::{SessionQueue, SessionSettings, SessionState, StoreError, TranscriptStore};

/// Version 3 is version 2 plus two columns: dropping them and the version row gives back what version 2 wrote.
const BACK_TO_VERSION_2: &str = "ALTER TABLE headstart.sessions DROP COLUMN system_prompt, DROP COLUMN model;
    UPDATE headstart.schema_version SET version = 2";

#[tokio::test]
async fn a_version_2_database_keeps_its_queue_and_then_stores_settings() {
    let Some(database) = testing::database().await else {
        return;
    };
    assert_eq!(SCHEMA_VERSION, 3);
    let old = {
        let store = PgStore::connect(database.url(), PgOptions::default())
            .await
            .expect("a fresh store");
        let old = store.submit(&UserMessage::new("from before"), 7).await.expect("submit");
        database
            .client()
            .await
            .batch_execute(BACK_TO_VERSION_2)
            .await
            .expect("the version 2 schema");
        old
    };

    let err = PgStore::connect_read_only(database.url(), PgOptions::default())
        .await
        .expect_err("a version 2 schema read-only");
    assert!(
        matches!(&err, StoreError::Open { message, .. } if message.message().contains("older")),
        "{err:?}"
    );
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect and upgrade");
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (&sessions[0].id, sessions[0].state, sessions[0].messages),
        (&old, SessionState::Pending, 1)
    );
    assert_eq!(sessions[0].settings, SessionSettings::default());
    let log = store.load_log(&old).await.expect("log");
    assert_eq!(log[0].message, Message::User(UserMessage::new("from before")));

    let own = SessionSettings {
        system: Some("Be brief.".to_owned()),
        model: Some("m2".to_owned()),
    };
    let new = store
        .submit_with(&UserMessage::new("now"), &own, 8)
        .await
        .expect("submit with settings");
    let claims = store.claim("w1", Duration::from_secs(60), 10).await.expect("claim");
    let claimed: Vec<_> = claims
        .iter()
        .map(|claim| (&claim.lease.session, &claim.settings))
        .collect();
    assert_eq!(claimed, [(&old, &SessionSettings::default()), (&new, &own)]);
}
