//! Crash test (contract §1, §3.3, §7.4): kill `headstart replay` with SIGKILL at random moments and check what the
//! killed process left behind.
//!
//! The scenario `tests/crash/many-calls.json` (in this package) runs 26 async and sync calls over five tool turns
//! on the wall clock (`headstart replay --clock wall` on it prints how long, as `end_ms`); every tool has a real
//! side effect (`touch: true`: it creates `<touch dir>/<call id>` when its body starts). Each kill runs with a fresh
//! database and touch directory, and afterwards:
//!
//! 1. `PRAGMA integrity_check` is `ok` and `PRAGMA foreign_key_check` finds nothing; the engine's invariants
//!    (`headstart_testkit::invariants`: gapless sequence numbers, owners stored before starts, one result per call,
//!    turn ids and usage) hold except for the admitted calls the kill left unsettled and without a result;
//! 2. every file in the touch directory names a call whose run is admitted and whose owning assistant fragment
//!    (the run's `fragment_seq`) is in the database and contains the call: **no side effect without a durable
//!    owner**;
//! 3. nothing `commit_fragment` returned for before the kill is missing. The replay runs with
//!    `HEADSTART_TRACE_COMMITS=1`, which makes it write one line per commit to standard error (a file here) with a
//!    single `write` right after `commit_fragment` returned `Ok` (`headstart_sim::commit_trace`). A line in the file
//!    is therefore a commit the engine was told is durable; each must be in the database, with its admitted calls
//!    owned by it. (A kill between the return and the write loses a line, which only makes the check weaker for
//!    that commit, never wrong.)
//! 4. `headstart recover DB --json` gives exactly the unfinished calls (admitted, no result) the interrupted result,
//!    after which the engine's invariants hold without exception: every tool call in the transcript has exactly one
//!    result, every result follows its call, every run is settled;
//! 5. recovery only appends: every message the kill left is there after it, unchanged (property 1 of the resume
//!    suite, `tests/resume.rs`); a copy of the killed run's database, recovered apart, gives the same `--json` (6)
//!    and ends with the same transcripts and runs, timestamps aside (3); on the first three kills that leave
//!    unfinished calls, 2, 4 and 8 `recover` processes started together on a copy recover each call once between
//!    them, the others finding nothing left or being refused by the holder (property 5).
//!
//! Kill points are stratified over the duration of an unkilled run measured first (one random point in each of
//! `kills` equal slices), so they cover the whole run: process start, database setup, every turn, the end.
//!
//! The test lives in the `headstart-cli` package so that cargo builds the `headstart` binary it runs
//! (`CARGO_BIN_EXE_headstart`), with the features of the test build, and never a stale one.
//!
//! Environment: `HEADSTART_CRASH_SEED` (repeat a run; the seed is printed), `HEADSTART_CRASH_KILLS` (default 55).
#![cfg(unix)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart::{Message, SessionId, SqliteStore, TranscriptStore};
use headstart_testkit::invariants::{self, InvariantViolation};
use rusqlite::{Connection, OptionalExtension};
use support::campaign::{env_number, seed, Rng};
use support::ChildGuard;

const SCENARIO: &str = "tests/crash/many-calls.json";
const DEFAULT_KILLS: usize = 55;
const REQUIRED_KILLS: usize = 50;
/// The signal number of SIGKILL.
const SIGKILL: i32 = 9;

/// One traced commit: `headstart-commit <session> <seq> <calls|->`.
#[derive(Debug)]
struct TracedCommit {
    session: String,
    seq: i64,
    calls: Vec<String>,
}

/// The complete trace lines (a line cut short by the kill has no newline and is ignored).
fn read_trace(path: &Path) -> Vec<TracedCommit> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .filter_map(|line| line.strip_prefix("headstart-commit "))
        .map(|rest| {
            let parts: Vec<&str> = rest.split(' ').collect();
            assert_eq!(parts.len(), 3, "malformed trace line {rest:?}");
            TracedCommit {
                session: parts[0].to_owned(),
                seq: parts[1].parse().expect("trace seq"),
                calls: match parts[2] {
                    "-" => Vec::new(),
                    calls => calls.split(',').map(str::to_owned).collect(),
                },
            }
        })
        .collect()
}

/// A run's directory: database, touch directory and trace file.
struct RunDir {
    dir: tempfile::TempDir,
    db: PathBuf,
    touch: PathBuf,
    trace: PathBuf,
}

impl RunDir {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let touch = dir.path().join("touched");
        std::fs::create_dir(&touch).expect("touch dir");
        RunDir {
            db: dir.path().join("transcript.db"),
            trace: dir.path().join("trace.txt"),
            touch,
            dir,
        }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn spawn(&self, bin: &Path, scenario: &Path) -> ChildGuard {
        let trace = std::fs::File::create(&self.trace).expect("trace file");
        ChildGuard::spawn(
            Command::new(bin)
                .arg("replay")
                .args(["--clock", "wall", "--touch-dir"])
                .arg(&self.touch)
                .arg("--db")
                .arg(&self.db)
                .arg(scenario)
                .env("HEADSTART_TRACE_COMMITS", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(trace),
        )
        .expect("spawn headstart replay")
    }

    fn touched(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.touch)
            .expect("read touch dir")
            .map(|entry| entry.expect("dir entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// What the checks of one run found.
#[derive(Debug, Default)]
struct Checked {
    side_effects: usize,
    commits: usize,
    recovered: usize,
    recovered_started: usize,
    /// Databases recovered twice, apart, with the same outcome.
    twins: usize,
    /// Databases recovered by several processes at once.
    together: usize,
}

/// How many `recover` processes start together on the first kills that leave unfinished calls.
const TOGETHER: [usize; 3] = [2, 4, 8];

/// Every session's messages in `db`, by sequence number.
fn logs(db: &Path) -> BTreeMap<String, BTreeMap<i64, Message>> {
    let conn = Connection::open(db).expect("open the database");
    if !has_schema(&conn) {
        return BTreeMap::new();
    }
    sessions(&conn)
        .into_iter()
        .map(|session| {
            let messages = load_messages(&conn, &session);
            (session, messages)
        })
        .collect()
}

/// The session's messages by sequence number.
fn load_messages(conn: &Connection, session: &str) -> BTreeMap<i64, Message> {
    let mut stmt = conn
        .prepare("SELECT seq, body FROM messages WHERE session_id = ?1 ORDER BY seq")
        .expect("prepare");
    let rows = stmt
        .query_map([session], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
        .expect("query messages");
    rows.map(|row| {
        let (seq, body) = row.expect("message row");
        let message: Message = serde_json::from_str(&body).unwrap_or_else(|e| panic!("message {seq}: {e}: {body}"));
        (seq, message)
    })
    .collect()
}

fn calls_of(message: &Message) -> Vec<String> {
    match message {
        Message::Assistant(assistant) => assistant.tool_calls().map(|call| call.id.clone()).collect(),
        _ => Vec::new(),
    }
}

fn has_schema(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tool_runs')",
        [],
        |row| row.get(0),
    )
    .expect("read sqlite_master")
}

fn sessions(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT id FROM sessions ORDER BY ordinal")
        .expect("prepare");
    let rows = stmt.query_map([], |row| row.get(0)).expect("query sessions");
    rows.map(|row| row.expect("session row")).collect()
}

fn unfinished(conn: &Connection) -> i64 {
    conn.query_row(
        "SELECT COUNT(*) FROM tool_runs WHERE state IN ('admitted', 'started') AND result_seq IS NULL",
        [],
        |row| row.get(0),
    )
    .expect("count unfinished runs")
}

/// The engine's invariants (`headstart_testkit::invariants`, shared with the scenario, adapter and load tests) on what
/// the database holds for `session`, read through a read-only store.
fn session_violations(db: &Path, session: &str) -> Vec<InvariantViolation> {
    let (runtime, store) = read_only(db);
    runtime
        .block_on(invariants::check_session(&store, &SessionId(session.to_owned())))
        .unwrap_or_else(|e| panic!("read session {session}: {e}"))
}

/// A runtime and a read-only store on `db`, to read what a killed run left from this synchronous test.
fn read_only(db: &Path) -> (tokio::runtime::Runtime, SqliteStore) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let store = SqliteStore::open_read_only(db).unwrap_or_else(|e| panic!("open {} read-only: {e}", db.display()));
    (runtime, store)
}

/// Checks 1–3 on the database a run left; returns the number of unfinished calls.
fn check_after_kill(run: &RunDir, label: &str, checked: &mut Checked) -> i64 {
    let touched = run.touched();
    let trace = read_trace(&run.trace);
    if !run.db.exists() {
        assert!(
            touched.is_empty(),
            "{label}: side effects {touched:?} without a database"
        );
        assert!(trace.is_empty(), "{label}: commits traced without a database");
        return 0;
    }
    let conn = Connection::open(&run.db).expect("open the killed run's database");
    let integrity: Vec<String> = {
        let mut stmt = conn.prepare("PRAGMA integrity_check").expect("prepare");
        let rows = stmt.query_map([], |row| row.get(0)).expect("integrity_check");
        rows.map(|row| row.expect("row")).collect()
    };
    assert_eq!(integrity, ["ok"], "{label}: integrity_check");
    if !has_schema(&conn) {
        assert!(touched.is_empty(), "{label}: side effects {touched:?} without a schema");
        assert!(trace.is_empty(), "{label}: commits traced without a schema");
        return 0;
    }
    let violations: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |row| row.get(0))
        .expect("foreign_key_check");
    assert_eq!(violations, 0, "{label}: foreign key violations");
    let sessions = sessions(&conn);
    assert!(sessions.len() <= 1, "{label}: sessions {sessions:?}");
    let Some(session) = sessions.first() else {
        assert!(
            touched.is_empty(),
            "{label}: side effects {touched:?} without a session"
        );
        assert!(trace.is_empty(), "{label}: commits traced without a session");
        return 0;
    };
    let messages = load_messages(&conn, session);

    // The engine's invariants hold, except for what a killed run leaves until recovery: admitted calls that never
    // settled and have no result yet.
    let violations = session_violations(&run.db, session);
    let unsettled = violations
        .iter()
        .filter(|violation| matches!(violation, InvariantViolation::Unsettled { .. }))
        .count();
    let broken: Vec<String> = violations
        .iter()
        .filter(|violation| !violation.left_by_a_crash())
        .map(ToString::to_string)
        .collect();
    assert!(broken.is_empty(), "{label}: {broken:?}");
    assert_eq!(unsettled as i64, unfinished(&conn), "{label}: unsettled calls");

    // The central invariant: every side effect has a durable owner.
    let owner_of = |call: &str| -> Option<i64> {
        conn.query_row(
            "SELECT fragment_seq FROM tool_runs WHERE session_id = ?1 AND call_id = ?2",
            [session.as_str(), call],
            |row| row.get(0),
        )
        .optional()
        .expect("query tool run")
    };
    for call in &touched {
        let owner = owner_of(call)
            .unwrap_or_else(|| panic!("{label}: side effect of {call}, which has no admitted run in the database"));
        let fragment = messages
            .get(&owner)
            .unwrap_or_else(|| panic!("{label}: {call} ran but its owning fragment #{owner} is not stored"));
        assert!(
            calls_of(fragment).contains(call),
            "{label}: fragment #{owner} does not contain {call}, which ran"
        );
        checked.side_effects += 1;
    }

    // Nothing that commit_fragment returned for is missing.
    for commit in &trace {
        assert_eq!(&commit.session, session, "{label}: traced session");
        let stored = messages
            .get(&commit.seq)
            .unwrap_or_else(|| panic!("{label}: committed fragment #{} is missing", commit.seq));
        let calls = calls_of(stored);
        assert!(
            matches!(stored, Message::Assistant(_)),
            "{label}: #{} is not an assistant fragment",
            commit.seq
        );
        for call in &commit.calls {
            assert!(calls.contains(call), "{label}: fragment #{} lacks {call}", commit.seq);
            assert_eq!(owner_of(call), Some(commit.seq), "{label}: the run of {call}");
        }
        checked.commits += 1;
    }
    unfinished(&conn)
}

/// `headstart recover --json DB`'s recovered calls; `None` when it refused (exit status 1, naming why, nothing
/// recovered).
fn recover_json(output: &std::process::Output, label: &str) -> Option<Vec<serde_json::Value>> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(1) && stderr.contains("nothing was recovered") {
        return None;
    }
    assert!(output.status.success(), "{label}: headstart recover failed: {stderr}");
    Some(serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{label}: recover --json: {e}: {}",
            String::from_utf8_lossy(&output.stdout)
        )
    }))
}

fn recover_command(bin: &Path, db: &Path) -> Command {
    let mut command = Command::new(bin);
    command.args(["recover", "--json"]).arg(db);
    command
}

/// Every session's transcript and runs in `db`, timestamps aside.
fn decisions(db: &Path) -> serde_json::Value {
    let (runtime, store) = read_only(db);
    let mut value = runtime.block_on(async {
        let mut sessions = Vec::new();
        for info in store.sessions().await.expect("sessions") {
            let log = store.load_log(&info.id).await.expect("log");
            let runs = store.tool_runs(&info.id).await.expect("runs");
            sessions.push(serde_json::json!({ "session": info.id, "log": log, "runs": runs }));
        }
        serde_json::Value::Array(sessions)
    });
    support::strip_times(&mut value);
    value
}

/// Property 5 of the resume suite (`tests/resume.rs`) for `recover`: `k` recoveries started together on a copy of
/// the killed run's database give each unfinished call one result between them; the others find nothing left or
/// are refused by the one that holds the session.
fn recover_together(bin: &Path, run: &RunDir, label: &str, k: usize, unfinished_before: i64) {
    let copy = run.dir().join(format!("together-{k}.db"));
    support::copy_sqlite(&run.db, &copy);
    let children: Vec<ChildGuard> = (0..k)
        .map(|_| {
            ChildGuard::spawn(
                recover_command(bin, &copy)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
            .expect("start headstart recover")
        })
        .collect();
    let mut calls: Vec<(String, String)> = Vec::new();
    for child in children {
        let output = child.output_within(Duration::from_secs(60));
        for call in recover_json(&output, label).unwrap_or_default() {
            calls.push((call["session"].to_string(), call["call_id"].to_string()));
        }
    }
    let all = calls.len();
    calls.sort();
    calls.dedup();
    assert_eq!(
        calls.len(),
        all,
        "{label}: {k} recoveries together recovered a call twice"
    );
    assert_eq!(all as i64, unfinished_before, "{label}: {k} recoveries together");
    let conn = Connection::open(&copy).expect("open the copy");
    assert_eq!(
        unfinished(&conn),
        0,
        "{label}: unfinished after {k} recoveries together"
    );
}

/// Check 4: `headstart recover` leaves no unfinished call and a valid transcript; recovering a copy of the same
/// database gives the same calls and stores the same results (property 6 of the resume suite); the first kills that
/// leave unfinished calls are recovered by 2, 4 and 8 processes at once too (property 5).
fn recover_and_check(bin: &Path, run: &RunDir, label: &str, unfinished_before: i64, checked: &mut Checked) {
    if !run.db.exists() {
        return;
    }
    let twin = run.dir().join("twin.db");
    support::copy_sqlite(&run.db, &twin);
    if unfinished_before > 0 {
        if let Some(&k) = TOGETHER.get(checked.together) {
            recover_together(bin, run, label, k, unfinished_before);
            checked.together += 1;
        }
    }
    let before = logs(&run.db);
    let output = recover_command(bin, &run.db).output().expect("run headstart recover");
    let recovered = recover_json(&output, label).unwrap_or_else(|| panic!("{label}: recover refused"));
    // Property 1: recovery only appends; every message the kill left is there, unchanged, at its place.
    let after = logs(&run.db);
    for (session, messages) in &before {
        let now = after.get(session).cloned().unwrap_or_default();
        for (seq, message) in messages {
            assert_eq!(
                now.get(seq),
                Some(message),
                "{label}: property 1, recovery changed message {seq} of {session}"
            );
        }
    }
    let twin_output = recover_command(bin, &twin).output().expect("run headstart recover");
    let twin_recovered = recover_json(&twin_output, label).unwrap_or_else(|| panic!("{label}: recover refused"));
    assert_eq!(
        twin_recovered, recovered,
        "{label}: property 6, recovering a copy recovered other calls"
    );
    assert_eq!(
        decisions(&twin),
        decisions(&run.db),
        "{label}: property 3, recovering a copy stored another transcript"
    );
    checked.twins += 1;
    assert_eq!(
        recovered.len() as i64,
        unfinished_before,
        "{label}: recovered calls vs unfinished calls"
    );
    checked.recovered += recovered.len();
    checked.recovered_started += recovered.iter().filter(|call| call["had_started"] == true).count();

    let conn = Connection::open(&run.db).expect("reopen after recovery");
    assert_eq!(unfinished(&conn), 0, "{label}: unfinished calls after recovery");
    for session in sessions(&conn) {
        let violations: Vec<String> = session_violations(&run.db, &session)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(violations.is_empty(), "{label}: after recovery: {violations:?}");
    }
}

#[test]
fn sigkill_at_random_moments_loses_nothing_and_runs_nothing_without_an_owner() {
    let started = Instant::now();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_headstart"));
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO);
    let seed = seed("HEADSTART_CRASH_SEED");
    let kills_wanted = env_number("HEADSTART_CRASH_KILLS").map_or(DEFAULT_KILLS, |n| n as usize);
    println!("crash test: seed {seed} (HEADSTART_CRASH_SEED={seed} repeats it), {kills_wanted} kill points");
    let mut rng = Rng(seed);
    let mut checked = Checked::default();

    // An unkilled run: it must complete cleanly, and its duration spans the kill points.
    let run = RunDir::new();
    let begun = Instant::now();
    let status = run.spawn(&bin, &scenario).wait();
    let full = begun.elapsed();
    assert!(status.success(), "the unkilled replay failed: {status}");
    let commits_in_full_run = read_trace(&run.trace).len();
    let touched_in_full_run = run.touched().len();
    let unfinished_full = check_after_kill(&run, "full run", &mut checked);
    assert_eq!(unfinished_full, 0, "the unkilled run left unfinished calls");
    assert_eq!(touched_in_full_run, 26, "the unkilled run executed every call");
    recover_and_check(&bin, &run, "full run", 0, &mut checked);
    println!(
        "crash test: an unkilled run takes {:.0} ms, makes {commits_in_full_run} commits and {touched_in_full_run} \
         side effects",
        full.as_secs_f64() * 1e3
    );

    // Kill points: one uniform point in each of `kills_wanted` equal slices of the run.
    let window = full.as_secs_f64();
    let mut kills = 0usize;
    let mut completed = 0usize;
    let mut commits_seen_at_kill: BTreeMap<usize, usize> = BTreeMap::new();
    for slice in 0..kills_wanted {
        let mut at = window * (slice as f64 + rng.unit()) / kills_wanted as f64;
        // A run that finishes before its kill point is checked too, then tried again earlier in the run.
        for _attempt in 0..4 {
            let run = RunDir::new();
            let label = format!("seed {seed}, kill at {:.1} ms", at * 1e3);
            let begun = Instant::now();
            let mut child = run.spawn(&bin, &scenario);
            std::thread::sleep(Duration::from_secs_f64(at).saturating_sub(begun.elapsed()));
            // SIGKILL; a run that exited just before is reaped, not killed.
            let status = child.kill();
            let unfinished = check_after_kill(&run, &label, &mut checked);
            recover_and_check(&bin, &run, &label, unfinished, &mut checked);
            if status.signal() == Some(SIGKILL) {
                kills += 1;
                *commits_seen_at_kill.entry(read_trace(&run.trace).len()).or_default() += 1;
                break;
            }
            assert!(status.success(), "{label}: the replay failed: {status}");
            completed += 1;
            at *= 0.8;
        }
    }
    let spread: Vec<String> = commits_seen_at_kill
        .iter()
        .map(|(commits, kills)| format!("{commits}:{kills}"))
        .collect();
    println!(
        "crash test: {kills} kills ({completed} run(s) finished before their kill point), {} side effects checked, \
         {} commits checked, {} calls recovered ({} had started), {} databases recovered twice alike, {} by \
         several processes at once, {:.1} s",
        checked.side_effects,
        checked.commits,
        checked.recovered,
        checked.recovered_started,
        checked.twins,
        checked.together,
        started.elapsed().as_secs_f64()
    );
    println!(
        "crash test: kills by commits traced before the kill (commits:kills): {}",
        spread.join(" ")
    );
    assert!(kills >= REQUIRED_KILLS.min(kills_wanted), "only {kills} kills");
    if kills >= REQUIRED_KILLS {
        assert!(
            checked.recovered > 0,
            "no kill left an unfinished call: the kill points missed the tool calls"
        );
    }
}
