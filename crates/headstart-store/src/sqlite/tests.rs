//! Tests of what only the SQLite store does: the file, its pragmas, read-only opening, SQLite's faults, group
//! commit, the schema migrations. What every store does is the conformance suite (`conformance.rs` runs it here);
//! the child-process durability test is in `tests/kill_after_commit.rs`.

use std::path::Path;
use std::time::Duration;

use headstart_core::model::{Message, UserMessage};
use rusqlite::ffi;

use super::errors::sqlite_error;
use super::schema::LATEST_VERSION;
use super::*;
use crate::conformance::data::{admit, call, commit_one, finished, key, prefix, result, store_with_session};
use crate::types::{RunState, SessionId};
use crate::DatabaseCode;
use crate::{SessionQueue, TranscriptStore};

fn db_path(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("transcript.db")
}

fn with_conn<T>(store: &SqliteStore, f: impl FnOnce(&Connection) -> T) -> T {
    let guard = store.inner.conn.lock().expect("test: connection mutex");
    f(&guard)
}

#[test]
fn store_is_cheap_to_clone_and_shareable_across_threads() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<SqliteStore>();
    let store = SqliteStore::open_in_memory().expect("open");
    let clone = store.clone();
    assert!(
        Arc::ptr_eq(&store.inner, &clone.inner),
        "clones must share one connection"
    );
    assert_eq!(store.path(), None);
}

#[tokio::test]
async fn reopening_keeps_the_data_and_the_schema_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let session = {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        let session = store_with_session(&store).await;
        commit_one(&store, &session, "c1").await.expect("commit");
        session
    };
    let store = SqliteStore::open(
        &path,
        SqliteOptions {
            durability: Durability::Normal,
            ..SqliteOptions::default()
        },
    )
    .expect("reopen");
    assert_eq!(store.durability(), Durability::Normal);
    assert_eq!(store.path(), Some(path.as_path()));
    assert_eq!(store.load_log(&session).await.expect("log").len(), 2);
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);
    let version: i64 = with_conn(&store, |conn| {
        conn.query_row(sql::SELECT_SCHEMA_VERSION, [], |r| r.get(0))
    })
    .expect("schema version");
    assert_eq!(version, LATEST_VERSION);
    assert_eq!(LATEST_VERSION, sql::MIGRATIONS.len() as i64);
}

#[tokio::test]
async fn connections_use_wal_the_configured_sync_and_foreign_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (durability, synchronous) in [(Durability::Full, 2), (Durability::Normal, 1)] {
        let path = dir.path().join(format!("{durability:?}.db"));
        let options = SqliteOptions {
            durability,
            busy_timeout: Duration::from_millis(1234),
            max_page_count: None,
            group_commit: true,
            inline: false,
        };
        let store = SqliteStore::open(&path, options).expect("open");
        let (mode, sync, fks, timeout) = with_conn(&store, |conn| {
            let mode: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .expect("journal_mode");
            let sync: i64 = conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .expect("synchronous");
            let fks: i64 = conn
                .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
                .expect("foreign_keys");
            let timeout: i64 = conn
                .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
                .expect("busy_timeout");
            (mode, sync, fks, timeout)
        });
        assert_eq!(
            (mode.as_str(), sync, fks, timeout),
            ("wal", synchronous, 1, 1234),
            "{durability:?}"
        );
        assert_eq!(store.durability(), durability);
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_new_file_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let session = store_with_session(&store).await;
    commit_one(&store, &session, "c1").await.expect("commit");
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode(&path).expect("db metadata"), 0o600);
    // SQLite gives its WAL and shared-memory files the database file's permissions.
    for suffix in ["-wal", "-shm"] {
        let side = dir.path().join(format!("transcript.db{suffix}"));
        if let Ok(m) = mode(&side) {
            assert_eq!(m, 0o600, "{}", side.display());
        }
    }
}

#[tokio::test]
async fn open_read_only_never_creates_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let err = SqliteStore::open_read_only(&path).expect_err("missing file");
    assert!(
        matches!(&err, StoreError::Open { path: p, .. } if p.contains("transcript.db")),
        "{err:?}"
    );
    assert!(!path.exists(), "open_read_only created the file");
}

#[tokio::test]
async fn a_read_only_store_reads_and_refuses_every_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let session = {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        let session = store_with_session(&store).await;
        commit_one(&store, &session, "c1").await.expect("commit");
        session
    };
    let store = SqliteStore::open_read_only(&path).expect("open read-only");
    assert_eq!(store.load_log(&session).await.expect("log").len(), 2);
    assert_eq!(store.sessions().await.expect("sessions").len(), 1);
    let c1 = call("c1", "lookup");
    assert!(matches!(store.create_session(1).await, Err(StoreError::ReadOnly(_))));
    assert!(matches!(
        store.append_user(&session, &UserMessage::new("x"), 1).await,
        Err(StoreError::ReadOnly(_))
    ));
    assert!(matches!(
        commit_one(&store, &session, "c2").await,
        Err(StoreError::ReadOnly(_))
    ));
    assert!(matches!(
        store.mark_started(&session, &key("c1"), 1).await,
        Err(StoreError::ReadOnly(_))
    ));
    assert!(matches!(
        store
            .append_tool_result(&session, 0, &result(&c1, "r"), finished(None), 1)
            .await,
        Err(StoreError::ReadOnly(_))
    ));
    // The connection itself refuses writes too (SQLite's SQLITE_READONLY, mapped): this holds even for root.
    let raw = with_conn(&store, |conn| {
        conn.execute(
            sql::INSERT_SESSION,
            rusqlite::params!["x", 1, "unqueued", None::<String>, None::<String>, "default"],
        )
    });
    let err = sqlite_error(raw.expect_err("a read-only connection wrote"), "insert", None);
    assert!(matches!(err, StoreError::ReadOnly(_)), "{err:?}");
    assert_eq!(store.load_log(&session).await.expect("log").len(), 2);
}

#[tokio::test]
async fn a_write_on_a_read_only_connection_is_read_only() {
    // SQLITE_READONLY through the whole write path (the connection refuses writes, as a read-only file would).
    let store = SqliteStore::open_in_memory().expect("open");
    let session = store_with_session(&store).await;
    with_conn(&store, |conn| conn.execute_batch(sql::ENABLE_QUERY_ONLY)).expect("query_only");
    let err = commit_one(&store, &session, "c1")
        .await
        .expect_err("write on a query-only connection");
    assert!(
        matches!(&err, StoreError::ReadOnly(m) if m.message().contains("commit a fragment")),
        "{err:?}"
    );
    assert_eq!(store.load_log(&session).await.expect("log").len(), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn a_read_only_file_cannot_be_opened_for_writing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        store_with_session(&store).await;
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod 0400");
    // Root (as in CI containers) bypasses file permissions, so the file is only read-only for other users.
    let privileged = std::fs::OpenOptions::new().write(true).open(&path).is_ok();
    let opened = SqliteStore::open(&path, SqliteOptions::default());
    if privileged {
        eprintln!("running with privileges that bypass file permissions: a 0400 file stays writable");
        let store = opened.expect("a privileged user opens a 0400 file for writing");
        store.create_session(5).await.expect("and writes it");
    } else {
        let err = opened.expect_err("a 0400 file opened for writing");
        assert!(matches!(err, StoreError::ReadOnly(_)), "{err:?}");
    }
    // Either way it can be inspected.
    let store = SqliteStore::open_read_only(&path).expect("open read-only");
    assert!(!store.sessions().await.expect("sessions").is_empty());
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &garbage).expect("write garbage");
    let err = SqliteStore::open(&path, SqliteOptions::default()).expect_err("garbage opened");
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.message().contains("transcript.db")),
        "{err:?}"
    );
    assert_eq!(sqlite_code_behind(&err), ffi::SQLITE_NOTADB, "{err:?}");
    let err = SqliteStore::open_read_only(&path).expect_err("garbage opened read-only");
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert_eq!(
        std::fs::read(&path).expect("read back"),
        garbage,
        "the file was modified"
    );
}

#[tokio::test]
async fn a_version_1_database_is_upgraded_and_its_sessions_stay_out_of_the_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    {
        // The schema as the first release wrote it, with one session.
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch(sql::CREATE_SCHEMA_VERSION).expect("schema_version");
        conn.execute_batch(sql::MIGRATIONS[0]).expect("migration 1");
        conn.execute(sql::SET_SCHEMA_VERSION, [1]).expect("version 1");
        conn.execute("INSERT INTO sessions (id, created_at_us) VALUES ('old', 5)", [])
            .expect("an old session");
    }
    let err = SqliteStore::open_read_only(&path).expect_err("an old schema opened read-only");
    assert!(
        matches!(&err, StoreError::Open { message, .. } if message.message().contains("older")),
        "{err:?}"
    );
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open and upgrade");
    let version: i64 = with_conn(&store, |conn| {
        conn.query_row(sql::SELECT_SCHEMA_VERSION, [], |r| r.get(0))
    })
    .expect("schema version");
    assert_eq!(version, LATEST_VERSION);
    let old = SessionId::from("old");
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (&sessions[0].id, sessions[0].state, sessions[0].epoch),
        (&old, crate::SessionState::Unqueued, 0)
    );
    assert!(store
        .claim("w", Duration::from_secs(60), 10)
        .await
        .expect("claim")
        .is_empty());
    assert_eq!(
        store.append_user(&old, &UserMessage::new("still writable"), 6).await,
        Ok(1)
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        with_conn(&store, |conn| {
            conn.execute(sql::SET_SCHEMA_VERSION, [LATEST_VERSION + 7])
        })
        .expect("bump");
    }
    let expected = StoreError::NewerSchema {
        found: LATEST_VERSION + 7,
        supported: LATEST_VERSION,
    };
    assert_eq!(
        SqliteStore::open(&path, SqliteOptions::default()).map(drop),
        Err(expected.clone())
    );
    assert_eq!(SqliteStore::open_read_only(&path).map(drop), Err(expected));
}

/// The file and whatever SQLite keeps beside it (`-wal`, `-shm`, `-journal`).
fn files_of(path: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let dir = path.parent().expect("a parent directory");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| {
            let entry = entry.expect("entry");
            let bytes = std::fs::read(entry.path()).expect("read");
            (entry.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_foreign_database_is_refused_before_anything_is_written() {
    for (case, setup) in [
        (
            "tables",
            "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')",
        ),
        ("an application id", "PRAGMA application_id = 1297105476"),
        ("a user version", "PRAGMA user_version = 7"),
        (
            "only an index's table in WAL mode",
            "PRAGMA journal_mode = WAL; CREATE TABLE t (x); CREATE INDEX i ON t (x)",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = db_path(&dir);
        Connection::open(&path)
            .and_then(|conn| conn.execute_batch(setup))
            .expect("another application's database");
        let wal_mode = setup.contains("WAL");
        let before = files_of(&path);
        let err = SqliteStore::open(&path, SqliteOptions::default()).expect_err(case);
        assert!(
            matches!(&err, StoreError::Open { message, .. } if message.message().contains("schema_version")),
            "{case}: {err:?}"
        );
        let err = SqliteStore::open_read_only(&path).expect_err(case);
        assert!(matches!(err, StoreError::Open { .. }), "{case}: {err:?}");
        let after = files_of(&path);
        if wal_mode {
            // A reader of a WAL database creates the WAL's index and an empty WAL beside it (SQLite's own
            // behaviour, as for any reader); the database file itself is untouched.
            let main = |files: &[(String, Vec<u8>)]| files.iter().find(|(name, _)| name == "transcript.db").cloned();
            assert_eq!(main(&before), main(&after), "{case}: the file changed");
        } else {
            // No WAL switch (which rewrites the header), no table, no -wal or -shm: byte for byte as it was.
            assert_eq!(before, after, "{case}: the directory changed");
        }
    }
}

#[tokio::test]
async fn an_empty_file_becomes_a_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    std::fs::write(&path, b"").expect("an empty file");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("an empty file is ours to fill");
    store_with_session(&store).await;
}

#[tokio::test]
async fn a_full_database_fails_the_commit_and_keeps_earlier_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let session = {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        let session = store_with_session(&store).await;
        commit_one(&store, &session, "c1").await.expect("commit");
        session
    };
    // Cap the database at its current size: the next write that needs a page fails.
    let options = SqliteOptions {
        max_page_count: Some(1),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).expect("reopen capped");
    let big = call("big", "lookup");
    let huge = prefix("turn-y", &"x".repeat(256 * 1024), std::slice::from_ref(&big));
    let err = store
        .commit_fragment(&session, 1, &huge, &admit(&[&big]), 50)
        .await
        .expect_err("a commit beyond the size cap");
    assert!(
        matches!(&err, StoreError::Full(m) if m.message().contains(&session.0)),
        "{err:?}"
    );
    let log = store.load_log(&session).await.expect("earlier data stays readable");
    assert_eq!(log.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![1, 2]);
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(
        runs.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(),
        vec!["c1"],
        "no run was admitted"
    );
}

#[tokio::test]
async fn a_lock_held_by_another_connection_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(50),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).expect("open");
    let session = store_with_session(&store).await;

    let other = Connection::open(&path).expect("second connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let err = commit_one(&store, &session, "c1")
        .await
        .expect_err("commit while locked");
    assert!(
        matches!(&err, StoreError::Locked(m) if m.message().contains("commit a fragment")),
        "{err:?}"
    );
    assert_eq!(sqlite_code_behind(&err), ffi::SQLITE_BUSY, "{err:?}");
    // Readers are not blocked in WAL mode.
    assert_eq!(store.load_log(&session).await.expect("log").len(), 1);
    other.execute_batch("ROLLBACK").expect("release the lock");
    assert_eq!(commit_one(&store, &session, "c1").await, Ok(2));
}

#[tokio::test]
async fn a_poisoned_connection_is_an_error_not_a_panic() {
    let store = SqliteStore::open_in_memory().expect("open");
    let poisoner = store.clone();
    let joined = std::thread::spawn(move || {
        let _guard = poisoner.inner.conn.lock();
        panic!("poisoning the connection mutex on purpose");
    })
    .join();
    assert!(joined.is_err());
    let err = store.create_session(1).await.expect_err("used a poisoned connection");
    assert!(
        matches!(&err, StoreError::Backend(m) if m.message().contains("panicked")),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn paused_clock_does_not_advance_during_a_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(db_path(&dir), SqliteOptions::default()).expect("open");
    let session = store_with_session(&store).await;
    let t0 = tokio::time::Instant::now();
    let commit = commit_one(&store, &session, "c1");
    tokio::pin!(commit);
    tokio::select! {
        biased;
        committed = &mut commit => assert_eq!(committed, Ok(2)),
        () = tokio::time::sleep(Duration::from_millis(1)) => {
            panic!("virtual time advanced while a commit was in flight")
        }
    }
    assert_eq!(tokio::time::Instant::now(), t0);
}

#[test]
fn sqlite_errors_map_to_store_errors() {
    let failure = |code: i32| rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
    type Expect = fn(&StoreError) -> bool;
    let cases: Vec<(i32, Expect)> = vec![
        (ffi::SQLITE_READONLY, |e| matches!(e, StoreError::ReadOnly(_))),
        (ffi::SQLITE_READONLY_DBMOVED, |e| matches!(e, StoreError::ReadOnly(_))),
        (ffi::SQLITE_BUSY, |e| matches!(e, StoreError::Locked(_))),
        (ffi::SQLITE_BUSY_SNAPSHOT, |e| matches!(e, StoreError::Locked(_))),
        (ffi::SQLITE_LOCKED, |e| matches!(e, StoreError::Locked(_))),
        (ffi::SQLITE_FULL, |e| matches!(e, StoreError::Full(_))),
        (ffi::SQLITE_CORRUPT, |e| matches!(e, StoreError::Corrupt(_))),
        (ffi::SQLITE_NOTADB, |e| matches!(e, StoreError::Corrupt(_))),
        (ffi::SQLITE_CONSTRAINT_PRIMARYKEY, |e| {
            matches!(e, StoreError::Conflict(_))
        }),
        (ffi::SQLITE_IOERR, |e| matches!(e, StoreError::Backend(_))),
    ];
    for (code, expected) in cases {
        let err = sqlite_error(failure(code), "do the thing", None);
        assert!(expected(&err), "code {code}: {err:?}");
        assert!(err.to_string().contains("do the thing"), "{err}");
        assert_eq!(sqlite_code_behind(&err), code, "{err:?}");
    }
    let err = sqlite_error(failure(ffi::SQLITE_CANTOPEN), "open the database", Some("/x/t.db"));
    assert!(
        matches!(&err, StoreError::Open { path, .. } if path == "/x/t.db"),
        "{err:?}"
    );
    let err = sqlite_error(failure(ffi::SQLITE_NOTADB), "read the database", Some("/x/t.db"));
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.message().contains("/x/t.db")),
        "{err:?}"
    );
    let err = sqlite_error(rusqlite::Error::IntegralValueOutOfRange(0, -1), "read", None);
    assert!(matches!(err, StoreError::Decode(_)), "{err:?}");
}

/// The extended code of the `rusqlite::Error` behind `err`, checked to be the one [`StoreError::code`] gives.
fn sqlite_code_behind(err: &StoreError) -> i32 {
    let source = std::error::Error::source(err).expect("the SQLite error is the source");
    let Some(rusqlite::Error::SqliteFailure(failure, _)) = source.downcast_ref::<rusqlite::Error>() else {
        panic!("the source is not a SQLite failure: {source:?}");
    };
    assert_eq!(err.code(), Some(&DatabaseCode::Sqlite(failure.extended_code)));
    assert_eq!(err.sqlstate(), None);
    failure.extended_code
}

// ---- group commit --------------------------------------------------------------------------------------------

type Pending<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// Runs `writes` so that they reach the group-commit leader together: another thread holds the connection while
/// they are queued (the leader waits for it), then releases it.
async fn as_one_group<T: Send + 'static>(store: &SqliteStore, writes: Vec<Pending<T>>) -> Vec<T> {
    let (locked, is_locked) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let inner = Arc::clone(&store.inner);
    let holder = std::thread::spawn(move || {
        let _guard = inner.conn.lock().expect("test: connection mutex");
        locked.send(()).expect("test: locked");
        let _ = released.recv();
    });
    is_locked.recv().expect("test: the holder locked the connection");
    let tasks: Vec<_> = writes.into_iter().map(tokio::spawn).collect();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // The writes are queued; give the leader a moment to block on the connection.
    tokio::time::sleep(Duration::from_millis(20)).await;
    release.send(()).expect("test: release");
    holder.join().expect("test: holder thread");
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("test: write task"));
    }
    outcomes
}

#[tokio::test]
async fn group_commit_keeps_each_write_atomic_ordered_and_visible_to_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(db_path(&dir), SqliteOptions::default()).expect("open");
    let session = store_with_session(&store).await;
    let c1 = call("c1", "lookup");
    let c2 = call("c2", "lookup");
    let writes: Vec<Pending<Result<u64, StoreError>>> = vec![
        {
            let (store, session, c1) = (store.clone(), session.clone(), c1.clone());
            Box::pin(async move {
                store
                    .commit_fragment(
                        &session,
                        0,
                        &prefix("t", "a", std::slice::from_ref(&c1)),
                        &admit(&[&c1]),
                        10,
                    )
                    .await
            })
        },
        {
            // Admits c1 again: a conflict, rolled back alone.
            let (store, session, c1) = (store.clone(), session.clone(), c1.clone());
            Box::pin(async move {
                store
                    .commit_fragment(
                        &session,
                        0,
                        &prefix("t", "b", std::slice::from_ref(&c1)),
                        &admit(&[&c1]),
                        11,
                    )
                    .await
            })
        },
        {
            let (store, session, c2) = (store.clone(), session.clone(), c2.clone());
            Box::pin(async move {
                store
                    .commit_fragment(
                        &session,
                        0,
                        &prefix("t", "c", std::slice::from_ref(&c2)),
                        &admit(&[&c2]),
                        12,
                    )
                    .await
            })
        },
        {
            // Needs c1's run, written by the first job of the same group.
            let (store, session, c1) = (store.clone(), session.clone(), c1.clone());
            Box::pin(async move {
                store
                    .append_tool_result(&session, 0, &result(&c1, "r1"), finished(None), 13)
                    .await
            })
        },
    ];
    let outcomes = as_one_group(&store, writes).await;
    assert_eq!(outcomes[0], Ok(2));
    assert!(
        matches!(&outcomes[1], Err(StoreError::Conflict(m)) if m.message().contains("already admitted")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[2], Ok(3));
    assert_eq!(outcomes[3], Ok(4));
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(log.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].state, RunState::Finished);
    assert_eq!(runs[1].state, RunState::Admitted);
}

#[tokio::test]
async fn a_group_with_a_write_too_big_to_store_reports_each_write_truthfully() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let session = {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        store_with_session(&store).await
    };
    let options = SqliteOptions {
        max_page_count: Some(1),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).expect("reopen capped");
    let texts = ["small before", &"x".repeat(256 * 1024), "small after"];
    let writes: Vec<Pending<Result<u64, StoreError>>> = texts
        .iter()
        .map(|text| {
            let (store, session, text) = (store.clone(), session.clone(), (*text).to_owned());
            Box::pin(async move { store.append_user(&session, &UserMessage::new(text), 20).await }) as Pending<_>
        })
        .collect();
    let outcomes = as_one_group(&store, writes).await;
    assert!(matches!(&outcomes[1], Err(StoreError::Full(_))), "{outcomes:?}");
    // Whatever SQLite did with the transaction, a write that returned a seq is stored there, one that failed is
    // not, and the sequence stays gapless.
    let log = store.load_log(&session).await.expect("log");
    let seqs: Vec<u64> = log.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    for (text, outcome) in texts.iter().zip(&outcomes) {
        let stored = log
            .iter()
            .find(|m| matches!(&m.message, Message::User(user) if user.text == *text));
        match outcome {
            Ok(seq) => assert_eq!(stored.map(|m| m.seq), Some(*seq), "{text:.20}"),
            Err(_) => assert!(stored.is_none(), "{text:.20} failed but is stored"),
        }
    }
}

#[tokio::test]
async fn without_group_commit_every_write_is_its_own_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = SqliteOptions {
        group_commit: false,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(db_path(&dir), options).expect("open");
    assert!(!store.inner.group_commit);
    let session = store_with_session(&store).await;
    assert_eq!(commit_one(&store, &session, "c1").await, Ok(2));
    assert!(matches!(
        commit_one(&store, &session, "c1").await,
        Err(StoreError::Conflict(_))
    ));
    let c1 = call("c1", "lookup");
    let seq = store
        .append_tool_result(&session, 0, &result(&c1, "r"), finished(Some(11)), 12)
        .await;
    assert_eq!(seq, Ok(3));
    assert!(store.unfinished_calls(&session).await.expect("unfinished").is_empty());
}

/// The store checkpoints the WAL itself (`checkpoint.rs`), outside the commits: the WAL must stay as bounded as
/// SQLite's automatic checkpoint kept it, with group commit on (the leader checkpoints between groups) and off
/// (the write that crossed the threshold does, after its commit).
#[tokio::test]
async fn the_wal_stays_bounded_with_the_store_checkpointing_it() {
    for group_commit in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = db_path(&dir);
        let store = SqliteStore::open(
            &path,
            SqliteOptions {
                durability: Durability::Normal,
                group_commit,
                ..SqliteOptions::default()
            },
        )
        .expect("open");
        let session = store.create_session(0).await.expect("session");
        // 24 messages of 512 KB: about 3,100 pages, three times the checkpoint threshold.
        let text = "x".repeat(512 * 1024);
        for at_us in 0..24 {
            store
                .append_user(&session, &UserMessage::new(text.clone()), at_us)
                .await
                .expect("append");
        }
        let wal = std::fs::metadata(path.with_extension("db-wal"))
            .expect("the WAL file")
            .len();
        assert!(
            wal < 8 * 1024 * 1024,
            "group commit {group_commit}: the WAL grew to {wal} bytes; without checkpoints it holds 12 MB"
        );
        assert_eq!(store.load_log(&session).await.expect("log").len(), 24);
    }
}
