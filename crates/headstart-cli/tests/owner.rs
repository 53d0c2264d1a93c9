//! An owner that is alive is respected (issue 19): `headstart recover`, `run --session` and `resume --session`
//! refuse a session another live process runs, naming it, and change nothing; once that process is killed with
//! SIGKILL they proceed without `--force`; `--force` takes a session over from a hung process; a fleet worker's
//! lease is respected the same way on SQLite and PostgreSQL; on PostgreSQL `recover` waits its turn behind another
//! process's recovery; `recover --session ID` recovers or refuses that session alone. Also the SQLite edges: another application's database is refused with its bytes untouched, and the
//! read-only commands read a store in a read-only directory.
//!
//! The live run is `headstart run` against the replay server, blocked in a `fetch_url` of a page the test serves on
//! 127.0.0.1 and answers only when told: the call stays running until the test releases it (or kills the run),
//! whatever the machine's speed. Every child process is killed when its handle drops, so a failing test leaves none behind.
#![cfg(unix)]

mod support;

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use headstart::core::Message;
use headstart::store::{RunState, SessionInfo, SessionQueue, StoredMessage, ToolRun};
use headstart::{SessionId, SqliteStore, TranscriptStore, UserMessage, INTERRUPTED};
use headstart_providers::replay_server::{ReplayServer, Reply};
use headstart_store::conformance::data::commit_one;
use serde_json::{json, Value};
use support::{answer, anthropic, command, result_texts, run_to_end, workdir, DELAY, KEY};

/// How long a test waits for something that takes milliseconds (the slack is for a loaded machine).
const PATIENCE: Duration = Duration::from_secs(60);

/// What a store holds: compared before and after a refused command.
type Snapshot = (Vec<SessionInfo>, Vec<(Vec<StoredMessage>, Vec<ToolRun>)>);

async fn snapshot(store: &dyn TranscriptStore) -> Snapshot {
    let sessions = store.sessions().await.expect("sessions");
    let mut contents = Vec::new();
    for info in &sessions {
        let log = store.load_log(&info.id).await.expect("log");
        let runs = store.tool_runs(&info.id).await.expect("runs");
        contents.push((log, runs));
    }
    (sessions, contents)
}

async fn snapshot_of(db: &Path) -> Snapshot {
    snapshot(&SqliteStore::open_read_only(db).expect("the store opens read-only")).await
}

/// `headstart ARGS…` without a model, run to its end.
async fn headstart(args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"));
    command.args(args).kill_on_drop(true);
    run_to_end(&mut command).await
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A page on 127.0.0.1 that answers its first request only when [`Gate::open`] says what.
struct Gate {
    url: String,
    answer: Option<tokio::sync::oneshot::Sender<&'static str>>,
}

impl Gate {
    async fn start() -> Gate {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/slow", listener.local_addr().expect("address"));
        let (answer, told) = tokio::sync::oneshot::channel::<&'static str>();
        tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => request.extend_from_slice(&buffer[..read]),
                }
            }
            let Ok(text) = told.await else { return };
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
        Gate {
            url,
            answer: Some(answer),
        }
    }

    fn open(&mut self, text: &'static str) {
        if let Some(answer) = self.answer.take() {
            let _ = answer.send(text);
        }
    }
}

/// `headstart run` blocked in a call: `fetch_url` of a [`Gate`] nobody has opened yet.
struct LiveRun {
    dir: tempfile::TempDir,
    server: ReplayServer,
    child: tokio::process::Child,
    session: SessionId,
    gate: Gate,
}

impl LiveRun {
    /// Starts the run and waits until its call has started. `then` are the model's replies after the call.
    async fn start(then: Vec<Reply>) -> LiveRun {
        let dir = workdir();
        let gate = Gate::start().await;
        let mut replies = vec![Reply::Events(anthropic(
            Some("Reading. "),
            &[("toolu_slow", "fetch_url", json!({"url": gate.url}))],
        ))];
        replies.extend(then);
        let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
        let args = ["run", "--no-progress", "--fetch", "--fetch-allow-private", "Read it."];
        let child = command(dir.path(), &server, "anthropic", &args)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn headstart run");
        let db = dir.path().join("headstart.db");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let session = loop {
            if let Some(session) = running_call(&db).await {
                break session;
            }
            assert!(tokio::time::Instant::now() < deadline, "the call never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        LiveRun {
            dir,
            server,
            child,
            session,
            gate,
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("headstart.db")
    }

    fn db_arg(&self) -> String {
        self.db().display().to_string()
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the run is alive")
    }

    /// Stops the run (SIGSTOP): alive, holding its lock, doing nothing.
    fn hang(&self) {
        let stopped = std::process::Command::new("kill")
            .args(["-STOP", &self.pid().to_string()])
            .status()
            .expect("kill -STOP");
        assert!(stopped.success());
    }

    /// What a refusal of this run's session says.
    fn named(&self) -> String {
        format!("session {} is running in process {} on host ", self.session, self.pid())
    }

    /// Answers the call's request: the call returns `text`.
    fn release(&mut self, text: &'static str) {
        self.gate.open(text);
    }

    async fn wait(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the run ends")
            .expect("wait")
    }
}

/// The session whose call has started and has no result yet, once the response's terminal fragment is stored
/// too: from then on the run only waits for the call, and writes nothing until it returns.
async fn running_call(db: &Path) -> Option<SessionId> {
    let store = SqliteStore::open_read_only(db).ok()?;
    let session = store.sessions().await.ok()?.first()?.id.clone();
    let unfinished = store.unfinished_calls(&session).await.ok()?;
    let started = unfinished.iter().any(|call| call.run.state == RunState::Started);
    let log = store.load_log(&session).await.ok()?;
    let answered = log
        .iter()
        .any(|stored| matches!(&stored.message, Message::Assistant(fragment) if !fragment.usage.is_zero()));
    (started && answered).then_some(session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_is_refused_by_recover_run_and_resume_and_keeps_its_real_result() {
    let mut live = LiveRun::start(vec![answer()]).await;
    let (db, session) = (live.db_arg(), live.session.0.clone());
    let before = snapshot_of(&live.db()).await;

    let recover = headstart(&["recover", &db]).await;
    assert_eq!(recover.status.code(), Some(1));
    let said = stderr(&recover);
    assert!(said.contains(&live.named()), "{said}");
    assert!(
        said.contains("since 20") && said.contains("use --force if that process is gone"),
        "{said}"
    );
    assert!(said.contains("nothing was recovered"), "{said}");

    let args = ["run", "--db", &db, "--session", &session, "Again?"];
    let run = run_to_end(&mut command(live.dir.path(), &live.server, "anthropic", &args)).await;
    assert_eq!(run.status.code(), Some(1));
    assert!(stderr(&run).contains(&live.named()), "{}", stderr(&run));

    let args = ["resume", &db, "--session", &session];
    let resume = run_to_end(&mut command(live.dir.path(), &live.server, "anthropic", &args)).await;
    assert_eq!(resume.status.code(), Some(1));
    assert!(stderr(&resume).contains(&live.named()), "{}", stderr(&resume));

    assert_eq!(
        snapshot_of(&live.db()).await,
        before,
        "a refused command changed the store"
    );
    assert_eq!(
        live.server.model_requests().len(),
        1,
        "a refused command asked the model"
    );

    // The live run was not disturbed: its call returns its real result and the run completes.
    live.release("the real result");
    let status = live.wait().await;
    assert!(status.success(), "{status}");
    let store = SqliteStore::open_read_only(live.db()).expect("open");
    let log = store.load_log(&live.session).await.expect("log");
    assert_eq!(result_texts(&log), ["the real result"]);
    assert_eq!(live.server.model_requests().len(), 2);
    let lock = PathBuf::from(format!("{db}.owners")).join(format!("{session}.lock"));
    assert!(!lock.exists(), "the run deleted its lock file when it ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_recover_and_run_session_proceed_without_force() {
    // After the kill: the continued run's answer.
    let mut live = LiveRun::start(vec![answer()]).await;
    let (db, session) = (live.db_arg(), live.session.0.clone());
    live.child.start_kill().expect("SIGKILL");
    assert_eq!(live.wait().await.signal(), Some(9));

    // The lock died with its process: no --force needed.
    let recover = headstart(&["recover", "--json", &db]).await;
    assert!(recover.status.success(), "{}", stderr(&recover));
    let recovered: Value = serde_json::from_slice(&recover.stdout).expect("JSON");
    assert_eq!(recovered.as_array().map(Vec::len), Some(1), "{recovered}");
    assert_eq!(recovered[0]["call_id"], "toolu_slow");

    let args = ["run", "--no-progress", "--session", &session, "Again?"];
    let run = run_to_end(&mut command(live.dir.path(), &live.server, "anthropic", &args)).await;
    assert!(run.status.success(), "{}", stderr(&run));
    let store = SqliteStore::open_read_only(live.db()).expect("open");
    let log = store.load_log(&live.session).await.expect("log");
    assert_eq!(result_texts(&log), [INTERRUPTED]);
    assert_eq!(live.server.model_requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_takes_a_session_over_from_a_hung_process() {
    let mut live = LiveRun::start(Vec::new()).await;
    let db = live.db_arg();
    let pid = live.pid().to_string();
    // Hung: alive, holding its lock, doing nothing.
    live.hang();

    let refused = headstart(&["recover", &db]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains(&live.named()), "{}", stderr(&refused));

    let forced = headstart(&["recover", "--force", "--json", &db]).await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    let said = stderr(&forced);
    assert!(
        said.contains(&format!(
            "took session {} over from process {pid} on host ",
            live.session
        )),
        "{said}"
    );
    let recovered: Value = serde_json::from_slice(&forced.stdout).expect("JSON");
    assert_eq!(recovered.as_array().map(Vec::len), Some(1), "{recovered}");
    let store = SqliteStore::open_read_only(live.db()).expect("open");
    assert_eq!(
        result_texts(&store.load_log(&live.session).await.expect("log")),
        [INTERRUPTED]
    );

    live.child.start_kill().expect("SIGKILL");
    assert_eq!(live.wait().await.signal(), Some(9));
}

/// One session's log and tool runs.
async fn contents_of(db: &Path, session: &SessionId) -> (Vec<StoredMessage>, Vec<ToolRun>) {
    let store = SqliteStore::open_read_only(db).expect("the store opens read-only");
    let log = store.load_log(session).await.expect("log");
    let runs = store.tool_runs(session).await.expect("runs");
    (log, runs)
}

/// `recover --session ID` (issue 33) considers that session only: with two sessions holding unfinished calls, one
/// of them run by a live process, the other is recovered and the held one left as it was; naming the held one is
/// refused and writes nothing; an unknown id is an error; `--force` takes the named session over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_session_recovers_one_session_whoever_holds_the_others() {
    let mut live = LiveRun::start(Vec::new()).await;
    let (db, held) = (live.db_arg(), live.session.clone());
    // A second session whose process is gone: a call admitted, no result, no lock.
    let free = {
        let store = SqliteStore::open(live.db(), Default::default()).expect("open");
        let session = headstart_store::conformance::data::store_with_session(&store).await;
        commit_one(&store, &session, "c1").await.expect("commit");
        session
    };
    let before = snapshot_of(&live.db()).await;
    assert_eq!(before.0.len(), 2, "two sessions");

    // Every session, or the held one by name: refused, nothing written.
    for args in [vec!["recover", &db], vec!["recover", "--session", &held.0, &db]] {
        let refused = headstart(&args).await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let said = stderr(&refused);
        assert!(said.contains(&live.named()), "{args:?}: {said}");
        assert!(said.contains("nothing was recovered"), "{args:?}: {said}");
        assert!(!said.contains(&free.0), "{args:?}: {said}");
        assert_eq!(snapshot_of(&live.db()).await, before, "{args:?} changed the store");
    }

    let unknown = headstart(&["recover", "--session", "nope", &db]).await;
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        stderr(&unknown).trim_end(),
        format!("headstart recover: {db} has no session nope")
    );
    assert_eq!(snapshot_of(&live.db()).await, before, "an unknown id changed the store");

    // The free one by name: recovered, the held one untouched.
    let held_before = contents_of(&live.db(), &held).await;
    let recovered = headstart(&["recover", "--session", &free.0, "--json", &db]).await;
    assert!(recovered.status.success(), "{}", stderr(&recovered));
    let calls: Value = serde_json::from_slice(&recovered.stdout).expect("JSON");
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
    assert_eq!(calls[0]["session"], free.0.as_str());
    assert_eq!(calls[0]["call_id"], "c1");
    let (log, _) = contents_of(&live.db(), &free).await;
    assert_eq!(result_texts(&log), [INTERRUPTED]);
    assert_eq!(
        contents_of(&live.db(), &held).await,
        held_before,
        "the held session changed"
    );

    let again = headstart(&["recover", "--session", &free.0, &db]).await;
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim_end(),
        format!("nothing to recover: every admitted call of session {free} in {db} has a result")
    );

    // Hung: `--force` takes the named session over.
    live.hang();
    let forced = headstart(&["recover", "--session", &held.0, "--force", "--json", &db]).await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    let calls: Value = serde_json::from_slice(&forced.stdout).expect("JSON");
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
    assert_eq!(calls[0]["session"], held.0.as_str());
    assert_eq!(calls[0]["call_id"], "toolu_slow");

    live.child.start_kill().expect("SIGKILL");
    assert_eq!(live.wait().await.signal(), Some(9));
}

/// A fleet worker holds a session with an unfinished call: `recover` refuses (even with `--force`) while the lease
/// is live, and after it expired too (the next worker's claim recovers it), changing nothing.
async fn a_workers_lease_is_respected(store: Arc<dyn SessionQueue>, url: &str) {
    let session = store.submit(&UserMessage::new("go"), 1).await.expect("submit");
    let claims = store.claim("w1", Duration::from_secs(600), 1).await.expect("claim");
    let lease = claims[0].lease.clone();
    commit_one(store.fenced(&lease).as_ref(), &session, "c1")
        .await
        .expect("the worker admits a call");
    let before = snapshot(store.as_ref()).await;
    for args in [vec!["recover", url], vec!["recover", "--force", url]] {
        let refused = headstart(&args).await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let said = stderr(&refused);
        assert!(
            said.contains(&format!(
                "session {session} is held by worker w1 (epoch 1) under a lease valid until 20"
            )),
            "{said}"
        );
        assert!(!said.contains("--force"), "a lease cannot be forced: {said}");
    }
    store.renew(&[lease], Duration::ZERO).await.expect("renew to now");
    let expired = headstart(&["recover", url]).await;
    assert_eq!(expired.status.code(), Some(1));
    let said = stderr(&expired);
    assert!(said.contains("whose lease expired at"), "{said}");
    assert!(said.contains("the next worker to claim it recovers it"), "{said}");
    // The renewal moved the lease; nothing else changed.
    let (mut after, mut before) = (snapshot(store.as_ref()).await, before);
    after.0[0].lease_expires_at_us = None;
    before.0[0].lease_expires_at_us = None;
    assert_eq!(after, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_lease_is_respected_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleet.db");
    let store = SqliteStore::open(&db, Default::default()).expect("open");
    a_workers_lease_is_respected(Arc::new(store), &db.display().to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_lease_is_respected_on_postgres() {
    let Some(database) = headstart_postgres::testing::database().await else {
        return;
    };
    let store = headstart_postgres::PgStore::connect(database.url(), Default::default())
        .await
        .expect("connect");
    a_workers_lease_is_respected(Arc::new(store), database.url()).await;
}

/// On PostgreSQL, `recover` takes the session's advisory lock, as the packages' `recover` does: while another
/// process holds it (here this test's own hold, on its own connection), a session with an unfinished call is refused
/// naming that process, even with `--force`, and nothing is written; once the hold is dropped (its connection goes,
/// as it would with a process that died), the call is recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_on_postgres_waits_its_turn_behind_another_recovery() {
    let Some(database) = headstart_postgres::testing::database().await else {
        return;
    };
    let url = database.url();
    let store = headstart_postgres::PgStore::connect(url, Default::default())
        .await
        .expect("connect");
    let session = headstart_store::conformance::data::store_with_session(&store).await;
    commit_one(&store, &session, "c1").await.expect("commit");
    let hold = headstart_postgres::session_locks(url)
        .take(&session, 1)
        .await
        .expect("this test holds the session");
    let before = snapshot(&store).await;
    for args in [
        vec!["recover", url],
        vec!["recover", "--force", "--session", &session.0, url],
    ] {
        let refused = headstart(&args).await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let said = stderr(&refused);
        assert!(
            said.contains(&format!("process {}", std::process::id())),
            "{args:?}: {said}"
        );
        assert!(said.contains("its lock ends with that process's connection"), "{said}");
        assert!(!said.contains("--force"), "a database lock cannot be forced: {said}");
        assert_eq!(snapshot(&store).await, before, "{args:?} changed the store");
    }
    drop(hold);
    let recovered = headstart(&["recover", "--json", url]).await;
    assert!(recovered.status.success(), "{}", stderr(&recovered));
    let calls: Value = serde_json::from_slice(&recovered.stdout).expect("JSON");
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
    assert_eq!(calls[0]["call_id"], "c1");
    assert_eq!(
        result_texts(&store.load_log(&session).await.expect("log")),
        [INTERRUPTED]
    );
}

/// FNV-1a of `bytes`: a file's fingerprint, short enough to print when files differ.
fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every entry in `dir`: its name, size and fingerprint (0 for a directory), sorted by name.
fn files_in(dir: &Path) -> Vec<(String, u64, u64)> {
    let mut files: Vec<(String, u64, u64)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| {
            let entry = entry.expect("entry");
            let bytes = if entry.path().is_file() {
                std::fs::read(entry.path()).expect("read")
            } else {
                Vec::new()
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, bytes.len() as u64, fingerprint(&bytes))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_applications_database_is_refused_byte_for_byte_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    rusqlite::Connection::open(&db)
        .and_then(|conn| conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');"))
        .expect("another application's database");
    let before = files_in(dir.path());
    assert_eq!(before.len(), 1, "{before:?}");
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("t.svg").display().to_string();
    let db_arg = db.display().to_string();
    for args in [
        vec!["recover", &db_arg],
        vec!["inspect", &db_arg],
        vec!["timeline", &db_arg, "--out", &svg],
    ] {
        let refused = headstart(&args).await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&refused).contains("not a headstart transcript store"),
            "{}",
            stderr(&refused)
        );
    }
    // `run` opens its store before it asks the model anything (nothing listens at that URL).
    let run = run_to_end(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
            .env(KEY, "test-key")
            .args([
                "run",
                "--db",
                &db_arg,
                "--provider",
                "anthropic",
                "--model",
                "m",
                "--api-key-env",
                KEY,
            ])
            .args(["--base-url", "http://127.0.0.1:9/v1", "Hi"])
            .kill_on_drop(true),
    )
    .await;
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr(&run).contains("not a headstart transcript store"),
        "{}",
        stderr(&run)
    );
    // No WAL switch, no table, no -wal, -shm or lock directory: the directory is as it was, byte for byte.
    assert_eq!(files_in(dir.path()), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_file_is_refused_byte_for_byte_untouched_naming_it_and_what_can_be_done() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agents.db");
    // A SQLite header followed by garbage: what a disk fault, never a killed process, leaves.
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&db, &bytes).expect("write the damaged file");
    let before = files_in(dir.path());
    let db_arg = db.display().to_string();
    for args in [
        vec!["recover", &db_arg],
        vec!["recover", &db_arg, "--session", "0192"],
        vec!["inspect", &db_arg],
        vec![
            "resume",
            &db_arg,
            "--session",
            "0192",
            "--provider",
            "anthropic",
            "--model",
            "m",
        ],
    ] {
        let refused = run_to_end(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
                .env("ANTHROPIC_API_KEY", "test-key")
                .args(&args)
                .kill_on_drop(true),
        )
        .await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let said = stderr(&refused);
        assert!(said.contains(&db_arg), "{args:?} names the file: {said}");
        assert!(said.contains("corrupt"), "{args:?}: {said}");
        assert!(said.contains("nothing was written"), "{args:?}: {said}");
        assert!(said.contains(".recover"), "{args:?} says what can be done: {said}");
        assert!(!said.contains("panicked"), "{said}");
    }
    assert_eq!(files_in(dir.path()), before);
}

/// How to run a command so that file permissions bind it: as is when they already do (not root), else in a new
/// user namespace (`unshare -U`), where root keeps its user id but loses the capability to override permissions.
/// `None` when neither works: the caller says the check is skipped.
fn unprivileged(probe_dir: &Path) -> Option<Vec<String>> {
    let probe = probe_dir.join("probe");
    let denied = |prefix: &[String]| {
        let mut words = prefix.to_vec();
        words.extend(["touch".to_owned(), probe.display().to_string()]);
        let status = std::process::Command::new(&words[0])
            .args(&words[1..])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&probe);
        status.is_ok_and(|status| !status.success())
    };
    [Vec::new(), vec!["unshare".to_owned(), "-U".to_owned()]]
        .into_iter()
        .find(|prefix| denied(prefix))
}

/// `headstart ARGS…` behind `prefix`.
async fn headstart_behind(prefix: &[String], args: &[&str]) -> Output {
    let mut command = match prefix.split_first() {
        Some((program, rest)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(rest).arg(env!("CARGO_BIN_EXE_headstart"));
            command
        }
        None => tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart")),
    };
    command.args(args).kill_on_drop(true);
    run_to_end(&mut command).await
}

/// Sets `dir`'s permission bits.
fn chmod(dir: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_timeline_read_a_store_in_a_read_only_directory() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("headstart.db");
    let session = {
        let store = SqliteStore::open(&db, Default::default()).expect("open");
        let session = headstart_store::conformance::data::store_with_session(&store).await;
        commit_one(&store, &session, "c1").await.expect("commit");
        session
    };
    // The store's connection may close on another thread a moment later; a checkpoint of our own leaves the file
    // complete and no WAL beside it, as a clean close does.
    rusqlite::Connection::open(&db)
        .and_then(|conn| conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)"))
        .expect("checkpoint");
    let db_arg = db.display().to_string();
    let svg = root.path().join("t.svg").display().to_string();

    // In a writable directory: the file stays byte for byte as it was (no journal mode change, no write).
    let file_before = fingerprint(&std::fs::read(&db).expect("read"));
    for args in [vec!["inspect", &db_arg], vec!["timeline", &db_arg, "--out", &svg]] {
        let read = headstart(&args).await;
        assert!(read.status.success(), "{args:?}: {}", stderr(&read));
    }
    assert_eq!(
        fingerprint(&std::fs::read(&db).expect("read")),
        file_before,
        "a read-only command wrote the file"
    );

    // In a read-only directory, where SQLite cannot create the WAL's index.
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db_arg}{side}"));
    }
    let before = files_in(&dir);
    chmod(&dir, 0o555);
    let Some(prefix) = unprivileged(&dir) else {
        chmod(&dir, 0o755);
        eprintln!(
            "SKIPPED: file permissions cannot bind this test process (root without `unshare -U`): the read-only \
             directory case is covered only by the fallback's unit test"
        );
        return;
    };
    eprintln!("read-only directory enforced with prefix {prefix:?}");
    let inspected = headstart_behind(&prefix, &["inspect", &db_arg]).await;
    let drawn = headstart_behind(&prefix, &["timeline", &db_arg, "--out", &svg]).await;
    chmod(&dir, 0o755);
    assert!(inspected.status.success(), "{}", stderr(&inspected));
    assert!(
        String::from_utf8_lossy(&inspected.stdout).contains(&format!("session {session}")),
        "{}",
        String::from_utf8_lossy(&inspected.stdout)
    );
    assert!(drawn.status.success(), "{}", stderr(&drawn));
    assert_eq!(files_in(&dir), before, "the read-only directory changed");

    // A WAL holding commits the file lacks cannot be read without its index: refused, not read stale.
    let pending = root.path().join("pending");
    std::fs::create_dir(&pending).unwrap();
    {
        let store = SqliteStore::open(&db, Default::default()).expect("open");
        store
            .append_user(&session, &UserMessage::new("only in the WAL"), 9)
            .await
            .expect("write");
        // Copied while the store is open: the WAL still holds the commit.
        std::fs::copy(&db, pending.join("headstart.db")).expect("copy");
        std::fs::copy(format!("{db_arg}-wal"), pending.join("headstart.db-wal")).expect("copy the WAL");
    }
    chmod(&pending, 0o555);
    let pending_db = pending.join("headstart.db").display().to_string();
    let refused = headstart_behind(&prefix, &["inspect", &pending_db]).await;
    chmod(&pending, 0o755);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("holds commits the file lacks"),
        "{}",
        stderr(&refused)
    );
}
