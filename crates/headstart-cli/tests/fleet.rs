//! Fleet crash test (contract §7.5, issues 14 and 22): four `headstart worker` processes on one PostgreSQL database
//! run a few hundred sessions of `tests/crash/many-calls.json`. Three run the scenario (async and sync calls, with
//! `fetch` made idempotent so recovery re-runs it): one of them is killed with SIGKILL at random moments and
//! restarted each time; another is stopped with SIGSTOP for longer than its lease and then resumed, a zombie whose
//! sessions were taken over. The fourth, `agent`, runs a real agent: `--provider openai-compatible --base-url` an
//! in-process replay server whose replies are chosen by what each request holds
//! (`replay_server::call_then_answer`: a tool result last gets the final answer, anything else a `read_file` call
//! of a file in the worker's directory), so it can answer any transcript, one begun by a scenario worker too. It is
//! killed twice while it holds sessions (stopped first, so the store shows which it holds), and restarted.
//! Sessions go to whichever worker is free, so a session begun by one kind is often finished by the other.
//!
//! At the end:
//! 1. every session is `completed`;
//! 2. every call a tool body began (each begin appends a line to `<touch dir>/<session>/<call id>`) is in a
//!    durable fragment of its session;
//! 3. the engine's invariants hold for every session (`headstart_testkit::invariants`): every admitted call has exactly
//!    one result, no call started before its owner was durable;
//! 4. no call began twice, unless its tool is idempotent (recovery re-runs only those) and its session was claimed
//!    at least as many times as the call began (one execution per claim);
//! 5. the zombie, once resumed, lost its sessions and every write it then tried was fenced (it counts them);
//! 6. the real agent took part: it completed sessions (it is their owner, and its answer ends some), every session
//!    ends with one of the two final answers, and the sessions it held when it was killed were claimed again.
//!
//! PostgreSQL comes from `headstart_postgres::testing` (`DATABASE_URL`, or a throwaway cluster); without one the
//! test says so loudly and passes, or fails under `HEADSTART_REQUIRE_POSTGRES=1`.
//!
//! Environment: `HEADSTART_FLEET_SEED` (repeat a run; the seed is printed), `HEADSTART_FLEET_SESSIONS` (default
//! 300; a run too short for the agent to be killed while it holds sessions fails 6), `HEADSTART_FLEET_KILLS` (the
//! victim's kills before the run may end, default 10; a long campaign gives 1000 and sessions enough to last it,
//! about 8 per second of kills, and the deadline grows with it).
//!
//! Every process a test starts is killed when the test ends, pass or fail ([`ChildGuard`]); the benchmark, which
//! starts workers of its own, runs in a process group of its own, killed whole. The replay server runs in the test.
#![cfg(unix)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headstart::store::SessionState;
use headstart::{Message, TranscriptStore};
use headstart_postgres::{testing, PgOptions, PgStore};
use headstart_providers::replay_server::call_then_answer::CallThenAnswer;
use headstart_providers::replay_server::ReplayServer;
use headstart_testkit::invariants::check_session;
use serde_json::{json, Value};
use support::campaign::{env_number, seed, Rng};
use support::{workdir, ChildGuard, DownProvider};

const SCENARIO: &str = "tests/crash/many-calls.json";
const DEFAULT_SESSIONS: usize = 300;
const DEFAULT_KILLS: u64 = 10;
const LEASE_MS: u64 = 1_000;
const POLL_MS: u64 = 100;
/// A fleet that stops making progress fails the test rather than hang it. The run's time is printed at the end
/// (`cargo test -p headstart-cli --test fleet -- --nocapture`); the bound leaves room for a busy machine, plus a
/// second per kill past the default's.
const DEADLINE: Duration = Duration::from_secs(180);
/// The real-agent worker's name.
const AGENT: &str = "agent";
/// How many times the real-agent worker is killed while it holds sessions.
const REQUIRED_AGENT_KILLS: usize = 2;
/// The scenario's final answer, and the real agent's.
const SCENARIO_ANSWER: &str = "All done.";
const AGENT_ANSWER: &str = "The notes say hello.";
/// The replay server's pause before each SSE event: a response of about ten events takes a model's fraction of a
/// second, so the real agent, with a concurrency of 4, takes a share of the sessions and leaves most to the scenario.
const MODEL_EVENT_DELAY: Duration = Duration::from_millis(20);

/// The scenario with `fetch` declared idempotent, written next to the run's files.
fn fleet_scenario(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(SCENARIO).expect("read the crash scenario");
    let mut scenario: Value = serde_json::from_str(&text).expect("the crash scenario is JSON");
    let tools = scenario["tools"].as_array_mut().expect("tools");
    for tool in tools {
        if tool["name"] == "fetch" {
            tool["idempotent"] = Value::Bool(true);
        }
    }
    let path = dir.join("fleet.json");
    std::fs::write(&path, scenario.to_string()).expect("write the fleet scenario");
    path
}

struct Fleet {
    bin: PathBuf,
    url: String,
    scenario: PathBuf,
    dir: PathBuf,
    touch: PathBuf,
    /// The real agent's model endpoint (the replay server's `/v1`).
    model_url: String,
    /// The real agent's working directory, with `notes.txt`.
    workdir: PathBuf,
}

impl Fleet {
    /// Starts worker `id`: the real agent when it is [`AGENT`], the scenario otherwise. Its standard error (the
    /// event log) goes to `<dir>/<id>.<incarnation>.log`.
    fn spawn(&self, id: &str, incarnation: usize) -> ChildGuard {
        let log = self.dir.join(format!("{id}.{incarnation}.log"));
        let out = self.dir.join(format!("{id}.{incarnation}.out"));
        let mut command = Command::new(&self.bin);
        command.args(["worker", "--store", &self.url, "--id", id]).args([
            "--lease-ms",
            &LEASE_MS.to_string(),
            "--poll-ms",
            &POLL_MS.to_string(),
        ]);
        if id == AGENT {
            command
                .current_dir(&self.workdir)
                .args(["--concurrency", "4", "--provider", "openai-compatible", "--model", "m"])
                .arg("--base-url")
                .arg(&self.model_url)
                .arg("--workdir")
                .arg(&self.workdir);
        } else {
            command
                .args(["--concurrency", "16", "--scenario"])
                .arg(&self.scenario)
                .arg("--touch-dir")
                .arg(&self.touch);
        }
        ChildGuard::spawn(
            command
                .stdin(Stdio::null())
                .stdout(File::create(out).expect("worker stdout file"))
                .stderr(File::create(log).expect("worker log file")),
        )
        .expect("start a worker")
    }

    fn log(&self, id: &str, incarnation: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("{id}.{incarnation}.log"))).unwrap_or_default()
    }

    fn stats(&self, id: &str, incarnation: usize) -> Value {
        let text = std::fs::read_to_string(self.dir.join(format!("{id}.{incarnation}.out"))).unwrap_or_default();
        serde_json::from_str(text.trim()).unwrap_or(Value::Null)
    }
}

/// A copy of the binary under test: the test starts it dozens of times over half a minute, and a target folder
/// shared with other checkouts may see `target/debug/headstart` rebuilt from other sources meanwhile.
fn private_binary(dir: &Path) -> PathBuf {
    let bin = dir.join("headstart");
    std::fs::copy(env!("CARGO_BIN_EXE_headstart"), &bin).expect("copy the headstart binary");
    // A child another test thread forks while the copy is being written inherits the written file's descriptor
    // until it execs, and Linux refuses to run a file open for writing (ETXTBSY): that window closes at once.
    let mut tries = 0;
    let help = loop {
        match Command::new(&bin).args(["worker", "--help"]).output() {
            Err(error) if error.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => break other.expect("run headstart worker --help"),
        }
    };
    assert!(
        help.status.success(),
        "{} has no worker command: it is not this build (a target folder shared with another checkout?)",
        env!("CARGO_BIN_EXE_headstart")
    );
    bin
}

/// Runs the binary and parses its standard output as JSON. It runs in a process group of its own, killed whole
/// when it ends: `bench sessions` starts worker processes.
fn run_json(bin: &Path, args: &[&str]) -> Value {
    let output = ChildGuard::spawn_group(
        Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("run headstart")
    .output();
    assert!(
        output.status.success(),
        "headstart {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON output")
}

/// Submitting to a SQLite file creates it; `inspect --json` shows the sessions pending, with no owner.
#[test]
fn submit_to_a_sqlite_file_and_inspect_the_queue() {
    let temp = tempfile::tempdir().expect("temp dir");
    let bin = private_binary(temp.path());
    let db = temp.path().join("queue.db");
    let ids = support::submit_count(&bin, &db, 2, "hello");
    assert_eq!(ids.len(), 2);
    let db = db.to_string_lossy().into_owned();
    let inspected = run_json(&bin, &["inspect", &db, "--json"]);
    let sessions = inspected.as_array().expect("an array");
    assert_eq!(sessions.len(), 2);
    for (session, id) in sessions.iter().zip(&ids) {
        assert_eq!(session["session"], id.as_str());
        assert_eq!(session["state"], "pending");
        assert_eq!(session["owner"], Value::Null);
        assert_eq!(session["epoch"], 0);
        assert_eq!(session["transcript"][0]["role"], "user");
        assert_eq!(session["transcript"][0]["text"], "hello");
    }
    // A missing file is an error for the commands that read, not a new empty store.
    let missing = temp.path().join("missing.db").to_string_lossy().into_owned();
    let inspect = Command::new(&bin)
        .args(["inspect", &missing])
        .output()
        .expect("run inspect");
    assert_eq!(inspect.status.code(), Some(1));
    assert!(!Path::new(&missing).exists());
}

/// `inspect` on a PostgreSQL database only reads: on a database that holds no store it fails, saying so, and
/// leaves the database as it was (no schema created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspecting_an_empty_postgresql_database_creates_nothing() {
    let Some(database) = testing::database().await else {
        return;
    };
    let temp = tempfile::tempdir().expect("temp dir");
    let bin = private_binary(temp.path());
    let inspect = Command::new(&bin)
        .args(["inspect", database.url()])
        .output()
        .expect("run inspect");
    let stderr = String::from_utf8_lossy(&inspect.stderr);
    assert_eq!(inspect.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no headstart store"), "{stderr}");
    assert!(!database.has_store_schema().await, "inspect must not create the schema");
}

/// `bench sessions --store URL --json`: for the CPU-only load and then the one given, the SQLite baseline, then
/// PostgreSQL with 1 and 2 worker processes, each run to completion of every session it submitted, on a store
/// where a worker whose provider is down (it answers HTTP 500) serves the default queue (issue 44): the benchmark's
/// sessions wait in a queue of their own, so the broken worker never claims one, and none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_benchmark_reports_each_worker_count() {
    let Some(database) = testing::database().await else {
        return;
    };
    let temp = tempfile::tempdir().expect("temp dir");
    let bin = private_binary(temp.path());
    let provider = DownProvider::start(500);
    let submitted = Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(["submit", "--store", database.url(), "--count", "4", "busy work"])
        .output()
        .expect("submit");
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let broken_log = temp.path().join("broken.log");
    let _broken = ChildGuard::spawn(
        Command::new(env!("CARGO_BIN_EXE_headstart"))
            .env("HEADSTART_STORE", database.url())
            .args([
                "worker",
                "--id",
                "broken",
                "--poll-ms",
                "20",
                "--retry-ms",
                "100",
                "--breaker-ms",
                "200",
            ])
            .args(["--provider", "openai-compatible", "--model", "m", "--base-url"])
            .arg(provider.url("/v1"))
            .current_dir(temp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&broken_log).expect("log file")),
    )
    .expect("start the broken worker");
    // A password the throwaway cluster ignores (it trusts local connections): the workers must not show it.
    let url = with_password(database.url());
    let workers_bin = bin.clone();
    let watching = Arc::new(AtomicBool::new(true));
    let watch = Arc::clone(&watching);
    let seen = std::thread::spawn(move || worker_command_lines(&workers_bin, &watch));
    let report = tokio::task::spawn_blocking(move || {
        run_json(
            &bin,
            &[
                "bench",
                "sessions",
                "--store",
                &url,
                "--workers",
                "2",
                "--sessions",
                "6",
                "--model-ms",
                "20",
                "--tool-ms",
                "10",
                "--json",
            ],
        )
    })
    .await
    .expect("the benchmark ran");
    watching.store(false, Ordering::SeqCst);
    let workers = seen.join().expect("the watcher");
    assert!(!workers.is_empty(), "the benchmark's workers were seen");
    for line in &workers {
        assert!(
            !line.contains(PASSWORD),
            "a worker's command line shows the password: {line}"
        );
    }
    check_fleet_report(
        &report,
        &[
            ("sqlite", 1, 0),
            ("postgres", 1, 0),
            ("postgres", 2, 0),
            ("sqlite", 1, 20),
            ("postgres", 1, 20),
            ("postgres", 2, 20),
        ],
    );
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");
    let sessions = store.sessions().await.expect("sessions");
    let (bench, default): (Vec<_>, Vec<_>) = sessions
        .iter()
        .partition(|info| info.settings.queue_name().starts_with("bench-"));
    assert_eq!(bench.len(), 24, "6 sessions for each of 4 PostgreSQL runs");
    for info in &bench {
        assert_eq!(info.state, SessionState::Completed, "{info:?}");
        assert!(
            info.owner.as_deref().is_some_and(|owner| owner.starts_with("bench-")),
            "{info:?}"
        );
    }
    assert_eq!(default.len(), 4);
    let broken = std::fs::read_to_string(&broken_log).expect("the broken worker's log");
    assert!(
        default.iter().all(|info| info.state != SessionState::Completed),
        "the broken worker completes nothing: {default:#?}"
    );
    assert!(
        broken.contains("retrying "),
        "the broken worker was at work meanwhile: {broken}"
    );
    assert!(provider.requests() > 0);
}

const PASSWORD: &str = "s3cret-never-in-argv";

/// `url` with [`PASSWORD`] added, in the URL's own syntax (a `postgresql://` URI or a libpq `key=value` string).
fn with_password(url: &str) -> String {
    if url.starts_with("postgres") {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}password={password}", password = PASSWORD)
    } else {
        format!("{url} password={PASSWORD}")
    }
}

/// The command lines of the `headstart worker` processes running `bin`, read from `/proc` until `watching` is
/// cleared: what any local user can read.
fn worker_command_lines(bin: &Path, watching: &AtomicBool) -> Vec<String> {
    let mut seen = BTreeSet::new();
    while watching.load(Ordering::SeqCst) {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let path = entry.path();
            if std::fs::read_link(path.join("exe")).ok().as_deref() != Some(bin) {
                continue;
            }
            if let Ok(raw) = std::fs::read(path.join("cmdline")) {
                let line = String::from_utf8_lossy(&raw).replace('\0', " ");
                if line.contains(" worker ") {
                    seen.insert(line);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen.into_iter().collect()
}

/// `bench sessions --store FILE.db --workers 1,2 --json` on SQLite alone: its options parse, and its JSON has every
/// key (no figure is judged).
#[test]
fn the_fleet_benchmark_runs_on_a_sqlite_file_with_a_list_of_worker_counts() {
    let temp = tempfile::tempdir().expect("temp dir");
    let bin = private_binary(temp.path());
    let db = temp.path().join("bench.db").to_string_lossy().into_owned();
    let report = run_json(
        &bin,
        &[
            "bench",
            "sessions",
            "--store",
            &db,
            "--workers",
            "1,2",
            "--sessions",
            "4",
            "--concurrency",
            "2",
            "--model-ms",
            "10",
            "--tool-ms",
            "5",
            "--json",
        ],
    );
    assert_eq!(report["concurrency"], 2);
    check_fleet_report(
        &report,
        &[("sqlite", 1, 0), ("sqlite", 2, 0), ("sqlite", 1, 10), ("sqlite", 2, 10)],
    );
}

/// The report's runs are `(store, workers, model_ms)` in this order, each with every figure.
fn check_fleet_report(report: &Value, expected: &[(&str, u64, u64)]) {
    let sessions = report["sessions"].as_u64().expect("sessions");
    let runs = report["runs"].as_array().expect("runs");
    let shape: Vec<(&str, u64, u64)> = runs
        .iter()
        .map(|run| {
            (
                run["store"].as_str().unwrap_or("?"),
                run["workers"].as_u64().unwrap_or(0),
                run["model_ms"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    assert_eq!(shape, expected);
    for run in runs {
        assert_eq!(run["sessions"], sessions, "{run}");
        assert!(run["tool_ms"].is_u64(), "{run}");
        for figure in ["seconds", "sessions_per_s", "commits_per_s", "vs_one_worker"] {
            let value = run[figure].as_f64().unwrap_or(0.0);
            assert!(value.is_finite() && value > 0.0, "{figure} in {run}");
        }
        for latency in ["submit_to_claim_ms", "seal_to_start_ms"] {
            for q in ["p50", "p99"] {
                let value = run[latency][q].as_f64().unwrap_or(-1.0);
                assert!(value.is_finite() && value >= 0.0, "{latency}.{q} in {run}");
            }
        }
        let statements = &run["statements_per_session"];
        if run["store"] == "postgres" {
            assert!(statements.as_f64().is_some_and(|n| n > 0.0), "{run}");
        } else {
            assert!(statements.is_null(), "{run}");
        }
    }
}

/// `(session, call id) → lines` of every touch file.
fn touches(dir: &Path) -> BTreeMap<(String, String), usize> {
    let mut touched = BTreeMap::new();
    let Ok(sessions) = std::fs::read_dir(dir) else {
        return touched;
    };
    for session in sessions.flatten() {
        let session_id = session.file_name().to_string_lossy().into_owned();
        for call in std::fs::read_dir(session.path())
            .expect("a session's touch folder")
            .flatten()
        {
            let lines = std::fs::read_to_string(call.path())
                .expect("a touch file")
                .lines()
                .count();
            touched.insert(
                (session_id.clone(), call.file_name().to_string_lossy().into_owned()),
                lines,
            );
        }
    }
    touched
}

/// How many sessions completed, of how many; panics at once when one failed (it never will complete).
async fn completed(store: &PgStore) -> (usize, usize) {
    let sessions = store.sessions().await.expect("list sessions");
    if let Some(failed) = sessions.iter().find(|info| info.state == SessionState::Failed) {
        panic!("session {} failed: {:?}", failed.id, failed.failure);
    }
    let done = sessions
        .iter()
        .filter(|info| info.state == SessionState::Completed)
        .count();
    (done, sessions.len())
}

/// The sessions not completed, as (id, state, owner, epoch), for a failure message.
async fn unfinished(store: &PgStore) -> Vec<(String, SessionState, Option<String>, u64)> {
    let sessions = store.sessions().await.expect("list sessions");
    sessions
        .into_iter()
        .filter(|info| info.state != SessionState::Completed)
        .map(|info| (info.id.0, info.state, info.owner, info.epoch))
        .collect()
}

/// The sessions `owner` holds (running under its name), with their epochs.
async fn held_by(store: &PgStore, owner: &str) -> Vec<(String, u64)> {
    let sessions = store.sessions().await.expect("list sessions");
    sessions
        .into_iter()
        .filter(|info| info.state == SessionState::Running && info.owner.as_deref() == Some(owner))
        .map(|info| (info.id.0, info.epoch))
        .collect()
}

/// The text of the last response a session's log holds.
fn last_answer(log: &[headstart::store::StoredMessage]) -> String {
    let last = log.iter().rev().find_map(|stored| match &stored.message {
        Message::Assistant(fragment) => Some(fragment),
        _ => None,
    });
    last.into_iter()
        .flat_map(|fragment| &fragment.content)
        .filter_map(|block| block.as_text())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_survives_kills_and_a_zombie() {
    let Some(database) = testing::database().await else {
        return;
    };
    let sessions_wanted = env_number("HEADSTART_FLEET_SESSIONS").map_or(DEFAULT_SESSIONS, |n| n as usize);
    let required_kills = env_number("HEADSTART_FLEET_KILLS").unwrap_or(DEFAULT_KILLS);
    let deadline = DEADLINE + Duration::from_secs(required_kills.saturating_sub(DEFAULT_KILLS));
    let seed = seed("HEADSTART_FLEET_SEED");
    eprintln!("fleet test: seed {seed} (HEADSTART_FLEET_SEED={seed} repeats it), {sessions_wanted} sessions");
    let mut rng = Rng(seed);
    let temp = tempfile::tempdir().expect("temp dir");
    // The real agent's model: any transcript gets a `read_file` of the notes, or, after a tool result, the answer.
    let model = ReplayServer::start_choosing(
        CallThenAnswer {
            tool: "read_file".to_owned(),
            arguments: json!({"path": "notes.txt"}),
            answer: AGENT_ANSWER.to_owned(),
        },
        std::collections::HashMap::new(),
        MODEL_EVENT_DELAY,
    )
    .await
    .expect("start the replay server");
    let agent_dir = workdir();
    let fleet = Fleet {
        bin: private_binary(temp.path()),
        url: database.url().to_owned(),
        scenario: fleet_scenario(temp.path()),
        dir: temp.path().to_owned(),
        touch: temp.path().join("touch"),
        model_url: model.url("/v1"),
        workdir: agent_dir.path().to_owned(),
    };
    let store = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");

    let submitted = Command::new(&fleet.bin)
        .args(["submit", "--store", &fleet.url, "--scenario"])
        .arg(&fleet.scenario)
        .args(["--count", &sessions_wanted.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .expect("run submit");
    assert!(submitted.status.success(), "submit failed");
    assert_eq!(
        String::from_utf8_lossy(&submitted.stdout).lines().count(),
        sessions_wanted
    );

    let started = Instant::now();
    let mut steady = fleet.spawn("steady", 0);
    let mut zombie = fleet.spawn("zombie", 0);
    let mut victim_incarnation = 0;
    let mut victim = fleet.spawn("victim", victim_incarnation);
    let mut agent_incarnation = 0;
    let mut agent = fleet.spawn(AGENT, agent_incarnation);

    // The zombie stops for twice its lease plus a bit, early in the run while it holds sessions.
    let stop_at = rng.between_ms(600, 1_200);
    let stopped_for = Duration::from_millis(2 * LEASE_MS + 500);
    let mut zombie_stopped: Option<Instant> = None;
    let mut zombie_resumed = false;
    let mut next_kill = started + rng.between_ms(100, 500);
    let mut kills = 0;
    // The agent is killed only while it holds sessions: stopped, the store shows which; none, it goes on.
    let mut next_agent_kill = started + rng.between_ms(500, 1_500);
    let mut agent_kills = 0;
    let mut orphaned: Vec<(String, u64)> = Vec::new();
    loop {
        let now = Instant::now();
        assert!(
            now - started < deadline,
            "the fleet did not finish within {deadline:?} (seed {seed}): {:?} sessions completed; not completed: {:?}",
            completed(&store).await,
            unfinished(&store).await
        );
        if zombie_stopped.is_none() && now - started >= stop_at {
            zombie.signal("STOP");
            zombie_stopped = Some(now);
        }
        if let Some(at) = zombie_stopped {
            if !zombie_resumed && now - at >= stopped_for {
                zombie.signal("CONT");
                zombie_resumed = true;
            }
        }
        if now >= next_kill {
            victim.kill();
            kills += 1;
            victim_incarnation += 1;
            victim = fleet.spawn("victim", victim_incarnation);
            next_kill = now + rng.between_ms(100, 500);
        }
        if agent_kills < REQUIRED_AGENT_KILLS && now >= next_agent_kill {
            agent.signal("STOP");
            let held = held_by(&store, AGENT).await;
            if held.is_empty() {
                agent.signal("CONT");
                next_agent_kill = now + Duration::from_millis(100);
            } else {
                agent.kill();
                agent_kills += 1;
                orphaned.extend(held);
                agent_incarnation += 1;
                agent = fleet.spawn(AGENT, agent_incarnation);
                next_agent_kill = now + rng.between_ms(1_000, 3_000);
            }
        }
        let (done, total) = completed(&store).await;
        // With nothing left to run the agent holds nothing, so its kills are no longer waited for (6 then fails).
        if done == total && zombie_resumed && kills >= required_kills {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    // The victim and the agent may have just been restarted and not yet handle SIGTERM: they end as they lived.
    victim.kill();
    agent.kill();
    // The others stop cleanly and print their totals.
    for child in [&steady, &zombie] {
        child.signal("TERM");
    }
    for child in [&mut steady, &mut zombie] {
        let status = child.wait();
        assert!(status.success(), "a worker exited with {status}");
    }

    // 1. Every session completed.
    let infos = store.sessions().await.expect("sessions");
    assert_eq!(infos.len(), sessions_wanted);
    let not_completed: Vec<_> = infos
        .iter()
        .filter(|info| info.state != SessionState::Completed)
        .map(|info| (info.id.0.clone(), info.state, info.failure.clone()))
        .collect();
    assert!(not_completed.is_empty(), "sessions not completed: {not_completed:?}");

    // 3. Invariants, and the calls each session's durable fragments hold.
    let mut durable_calls: BTreeSet<(String, String)> = BTreeSet::new();
    let mut tool_of: BTreeMap<(String, String), String> = BTreeMap::new();
    let epochs: BTreeMap<String, u64> = infos.iter().map(|info| (info.id.0.clone(), info.epoch)).collect();
    let mut agent_answered = 0;
    for info in &infos {
        let violations = check_session(&store, &info.id).await.expect("check a session");
        assert!(violations.is_empty(), "session {}: {violations:?}", info.id);
        let log = store.load_log(&info.id).await.expect("log");
        // 6. Every session ends with one of the two final answers.
        let answer = last_answer(&log);
        assert!(
            [SCENARIO_ANSWER, AGENT_ANSWER].contains(&answer.as_str()),
            "session {} ends with {answer:?}",
            info.id
        );
        agent_answered += usize::from(answer == AGENT_ANSWER);
        for stored in log {
            if let Message::Assistant(fragment) = &stored.message {
                for call in fragment.tool_calls() {
                    durable_calls.insert((info.id.0.clone(), call.id.clone()));
                    tool_of.insert((info.id.0.clone(), call.id.clone()), call.name.clone());
                }
            }
        }
    }

    // The logs: who took over and recovered what, and what the zombie did once resumed.
    let mut logs = vec![fleet.log("steady", 0), fleet.log("zombie", 0)];
    logs.extend((0..=victim_incarnation).map(|incarnation| fleet.log("victim", incarnation)));
    let agent_logs: Vec<String> = (0..=agent_incarnation)
        .map(|incarnation| fleet.log(AGENT, incarnation))
        .collect();
    // Takeovers across kinds: a session the agent claimed from a scenario worker, and the other way round.
    let from_scenario = agent_logs
        .iter()
        .flat_map(|log| log.lines())
        .filter(|line| {
            line.starts_with("claimed ") && line.contains(" from ") && !line.ends_with(&format!(" from {AGENT}"))
        })
        .count();
    let from_agent = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter(|line| line.starts_with("claimed ") && line.ends_with(&format!(" from {AGENT}")))
        .count();
    logs.extend(agent_logs);
    let recovered: BTreeSet<String> = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter_map(|line| line.strip_prefix("recovered "))
        .filter_map(|rest| rest.split(' ').next().map(str::to_owned))
        .collect();

    // 2 and 4. Every touched call is durable; none ran twice unless recovery re-ran an idempotent one.
    let touched = touches(&fleet.touch);
    assert!(!touched.is_empty(), "no tool body ran");
    let mut reruns = 0;
    for ((session, call), lines) in &touched {
        let key = (session.clone(), call.clone());
        assert!(
            durable_calls.contains(&key),
            "call {call} of session {session} ran without a durable fragment"
        );
        if *lines > 1 {
            assert_eq!(
                tool_of.get(&key).map(String::as_str),
                Some("fetch"),
                "call {call} of session {session} ran {lines} times, and its tool is not idempotent"
            );
            // Each claim runs a call at most once (live, or re-run by the recovery that follows a takeover), and the
            // epoch counts the claims: durable evidence, where a killed worker's log may miss its last line.
            let epoch = epochs.get(session).copied().unwrap_or(0);
            assert!(
                *lines as u64 <= epoch,
                "call {call} of session {session} ran {lines} times over {epoch} claim(s) of its session"
            );
            reruns += 1;
        }
    }

    // 5. The zombie lost its sessions once resumed, and the store fenced every write it then tried.
    let zombie_log = fleet.log("zombie", 0);
    let zombie_stats = fleet.stats("zombie", 0);
    let fenced_lines = zombie_log
        .lines()
        .filter(|line| line.starts_with("fenced-write "))
        .count();
    let lost = zombie_log.lines().filter(|line| line.starts_with("lost ")).count();
    assert!(lost > 0, "the zombie lost no session:\n{zombie_log}");
    assert!(
        fenced_lines > 0,
        "the zombie tried no write after losing its lease:\n{zombie_log}"
    );
    assert_eq!(
        zombie_stats["fenced_writes"].as_u64(),
        Some(fenced_lines as u64),
        "the zombie's totals: {zombie_stats}"
    );
    let taken_over: u64 = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter(|line| line.starts_with("claimed ") && line.contains(" from "))
        .count() as u64;
    // The inspection commands read the fleet's database by its URL.
    let inspected = run_json(&fleet.bin, &["inspect", &fleet.url, "--json"]);
    let inspected = inspected.as_array().expect("inspect --json gives an array");
    assert_eq!(inspected.len(), sessions_wanted);
    let mut agent_owned = 0;
    for session in inspected {
        assert_eq!(session["state"], "completed", "{}", session["session"]);
        let owner = session["owner"].as_str().unwrap_or_default();
        assert!(["steady", "zombie", "victim", AGENT].contains(&owner), "owner {owner}");
        assert!(session["epoch"].as_u64().is_some_and(|epoch| epoch >= 1));
        agent_owned += usize::from(owner == AGENT);
    }

    // 6. The real agent completed sessions, and the ones it held when killed were claimed again: every one is
    // completed (1), and at least one under a later claim (one may have been finished by a write the agent had
    // already sent when it was stopped).
    assert!(
        agent_owned > 0 && agent_answered > 0,
        "the real agent completed no session: {agent_owned} owned, {agent_answered} answered by it"
    );
    assert!(
        agent_kills > 0,
        "the agent was never killed while it held sessions (seed {seed})"
    );
    let taken_from_agent = orphaned
        .iter()
        .filter(|(session, epoch)| epochs.get(session).is_some_and(|now| now > epoch))
        .count();
    assert!(
        taken_from_agent > 0,
        "no session the agent held when killed was claimed again: {orphaned:?}"
    );
    let recovered_now = run_json(&fleet.bin, &["recover", &fleet.url, "--json"]);
    assert_eq!(
        recovered_now,
        Value::Array(Vec::new()),
        "a finished fleet leaves nothing to recover"
    );
    let svg = fleet.dir.join("timeline.svg");
    let drawn = Command::new(&fleet.bin)
        .args(["timeline", &fleet.url, "--out"])
        .arg(&svg)
        .output()
        .expect("run timeline");
    assert!(
        drawn.status.success(),
        "timeline: {}",
        String::from_utf8_lossy(&drawn.stderr)
    );
    assert!(std::fs::read_to_string(&svg).expect("the SVG").starts_with("<svg"));

    eprintln!(
        "fleet test: {sessions_wanted} sessions completed in {:.1} s; {kills} kills; {taken_over} takeovers; \
         {} sessions recovered; {reruns} idempotent re-runs; {} touched calls; zombie lost {lost} session(s), \
         {fenced_lines} fenced write(s); real agent: {agent_owned} sessions completed ({agent_answered} ended with \
         its answer), {agent_kills} kills orphaning {} sessions ({taken_from_agent} claimed again), {from_agent} \
         takeovers from it, {from_scenario} from scenario workers, {} model requests",
        elapsed.as_secs_f64(),
        recovered.len(),
        touched.len(),
        orphaned.len(),
        model.model_requests().len(),
    );
}
