//! Wake-ups on PostgreSQL: the queue's notifications (sent once the change they announce is committed, so a
//! listener can always read what it hears of; none for a change refused) and the listener behind
//! `SessionQueue::wake_ups`, which reconnects when its connection is killed.
#![cfg(unix)]

use std::future::poll_fn;
use std::time::Duration;

use futures::StreamExt as _;
use headstart_core::model::UserMessage;
use headstart_postgres::testing::{self, TestDatabase};
use headstart_postgres::{PgOptions, PgStore, NOTIFY_CHANNEL};
use headstart_store::{QueueName, SessionEnd, SessionQueue, SessionSettings, TranscriptStore, WakeUp, WakeUps};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_postgres::{AsyncMessage, Client, NoTls};

/// A bound for a failure, far above anything a loaded machine takes.
const PATIENCE: Duration = Duration::from_secs(10);

const LEASE: Duration = Duration::from_secs(30);

/// A plain connection listening on the queue's channel, and the payloads it hears (the client must be kept).
async fn listen(database: &TestDatabase) -> (Client, UnboundedReceiver<String>) {
    let (client, mut connection) = tokio_postgres::connect(database.url(), NoTls).await.expect("connect");
    let (sender, payloads) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(notification) = message {
                assert_eq!(notification.channel(), NOTIFY_CHANNEL);
                let _ = sender.send(notification.payload().to_owned());
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
        .await
        .expect("listen");
    (client, payloads)
}

async fn heard(payloads: &mut UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, payloads.recv())
        .await
        .expect("a notification in time")
        .expect("the listening connection is open")
}

async fn next(wake_ups: &mut WakeUps) -> WakeUp {
    tokio::time::timeout(PATIENCE, wake_ups.next())
        .await
        .expect("a wake-up in time")
        .expect("wake-ups never end")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_releases_and_finishes_are_announced_once_committed() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");
    let (_client, mut payloads) = listen(&database).await;

    // Nothing for a session made outside the queue: the first thing heard is the submit.
    store.create_session(0).await.expect("create");
    let session = store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    assert_eq!(
        heard(&mut payloads).await,
        format!("pending {session} default"),
        "with its queue"
    );
    // Heard only once committed: the session and its prompt are there to read.
    assert_eq!(
        store.load_log(&session).await.expect("the session is readable").len(),
        1
    );

    let mut ends = Vec::new();
    for (end, state) in [
        (SessionEnd::Released, "pending"),
        (SessionEnd::Failed("no".to_owned()), "failed"),
    ] {
        let claim = store.claim("w", LEASE, 1).await.expect("claim").remove(0);
        store.finish(&claim.lease, end).await.expect("finish");
        assert_eq!(heard(&mut payloads).await, format!("{state} {session}"));
        ends.push(claim.lease);
    }
    let settings = SessionSettings {
        queue: Some(QueueName::new("gpu").expect("a queue name")),
        ..SessionSettings::default()
    };
    let other = store
        .submit_with(&UserMessage::new("go"), &settings, 0)
        .await
        .expect("submit");
    assert_eq!(heard(&mut payloads).await, format!("pending {other} gpu"));
    // A retry is not claimable before its backoff: nothing to announce.
    let claim = store
        .claim_from("w", &[QueueName::new("gpu").expect("a queue name")], LEASE, 1)
        .await
        .expect("claim")
        .remove(0);
    let retry = SessionEnd::Retry {
        reason: "HTTP 503".to_owned(),
        after: Duration::ZERO,
    };
    store.finish(&claim.lease, retry).await.expect("release for a retry");
    let claim = store
        .claim_from("w", &[QueueName::new("gpu").expect("a queue name")], LEASE, 1)
        .await
        .expect("claim")
        .remove(0);
    // A refused finish (a stale lease) changes nothing and announces nothing: the next thing heard is the real one.
    assert!(store.finish(&ends[0], SessionEnd::Completed).await.is_err());
    store.finish(&claim.lease, SessionEnd::Completed).await.expect("finish");
    assert_eq!(heard(&mut payloads).await, format!("completed {other}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_wakes_on_a_submit_and_comes_back_after_it_is_killed() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");
    let mut wake_ups = store
        .wake_ups(&[QueueName::default()])
        .expect("PostgreSQL offers wake-ups");
    assert_eq!(next(&mut wake_ups).await, WakeUp::Listening);
    store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    assert_eq!(next(&mut wake_ups).await, WakeUp::Work);

    let pid = database.listener(None).await;
    database.terminate(pid).await;
    match next(&mut wake_ups).await {
        WakeUp::Lost(reason) => assert!(reason.contains("terminat"), "{reason}"),
        other => panic!("expected the loss, got {other:?}"),
    }
    assert_eq!(next(&mut wake_ups).await, WakeUp::Listening, "reconnected");
    let again = database.listener(Some(pid)).await;
    assert_ne!(again, pid);
    store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    assert_eq!(next(&mut wake_ups).await, WakeUp::Work);

    // Dropping the stream closes its connection.
    drop(wake_ups);
    let deadline = std::time::Instant::now() + PATIENCE;
    while !database.listeners().await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the listener's connection stayed open"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_wake_ups_when_listening_is_off_or_the_store_is_read_only() {
    let Some(database) = testing::database().await else {
        return;
    };
    let off = PgOptions {
        listen: false,
        ..PgOptions::default()
    };
    let store = PgStore::connect(database.url(), off).await.expect("connect");
    assert!(store.wake_ups(&[QueueName::default()]).is_none());
    let reader = PgStore::connect_read_only(database.url(), PgOptions::default())
        .await
        .expect("connect read-only");
    assert!(reader.wake_ups(&[QueueName::default()]).is_none());
}
