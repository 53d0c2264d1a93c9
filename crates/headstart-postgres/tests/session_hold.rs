//! A process's hold on a session of a PostgreSQL store outside a fleet (contract §7.4.4; what the Python and Node
//! packages' `recover` take): one holder at a time, the others refused naming it, released when the hold is dropped,
//! and a session under a worker's lease refused whatever the locks say.
#![cfg(unix)]

use std::time::Duration;

use headstart_core::model::UserMessage;
use headstart_postgres::testing;
use headstart_postgres::{session_locks, PgOptions, PgStore, SessionLocksAt};
use headstart_store::owner::{Holder, OwnershipError};
use headstart_store::{SessionQueue, TranscriptStore};

#[tokio::test]
async fn one_process_holds_a_session_at_a_time_and_a_workers_lease_is_never_taken() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");
    let free = store.create_session(1).await.expect("a session");
    let locks = session_locks(database.url());
    let SessionLocksAt::Database(database_locks) = &locks else {
        panic!("a connection string's locks are the database's: {locks:?}");
    };
    // Nothing connects before the first take; then one pool serves every take, this value's clones' too.
    assert!(!database_locks.is_connected());
    let clone = locks.clone();

    // Eight takers at once (through a clone), each on a connection of its own: one holds it, the others are refused
    // naming a process.
    let takers = (0..8).map(|_| clone.take(&free, 2));
    let taken = futures::future::join_all(takers).await;
    assert!(
        database_locks.is_connected(),
        "the clone's takes connected the pool this value uses"
    );
    let (held, refused): (Vec<_>, Vec<_>) = taken.into_iter().partition(Result::is_ok);
    assert_eq!((held.len(), refused.len()), (1, 7), "{refused:?}");
    for refusal in refused {
        match refusal {
            Err(OwnershipError::Refused(refusal)) => {
                assert_eq!(refusal.session, free);
                assert!(matches!(refusal.holder, Holder::Process(_)), "{refusal:?}");
                assert!(refusal.to_string().contains(free.0.as_str()), "{refusal}");
            }
            other => panic!("refused otherwise: {other:?}"),
        }
    }
    // The holder has named itself by now: the next refusal says which process holds it.
    let named = locks.take(&free, 3).await.expect_err("held");
    let text = named.to_string();
    assert!(text.contains(&format!("process {}", std::process::id())), "{text}");

    // Dropped, the hold is released: the session can be held again.
    drop(held);
    let again = locks.take(&free, 4).await.expect("released with its connection");
    drop(again);

    // A session a worker holds under a lease is refused, naming the worker, and no lock is taken for it.
    store
        .submit(&UserMessage::new("go"), 5)
        .await
        .expect("a submitted session");
    let claims = store
        .claim("worker-a", Duration::from_secs(60), 1)
        .await
        .expect("a claim");
    let leased = &claims[0].lease.session;
    let refusal = locks.take(leased, 6).await.expect_err("a worker holds it");
    assert!(
        matches!(&refusal, OwnershipError::Refused(refusal) if matches!(&refusal.holder, Holder::Worker { name, .. } if name == "worker-a")),
        "{refusal:?}"
    );
}

#[tokio::test]
async fn an_unreachable_database_is_a_lock_error_naming_it_without_its_password() {
    let locks = session_locks("postgresql://agent:secret@127.0.0.1:1/agents?connect_timeout=2");
    let error = locks
        .take(&headstart_store::SessionId::from("s"), 1)
        .await
        .expect_err("nothing listens on port 1");
    let text = error.to_string();
    assert!(matches!(error, OwnershipError::Lock { .. }), "{error:?}");
    assert!(text.contains("127.0.0.1") && !text.contains("secret"), "{text}");
    // A failed connection is not kept: the next take tries again (and fails again, nothing listening).
    let SessionLocksAt::Database(database_locks) = &locks else {
        panic!("a connection string's locks are the database's: {locks:?}");
    };
    assert!(!database_locks.is_connected());
    assert!(!format!("{locks:?}").contains("secret"), "{locks:?}");
}
