//! Store faults (contract §3.3, §7): a fragment commit that fails admits nothing from that fragment, ends the response
//! with an error naming the store failure, and leaves the transcript holding everything committed before.
//!
//! Faults, each injected at a chosen fragment commit by a store wrapper ([`Faulty`]) around a real [`SqliteStore`]
//! file:
//! - read-only: the connection is switched to `PRAGMA query_only` (SQLite answers `SQLITE_READONLY`, as for a
//!   database that became read-only while open; a `chmod` would not do, since tests may run as root);
//! - full: the database is capped with a tiny `max_page_count` and the failing fragment is too big for it
//!   (`SQLITE_FULL`, as on a full disk);
//! - locked: another connection holds the write lock past the store's short busy timeout (`SQLITE_BUSY`), either
//!   for the rest of the run or released right after the failed commit.
//!
//! Each runs a whole agent (one model response) on tokio's paused clock with hand-written tools that record when
//! their body starts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::core::StopReason;
use headstart::store::{Durability, Layered, SqliteOptions, StoreError, Write, WriteFuture, WriteLayer, Written};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, Engine, Message, ResponseOutcome, SessionId,
    SqliteStore, TokioClock, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore, UserMessage,
};
use headstart_sim::sim_model::SimModel;
use headstart_testkit::fixtures::deltas::delta_log;
use serde_json::json;

// ---- tools ----------------------------------------------------------------------------------------------------

/// A tool that records each call whose body starts, then works for 100 ms (virtual) unless cancelled.
struct Probe {
    spec: ToolSpec,
    started: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _args: Arguments, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.started.lock().unwrap().push(ctx.call_id.clone());
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => Ok(ToolOutput::text("done")),
            () = ctx.cancel.cancelled() => Err(ToolError::new("cancelled")),
        }
    }
}

// ---- the faulty store -----------------------------------------------------------------------------------------

type CommitHook = Box<dyn Fn(usize) + Send + Sync>;

/// A write layer around a [`SqliteStore`] that calls `before` / `after` with the 1-based number of each fragment
/// commit.
struct FaultAt {
    sqlite: SqliteStore,
    commits: AtomicUsize,
    before: CommitHook,
    after: CommitHook,
}

impl WriteLayer for FaultAt {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        if !matches!(write, Write::CommitFragment { .. }) {
            return next;
        }
        let number = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        (self.before)(number);
        Box::pin(async move {
            let written = next.await;
            (self.after)(number);
            written
        })
    }
}

type Faulty = Layered<FaultAt>;

// ---- the model's response -------------------------------------------------------------------------------------

/// `a1` (async) is sealed at 5 ms and committed with a short text; then, optionally, a big text block; `a2`
/// (async) is sealed at 20 ms (the second commit); the sync `s1` at 30 ms; `done(tool_use)` at 40 ms.
fn response(big_text: Option<usize>) -> Vec<TimedDelta> {
    let mut lines = vec![
        json!({"at_ms": 0, "type": "start"}),
        json!({"at_ms": 1, "type": "text_start", "index": 0}),
        json!({"at_ms": 1, "type": "text_delta", "index": 0, "delta": "first"}),
        json!({"at_ms": 2, "type": "text_end", "index": 0}),
        json!({"at_ms": 3, "type": "toolcall_start", "index": 1, "id": "a1", "name": "probe"}),
        json!({"at_ms": 4, "type": "toolcall_delta", "index": 1, "delta": "{\"n\": 1}"}),
        json!({"at_ms": 5, "type": "toolcall_end", "index": 1}),
    ];
    let mut index = 2;
    if let Some(size) = big_text {
        lines.extend([
            json!({"at_ms": 10, "type": "text_start", "index": index}),
            json!({"at_ms": 10, "type": "text_delta", "index": index, "delta": "x".repeat(size)}),
            json!({"at_ms": 11, "type": "text_end", "index": index}),
        ]);
        index += 1;
    }
    lines.extend([
        json!({"at_ms": 15, "type": "toolcall_start", "index": index, "id": "a2", "name": "probe"}),
        json!({"at_ms": 20, "type": "toolcall_end", "index": index}),
        json!({"at_ms": 25, "type": "toolcall_start", "index": index + 1, "id": "s1", "name": "save"}),
        json!({"at_ms": 30, "type": "toolcall_end", "index": index + 1}),
        json!({"at_ms": 40, "type": "done", "stop_reason": "tool_use", "usage": {"input": 10, "output": 20}}),
    ]);
    delta_log(&lines)
}

/// Only a sync call: the first commit is the terminal fragment.
fn sync_only() -> Vec<TimedDelta> {
    let lines = [
        json!({"at_ms": 0, "type": "start"}),
        json!({"at_ms": 1, "type": "toolcall_start", "index": 0, "id": "s1", "name": "save"}),
        json!({"at_ms": 2, "type": "toolcall_end", "index": 0}),
        json!({"at_ms": 3, "type": "done", "stop_reason": "tool_use", "usage": {}}),
    ];
    delta_log(&lines)
}

// ---- running and checking -------------------------------------------------------------------------------------

struct Run {
    session: SessionId,
    started: Vec<String>,
    events: Vec<AgentEvent>,
}

impl Run {
    fn turn_outcome(&self) -> &ResponseOutcome {
        self.events
            .iter()
            .find_map(|event| match event {
                AgentEvent::ResponseEnd { outcome, .. } => Some(outcome),
                _ => None,
            })
            .expect("a ResponseEnd")
    }

    fn agent_stop(&self) -> &AgentStop {
        match self.events.last() {
            Some(AgentEvent::AgentEnd { stop }) => stop,
            other => panic!("the last event is not AgentEnd: {other:?}"),
        }
    }
}

async fn run_agent(store: Arc<dyn TranscriptStore>, turn: Vec<TimedDelta>) -> Run {
    let started = Arc::new(Mutex::new(Vec::new()));
    let toolbox = Toolbox::new()
        .with(Probe {
            spec: ToolSpec::new("probe").early(true),
            started: Arc::clone(&started),
        })
        .and_then(|toolbox| {
            toolbox.with(Probe {
                spec: ToolSpec::new("save"),
                started: Arc::clone(&started),
            })
        })
        .expect("toolbox");
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .clock(Arc::new(TokioClock::starting_now()))
        .build();
    let agent = Agent::new(engine, Arc::new(SimModel::new(vec![turn])));
    let session = store.create_session(0).await.expect("create session");
    let events: Vec<AgentEvent> = agent
        .run(&session, UserMessage::new("go"), CancellationToken::new())
        .collect()
        .await;
    let started = started.lock().unwrap().clone();
    Run {
        session,
        started,
        events,
    }
}

fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("transcript.db")
}

fn options() -> SqliteOptions {
    SqliteOptions {
        durability: Durability::Normal,
        busy_timeout: Duration::from_millis(50),
        ..SqliteOptions::default()
    }
}

fn faulty(sqlite: SqliteStore, before: CommitHook, after: CommitHook) -> Arc<Faulty> {
    let inner: Arc<dyn TranscriptStore> = Arc::new(sqlite.clone());
    Arc::new(Layered::new(
        inner,
        FaultAt {
            sqlite,
            commits: AtomicUsize::new(0),
            before,
            after,
        },
    ))
}

fn no_hook() -> CommitHook {
    Box::new(|_| {})
}

/// The assertions every fault shares. `failed_calls` are the calls of the fragment whose commit failed (and of
/// everything after it in the response): none may execute, none may be admitted.
async fn check_fault(run: &Run, path: &Path, store_failure: &str, failed_calls: &[&str]) {
    // Only the call committed before the fault executed.
    assert_eq!(run.started, ["a1"], "calls that executed");

    // The response ends with an error outcome naming the store failure; so does the agent.
    let outcome = run.turn_outcome();
    assert_eq!(outcome.stop_reason, StopReason::Error, "{outcome:?}");
    let failure = outcome
        .store_failure
        .as_deref()
        .expect("a store failure in the outcome");
    assert!(
        failure.contains(store_failure) && failure.contains("commit a fragment"),
        "store failure: {failure}"
    );
    let error = outcome.error.as_deref().expect("an error message in the outcome");
    assert!(error.contains(store_failure), "response error: {error}");
    match run.agent_stop() {
        AgentStop::Error(message) => assert!(message.contains(store_failure), "agent stop: {message}"),
        other => panic!("agent stop {other:?}"),
    }

    // No execution event for a call of the failed fragment: a call that gets a result without running has its
    // start immediately before its end (contract §5.7), never an update, and its result is an error.
    for (position, event) in run.events.iter().enumerate() {
        if let AgentEvent::ToolExecutionStart { call } = event {
            if failed_calls.contains(&call.id.as_str()) {
                let next = run.events.get(position + 1);
                assert!(
                    matches!(next, Some(AgentEvent::ToolExecutionEnd { tool_call_id, is_error: true, .. })
                        if *tool_call_id == call.id),
                    "{} has an execution start: {:?}",
                    call.id,
                    &run.events[position..]
                );
            }
        }
    }

    // The transcript still holds everything committed before, and nothing from the failed fragment was admitted.
    let store = SqliteStore::open(path, options()).expect("reopen the database");
    let log = store.load_log(&run.session).await.expect("load the log");
    assert!(log.len() >= 2, "log {log:?}");
    assert!(matches!(&log[0].message, Message::User(user) if user.text == "go"));
    let Message::Assistant(first) = &log[1].message else {
        panic!("seq 2 is not the first prefix: {:?}", log[1]);
    };
    let first_calls: Vec<&str> = first.tool_calls().map(|call| call.id.as_str()).collect();
    assert_eq!(first_calls, ["a1"], "the first prefix");
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let seqs: Vec<u64> = log.iter().map(|stored| stored.seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>(), "sequence numbers");
    let runs = store.tool_runs(&run.session).await.expect("tool runs");
    let admitted: Vec<&str> = runs.iter().map(|run| run.call_id.as_str()).collect();
    assert_eq!(admitted, ["a1"], "admitted calls");
    assert_eq!(runs[0].fragment_seq, 2);

    // Whatever was stored after the fault is valid transcript: every tool result follows its call, and a call of
    // the failed fragment that is stored at all is in an errored terminal fragment with a "not executed" result.
    let mut calls_so_far: Vec<String> = Vec::new();
    for stored in &log {
        match &stored.message {
            Message::Assistant(fragment) => {
                for call in fragment.tool_calls() {
                    if failed_calls.contains(&call.id.as_str()) {
                        assert_eq!(
                            fragment.stop_reason,
                            StopReason::Error,
                            "{call:?} stored in {fragment:?}"
                        );
                    }
                    calls_so_far.push(call.id.clone());
                }
            }
            Message::ToolResult(result) => {
                assert!(
                    calls_so_far.contains(&result.tool_call_id),
                    "orphan result for {} (its call is not stored): {log:#?}",
                    result.tool_call_id
                );
                if failed_calls.contains(&result.tool_call_id.as_str()) {
                    assert!(
                        result.is_error && result.text().starts_with("not executed"),
                        "{result:?}"
                    );
                }
            }
            Message::User(_) => {}
        }
    }
}

// ---- the faults -----------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_read_only_database_fails_the_commit_and_admits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inner = SqliteStore::open(db_path(&dir), options()).unwrap();
    let hook = inner.clone();
    let before: CommitHook = Box::new(move |number| {
        if number == 2 {
            hook.set_query_only(true).expect("query_only");
        }
    });
    let store = faulty(inner, before, no_hook());
    let run = run_agent(store.clone(), response(None)).await;
    store.layer().sqlite.set_query_only(false).unwrap();
    check_fault(&run, &db_path(&dir), "transcript store is read-only", &["a2", "s1"]).await;
}

#[tokio::test(start_paused = true)]
async fn a_read_only_database_at_the_terminal_fragment_runs_no_sync_call() {
    let dir = tempfile::tempdir().unwrap();
    let inner = SqliteStore::open(db_path(&dir), options()).unwrap();
    let hook = inner.clone();
    let store = faulty(
        inner,
        Box::new(move |_| hook.set_query_only(true).expect("query_only")),
        no_hook(),
    );
    let run = run_agent(store.clone(), sync_only()).await;
    store.layer().sqlite.set_query_only(false).unwrap();
    assert!(run.started.is_empty(), "executed: {:?}", run.started);
    let outcome = run.turn_outcome();
    assert!(
        outcome
            .store_failure
            .as_deref()
            .is_some_and(|failure| failure.contains("transcript store is read-only")),
        "{outcome:?}"
    );
    assert!(matches!(run.agent_stop(), AgentStop::Error(message) if message.contains("read-only")));
    let log = store.load_log(&run.session).await.unwrap();
    assert_eq!(log.len(), 1, "only the prompt is stored: {log:?}");
    assert!(store.tool_runs(&run.session).await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_full_database_fails_the_commit_and_admits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The cap never goes below the current size: the schema's pages and nothing more. The first commits fit in
    // the tables' existing pages; a fragment with 64 KiB of text does not.
    let capped = SqliteOptions {
        max_page_count: Some(1),
        ..options()
    };
    let inner = SqliteStore::open(db_path(&dir), capped).unwrap();
    let store = faulty(inner, no_hook(), no_hook());
    let run = run_agent(store.clone(), response(Some(64 * 1024))).await;
    check_fault(&run, &db_path(&dir), "transcript store is full", &["a2", "s1"]).await;
}

type LockHolder = Arc<Mutex<Option<rusqlite::Connection>>>;

/// Hooks that take the database's write lock from another connection before commit `at`, and (when `release`)
/// give it back right after that commit.
fn lock_at(path: PathBuf, at: usize, release: bool) -> (LockHolder, CommitHook, CommitHook) {
    let holder: LockHolder = Arc::new(Mutex::new(None));
    let take = Arc::clone(&holder);
    let before: CommitHook = Box::new(move |number| {
        if number == at {
            let conn = rusqlite::Connection::open(&path).expect("second connection");
            conn.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
            *take.lock().unwrap() = Some(conn);
        }
    });
    let give_back = Arc::clone(&holder);
    let after: CommitHook = Box::new(move |number| {
        if release && number == at {
            if let Some(conn) = give_back.lock().unwrap().take() {
                conn.execute_batch("ROLLBACK").expect("release the lock");
            }
        }
    });
    (holder, before, after)
}

#[tokio::test(start_paused = true)]
async fn a_locked_database_fails_the_commit_and_admits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inner = SqliteStore::open(db_path(&dir), options()).unwrap();
    let (holder, before, after) = lock_at(db_path(&dir), 2, false);
    let store = faulty(inner, before, after);
    let run = run_agent(store, response(None)).await;
    // The lock was held for the rest of the run; release it to read the transcript.
    let conn = holder.lock().unwrap().take().expect("the lock was taken");
    conn.execute_batch("ROLLBACK").unwrap();
    drop(conn);
    check_fault(&run, &db_path(&dir), "transcript store is locked", &["a2", "s1"]).await;
}

#[tokio::test(start_paused = true)]
async fn a_lock_released_after_the_failed_commit_still_admits_nothing() {
    // The lock clears right after the failed commit: the terminal fragment (an error holding a2; the stream ended
    // before s1 arrived) is then stored and a2 gets a "not executed" result, but it never runs.
    let dir = tempfile::tempdir().unwrap();
    let inner = SqliteStore::open(db_path(&dir), options()).unwrap();
    let (holder, before, after) = lock_at(db_path(&dir), 2, true);
    let store = faulty(inner, before, after);
    let run = run_agent(store, response(None)).await;
    assert!(holder.lock().unwrap().is_none());
    check_fault(&run, &db_path(&dir), "transcript store is locked", &["a2", "s1"]).await;
    let store = SqliteStore::open(db_path(&dir), options()).unwrap();
    let log = store.load_log(&run.session).await.unwrap();
    let terminal = log
        .iter()
        .find_map(|stored| match &stored.message {
            Message::Assistant(fragment) if fragment.stop_reason == StopReason::Error => Some(fragment),
            _ => None,
        })
        .expect("the errored terminal fragment is stored");
    let calls: Vec<&str> = terminal.tool_calls().map(|call| call.id.as_str()).collect();
    // The stream ended at the failed commit, so s1 was never received.
    assert_eq!(calls, ["a2"]);
    assert!(terminal
        .error_message
        .as_deref()
        .is_some_and(|message| message.contains("transcript store is locked")));
    assert!(store.unfinished_calls(&run.session).await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_terminal_fragment_that_could_not_be_stored_leaves_no_orphan_result() {
    // The lock clears right after the terminal fragment's commit failed. Its sync call s1 never runs, and its
    // "not executed" result is only shown, not stored: the call is not in the transcript, and a result without
    // its call would make the model context invalid.
    let dir = tempfile::tempdir().unwrap();
    let inner = SqliteStore::open(db_path(&dir), options()).unwrap();
    let (_holder, before, after) = lock_at(db_path(&dir), 1, true);
    let store = faulty(inner, before, after);
    let run = run_agent(store.clone(), sync_only()).await;
    assert!(run.started.is_empty(), "executed: {:?}", run.started);
    assert!(
        matches!(run.agent_stop(), AgentStop::Error(message) if message.contains("transcript store is locked")),
        "{:?}",
        run.agent_stop()
    );
    let shown = run.events.iter().any(|event| {
        matches!(event, AgentEvent::MessageEnd { seq: None, message }
            if matches!(message.as_ref(), Message::ToolResult(result) if result.tool_call_id == "s1"))
    });
    assert!(shown, "the result of s1 is shown as not stored: {:?}", run.events);
    let log = store.load_log(&run.session).await.unwrap();
    assert_eq!(log.len(), 1, "only the prompt is stored: {log:?}");
    assert!(store.tool_runs(&run.session).await.unwrap().is_empty());
}

// ---- a failed result write ------------------------------------------------------------------------------------

/// Fails the first tool-result write, as a lock that did not clear in time would.
#[derive(Default)]
struct FailFirstResult {
    failed: AtomicUsize,
}

impl WriteLayer for FailFirstResult {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        if matches!(write, Write::AppendToolResult { .. }) && self.failed.fetch_add(1, Ordering::SeqCst) == 0 {
            return Box::pin(async { Err(StoreError::Locked("injected: the result could not be written".into())) });
        }
        next
    }
}

/// `a1` and `a2` run early; `a1`'s result write fails at 105 ms. `a3` (async, sealed after that) and the sync `s1`
/// end up in the terminal fragment, which is stored: they are admitted, so each must get a result — "cancelled
/// before start", since the run is ending on the store failure — and neither may start.
#[tokio::test(start_paused = true)]
async fn after_a_failed_result_write_later_calls_never_start_and_all_admitted_calls_get_results() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(db_path(&dir), options()).unwrap();
    let store: Arc<dyn TranscriptStore> = Arc::new(Layered::new(
        Arc::new(sqlite.clone()) as Arc<dyn TranscriptStore>,
        FailFirstResult::default(),
    ));
    let lines = [
        json!({"at_ms": 0, "type": "start"}),
        json!({"at_ms": 5, "type": "toolcall_start", "index": 0, "id": "a1", "name": "probe"}),
        json!({"at_ms": 5, "type": "toolcall_end", "index": 0}),
        json!({"at_ms": 20, "type": "toolcall_start", "index": 1, "id": "a2", "name": "probe"}),
        json!({"at_ms": 20, "type": "toolcall_end", "index": 1}),
        json!({"at_ms": 150, "type": "toolcall_start", "index": 2, "id": "a3", "name": "probe"}),
        json!({"at_ms": 150, "type": "toolcall_end", "index": 2}),
        json!({"at_ms": 160, "type": "toolcall_start", "index": 3, "id": "s1", "name": "save"}),
        json!({"at_ms": 160, "type": "toolcall_end", "index": 3}),
        json!({"at_ms": 200, "type": "done", "stop_reason": "tool_use", "usage": {}}),
    ];
    let run = run_agent(store, delta_log(&lines)).await;

    assert_eq!(run.started, ["a1", "a2"], "calls that executed");
    assert!(matches!(run.agent_stop(), AgentStop::Error(message) if message.contains("could not be written")));
    // Only a1 lacks its result (its write failed); every other admitted call has exactly one.
    let unfinished: Vec<String> = sqlite
        .unfinished_calls(&run.session)
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.call.id)
        .collect();
    assert_eq!(unfinished, ["a1"]);
    let log = sqlite.load_log(&run.session).await.unwrap();
    let results: Vec<(String, String)> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some((result.tool_call_id.clone(), result.text())),
            _ => None,
        })
        .collect();
    let text_of = |id: &str| {
        results
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, text)| text.clone())
    };
    assert_eq!(text_of("a2").as_deref(), Some("done"));
    for id in ["a3", "s1"] {
        let text = text_of(id).unwrap_or_else(|| panic!("{id} has no result: {results:?}"));
        assert!(
            text.starts_with("cancelled before start: transcript store is locked"),
            "{id}: {text}"
        );
    }
    assert_eq!(results.len(), 3, "{results:?}");
}
