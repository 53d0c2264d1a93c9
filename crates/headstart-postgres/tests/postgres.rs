//! The PostgreSQL store against a real server (`headstart_postgres::testing`: `DATABASE_URL`, or a throwaway
//! cluster this test binary starts once; a fresh database per test). The conformance suite that every store
//! passes, then what only PostgreSQL has: its schema, its `synchronous_commit`, fencing and `SKIP LOCKED` under
//! real concurrency between connections, a server that goes away.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart_core::model::{Message, UserMessage};
use headstart_postgres::testing::{self, TestDatabase};
use headstart_postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use headstart_store::conformance::data::{commit_one, store_with_session};
use headstart_store::conformance::Fixture;
use headstart_store::{CallKey, Durability, SessionEnd, SessionId, SessionQueue, StoreError, TranscriptStore};

struct PgFixture {
    database: TestDatabase,
    store: PgStore,
}

impl PgFixture {
    async fn sql(&self, statement: &str) {
        let client = self.database.client().await;
        client
            .batch_execute(statement)
            .await
            .unwrap_or_else(|err| panic!("test: {statement}: {err}"));
    }
}

#[async_trait]
impl Fixture for PgFixture {
    type Store = PgStore;

    fn store(&self) -> PgStore {
        self.store.clone()
    }

    async fn connect(&self) -> PgStore {
        PgStore::connect(self.database.url(), PgOptions::default())
            .await
            .expect("test: connect another handle")
    }

    async fn fail_run_inserts(&self, on: bool) -> bool {
        if on {
            self.sql(
                "CREATE FUNCTION public.fail_run_insert() RETURNS trigger LANGUAGE plpgsql AS
                     $$ BEGIN RAISE EXCEPTION 'injected fault: tool run inserts fail'; END $$;
                 CREATE TRIGGER fail_run_inserts BEFORE INSERT ON headstart.tool_runs
                     FOR EACH ROW EXECUTE FUNCTION public.fail_run_insert();",
            )
            .await;
        } else {
            self.sql("DROP TRIGGER fail_run_inserts ON headstart.tool_runs").await;
        }
        true
    }

    async fn damage_body(&self, session: &SessionId, seq: u64) -> bool {
        let client = self.database.client().await;
        client
            .execute(
                "UPDATE headstart.messages SET body = '{not json' WHERE session_id = $1 AND seq = $2",
                &[&session.0, &(seq as i64)],
            )
            .await
            .expect("test: damage a body");
        true
    }
}

/// A fresh database and a store on it; `None` (the harness said why) when there is no PostgreSQL.
async fn fixture() -> Option<PgFixture> {
    let database = testing::database().await?;
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("test: connect");
    Some(PgFixture { database, store })
}

mod conformance {
    use super::fixture;

    headstart_store::conformance_tests!(fixture());
}

// ---- schema and connection ------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_connecting_at_once_migrate_once_and_record_the_version() {
    let Some(database) = testing::database().await else {
        return;
    };
    let connects: Vec<_> = (0..6)
        .map(|_| {
            let url = database.url().to_owned();
            tokio::spawn(async move { PgStore::connect(&url, PgOptions::default()).await })
        })
        .collect();
    for connect in connects {
        connect.await.expect("task").expect("connect");
    }
    let client = database.client().await;
    let version: i64 = client
        .query_one("SELECT version FROM headstart.schema_version", &[])
        .await
        .and_then(|row| row.try_get(0))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
    // Bodies are text, never jsonb (which would reorder keys and respell numbers).
    let body_type: String = client
        .query_one(
            "SELECT data_type FROM information_schema.columns
             WHERE table_schema = 'headstart' AND table_name = 'messages' AND column_name = 'body'",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .expect("body type");
    assert_eq!(body_type, "text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_and_a_foreign_headstart_schema_are_refused() {
    let Some(newer) = testing::database().await else { return };
    PgStore::connect(newer.url(), PgOptions::default())
        .await
        .expect("connect");
    newer
        .client()
        .await
        .batch_execute("UPDATE headstart.schema_version SET version = version + 7")
        .await
        .expect("bump the version");
    let err = PgStore::connect(newer.url(), PgOptions::default())
        .await
        .expect_err("a newer schema");
    assert_eq!(
        err,
        StoreError::NewerSchema {
            found: SCHEMA_VERSION + 7,
            supported: SCHEMA_VERSION
        }
    );

    let Some(foreign) = testing::database().await else {
        return;
    };
    let client = foreign.client().await;
    client
        .batch_execute("CREATE SCHEMA headstart; CREATE TABLE headstart.notes (body text)")
        .await
        .expect("a foreign schema");
    let err = PgStore::connect(foreign.url(), PgOptions::default())
        .await
        .expect_err("a foreign schema");
    assert!(
        matches!(&err, StoreError::Open { message, .. } if message.message().contains("schema_version")),
        "{err:?}"
    );
    let tables = foreign
        .count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'headstart'")
        .await;
    assert_eq!(tables, 1, "the store created tables in a foreign schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_commit_is_raised_to_on_whatever_the_database_says() {
    let Some(database) = testing::database().await else {
        return;
    };
    database
        .client()
        .await
        .batch_execute(&format!(
            "ALTER DATABASE \"{}\" SET synchronous_commit = off",
            database.name()
        ))
        .await
        .expect("relax the database's default");
    for durability in [Durability::Full, Durability::Normal] {
        let options = PgOptions {
            durability,
            ..PgOptions::default()
        };
        let store = PgStore::connect(database.url(), options).await.expect("connect");
        assert_eq!(store.synchronous_commit().await.as_deref(), Ok("on"), "{durability:?}");
        // Writes work at either durability (Normal relaxes only transactions that admit no call).
        let session = store_with_session(&store).await;
        assert_eq!(commit_one(&store, &session, "c1").await, Ok(2));
    }
    // A URL asking for less is overruled too.
    let url = format!("{}?options=-c%20synchronous_commit%3Dlocal", database.url());
    let store = PgStore::connect(&url, PgOptions::default()).await.expect("connect");
    assert_eq!(store.synchronous_commit().await.as_deref(), Ok("on"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_stored_as_the_exact_json_text() {
    let Some(fixture) = fixture().await else { return };
    let store = fixture.store();
    let session = store_with_session(&store).await;
    commit_one(&store, &session, "c1").await.expect("commit");
    let log = store.load_log(&session).await.expect("log");
    let client = fixture.database.client().await;
    for stored in &log {
        let body: String = client
            .query_one(
                "SELECT body FROM headstart.messages WHERE session_id = $1 AND seq = $2",
                &[&session.0, &(stored.seq as i64)],
            )
            .await
            .and_then(|row| row.try_get(0))
            .expect("body");
        assert_eq!(body, serde_json::to_string(&stored.message).expect("encode"));
    }
}

/// The server's error stays behind the store's: its SQLSTATE through [`StoreError::sqlstate`], the driver's error
/// as the source, while the message still says what failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_keeps_its_sqlstate_and_the_driver_error() {
    let Some(fixture) = fixture().await else { return };
    let store = fixture.store();
    let session = store_with_session(&store).await;
    assert!(fixture.fail_run_inserts(true).await);
    let err = commit_one(&store, &session, "c1")
        .await
        .expect_err("the trigger raised");
    assert!(
        matches!(&err, StoreError::Backend(_)),
        "raise_exception is no known class: {err:?}"
    );
    assert!(err.to_string().contains("injected fault"), "{err}");
    assert_eq!(err.sqlstate(), Some("P0001"), "{err:?}");
    let driver = std::error::Error::source(&err)
        .and_then(|source| source.downcast_ref::<tokio_postgres::Error>())
        .expect("the driver's error is the source");
    assert_eq!(driver.code(), Some(&tokio_postgres::error::SqlState::RAISE_EXCEPTION));

    // While connecting too: a database that does not exist (invalid_catalog_name).
    let missing = fixture
        .database
        .url()
        .replace(fixture.database.name(), "headstart_no_such_database");
    let err = PgStore::connect(&missing, PgOptions::default())
        .await
        .expect_err("no such database");
    assert!(matches!(&err, StoreError::Open { .. }), "{err:?}");
    assert_eq!(err.sqlstate(), Some("3D000"), "{err:?}");
    assert!(std::error::Error::source(&err).is_some_and(|source| source.is::<tokio_postgres::Error>()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_is_unavailable() {
    let Some(_database) = testing::database().await else {
        return;
    };
    let empty = std::env::temp_dir().join(format!("headstart-no-server-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("an empty socket folder");
    let url = format!(
        "postgresql://postgres@{}:5432/nothing",
        empty.display().to_string().replace('/', "%2F")
    );
    let err = PgStore::connect(&url, PgOptions::default())
        .await
        .expect_err("nobody listens there");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let _ = std::fs::remove_dir(&empty);

    // Connections the server drops (it restarted, an administrator ended them) are replaced: operations that had
    // not begun move to a new connection.
    let Some(fixture) = fixture().await else { return };
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let killed: i64 = fixture
        .database
        .client()
        .await
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .expect("terminate the store's connections");
    assert!(killed >= 1, "the store had a connection open");
    for n in 0..3 {
        store
            .append_user(&session, &UserMessage::new(format!("after {n}")), 5)
            .await
            .expect("a write after the server dropped the store's connections");
    }
    assert_eq!(store.load_log(&session).await.expect("log").len(), 4);
}

// ---- fleets: fencing and claims between real connections ------------------------------------------------------

/// A claim skips a session whose row another transaction holds (a write of its owner in flight), instead of
/// waiting for it: `FOR UPDATE SKIP LOCKED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_skip_sessions_locked_by_a_write_in_flight() {
    let Some(fixture) = fixture().await else { return };
    let store = fixture.store();
    let locked = store.submit(&UserMessage::new("busy"), 1).await.expect("submit");
    let free = store.submit(&UserMessage::new("free"), 2).await.expect("submit");
    let mut client = fixture.database.client().await;
    let holder = client.transaction().await.expect("begin");
    holder
        .execute(
            "SELECT 1 FROM headstart.sessions WHERE id = $1 FOR UPDATE",
            &[&locked.0],
        )
        .await
        .expect("hold the row");
    let started = Instant::now();
    let claims = store.claim("w1", Duration::from_secs(60), 10).await.expect("claim");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the claim waited for the lock"
    );
    let claimed: Vec<&SessionId> = claims.iter().map(|claim| &claim.lease.session).collect();
    assert_eq!(claimed, vec![&free]);
    holder.commit().await.expect("release the row");
    let claims = store.claim("w2", Duration::from_secs(60), 10).await.expect("claim");
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].lease.session, locked);
}

/// A zombie worker that keeps writing while another worker takes its session over: every write it made before
/// the takeover is in the log before the new owner's, every write after it is fenced (counted), and none of
/// those changed anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_writing_through_a_takeover_is_fenced_from_the_claim_on() {
    let Some(fixture) = fixture().await else { return };
    let queue_a = fixture.store();
    let queue_b = fixture.connect().await;
    let session = queue_a.submit(&UserMessage::new("go"), 1).await.expect("submit");
    let lease_a = queue_a
        .claim("zombie", Duration::from_millis(50), 1)
        .await
        .expect("claim")
        .pop()
        .expect("the zombie claims the session")
        .lease;
    let zombie = queue_a.fenced(&lease_a);
    let fenced = Arc::new(AtomicUsize::new(0));
    let (wrote, first_write) = tokio::sync::oneshot::channel();
    let writer = {
        let (zombie, session, fenced) = (zombie.clone(), session.clone(), Arc::clone(&fenced));
        let mut wrote = Some(wrote);
        tokio::spawn(async move {
            let mut stored = Vec::new();
            // Until 20 writes were fenced, not a fixed number of writes: on a fast server a fixed number could all
            // land before the takeover (20 s bounds a takeover that never comes).
            let deadline = Instant::now() + Duration::from_secs(20);
            for n in 0.. {
                if Instant::now() > deadline {
                    break;
                }
                match zombie
                    .append_user(&session, &UserMessage::new(format!("zombie {n}")), n)
                    .await
                {
                    Ok(seq) => {
                        stored.push(seq);
                        if let Some(wrote) = wrote.take() {
                            let _ = wrote.send(());
                        }
                    }
                    Err(StoreError::Fenced(_)) => {
                        fenced.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(other) => panic!("zombie write {n}: {other:?}"),
                }
                if fenced.load(Ordering::SeqCst) >= 20 {
                    break;
                }
            }
            stored
        })
    };
    // Take over as soon as the lease has expired, once the zombie wrote (on a loaded machine its first write may
    // come after the lease's end: waiting for it, not for a while, keeps "wrote before the takeover" true).
    tokio::time::timeout(Duration::from_secs(20), first_write)
        .await
        .expect("the zombie wrote within 20 s")
        .expect("the zombie's first write is reported");
    let claim_b = loop {
        if let Some(claim) = queue_b
            .claim("worker-b", Duration::from_secs(60), 1)
            .await
            .expect("claim")
            .pop()
        {
            break claim;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(claim_b.previous_owner.as_deref(), Some("zombie"));
    let worker_b = queue_b.fenced(&claim_b.lease);
    let first_b = worker_b
        .append_user(&session, &UserMessage::new("worker b"), 1000)
        .await
        .expect("the new owner writes");
    let zombie_seqs = writer.await.expect("zombie task");
    let fenced = fenced.load(Ordering::SeqCst);
    assert!(
        fenced >= 20,
        "the zombie's writes after the takeover were fenced: {fenced}"
    );
    assert!(!zombie_seqs.is_empty(), "the zombie wrote before the takeover");
    assert!(
        zombie_seqs.iter().all(|seq| *seq < first_b),
        "a zombie write landed after the takeover: {zombie_seqs:?} vs {first_b}"
    );
    let log = queue_b.load_log(&session).await.expect("log");
    let zombie_messages = log
        .iter()
        .filter(|stored| matches!(&stored.message, Message::User(user) if user.text.starts_with("zombie")))
        .count();
    assert_eq!(
        zombie_messages,
        zombie_seqs.len(),
        "only the zombie's successful writes are stored"
    );
    assert_eq!(log.len() as u64, first_b, "nothing after the new owner's write");
    assert!(matches!(
        queue_a.finish(&lease_a, SessionEnd::Completed).await,
        Err(StoreError::Fenced(_))
    ));
}

/// Many workers, each with its own pool, claiming small batches at once: no session is ever handed to two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_claiming_at_once_never_share_a_session() {
    const SESSIONS: usize = 200;
    let Some(fixture) = fixture().await else { return };
    let store = fixture.store();
    let mut submitted = BTreeSet::new();
    for n in 0..SESSIONS {
        submitted.insert(
            store
                .submit(&UserMessage::new(format!("s{n}")), n as i64)
                .await
                .expect("submit"),
        );
    }
    let mut workers = Vec::new();
    // Each worker waits after its first claim until all have made theirs, so every worker takes part however the
    // machine schedules them (on a busy one, the first worker spawned could otherwise claim everything alone).
    let first_claims = Arc::new(tokio::sync::Barrier::new(8));
    for worker in 0..8 {
        let queue = fixture.connect().await;
        let first_claims = Arc::clone(&first_claims);
        workers.push(tokio::spawn(async move {
            let owner = format!("worker-{worker}");
            let mut mine = Vec::new();
            loop {
                let claims = queue.claim(&owner, Duration::from_secs(60), 2).await.expect("claim");
                if mine.is_empty() {
                    first_claims.wait().await;
                }
                if claims.is_empty() {
                    break mine;
                }
                mine.extend(claims.into_iter().map(|claim| claim.lease.session));
            }
        }));
    }
    let mut seen = BTreeSet::new();
    let mut busy_workers = 0;
    for worker in workers {
        let mine = worker.await.expect("worker");
        busy_workers += usize::from(!mine.is_empty());
        for session in mine {
            assert!(seen.insert(session.clone()), "{session} was handed to two workers");
        }
    }
    assert_eq!(seen, submitted);
    assert_eq!(busy_workers, 8, "every worker claimed before any claimed twice");
}

// ---- read-only handles ------------------------------------------------------------------------------------------

/// `connect_read_only` (what `headstart inspect` and `timeline` use) never creates or upgrades the schema, reads
/// what a writer stored, and refuses every write before it reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_handle_creates_nothing_reads_and_refuses_every_write() {
    let Some(database) = testing::database().await else {
        return;
    };
    let refused = PgStore::connect_read_only(database.url(), PgOptions::default())
        .await
        .expect_err("an empty database holds no store to read");
    assert!(
        matches!(&refused, StoreError::Open { message, .. } if message.message().contains("no headstart store")),
        "{refused:?}"
    );
    assert!(
        !database.has_store_schema().await,
        "a read-only connect must not create the schema"
    );

    let writer = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect for writing");
    let session = store_with_session(&writer).await;
    commit_one(&writer, &session, "c1").await.expect("commit");
    let reader = PgStore::connect_read_only(database.url(), PgOptions::default())
        .await
        .expect("connect read-only");
    let log = reader.load_log(&session).await.expect("read the log");
    assert_eq!(log.len(), 2);
    assert_eq!(reader.sessions().await.expect("sessions").len(), 1);
    let writes = [
        reader.create_session(0).await.map(|_| ()),
        reader
            .append_user(&session, &UserMessage::new("more"), 1)
            .await
            .map(|_| ()),
        reader.mark_started(&session, &CallKey::new(0, "c1"), 2).await,
        reader.submit(&UserMessage::new("queued"), 3).await.map(|_| ()),
        reader.claim("reader", Duration::from_secs(30), 1).await.map(|_| ()),
    ];
    for write in writes {
        let error = write.expect_err("a read-only handle writes nothing");
        assert!(
            matches!(&error, StoreError::ReadOnly(message) if message.message().contains("opened read-only")),
            "{error:?}"
        );
    }
    assert_eq!(reader.load_log(&session).await.expect("log").len(), 2);
    assert_eq!(
        writer.sessions().await.expect("sessions").len(),
        1,
        "nothing was written"
    );
}
