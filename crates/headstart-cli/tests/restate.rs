//! headstart on Restate (issue 31), against a real `restate-server` on loopback: `headstart restate serve` runs the
//! scenario `tests/restate/early.json` (an early `lookup` sealed 50 ms into a 1.5 s response, a sync `write` at the
//! end, then the answer), registered with the server; `headstart submit --restate` sends the prompt.
//!
//! 1. The early call's body begins, through its journaled seal and its durable call to `Tools`, at least 800 ms
//!    before the response's terminal commit; the session completes with the engine's invariants.
//! 2. The deployment killed with SIGKILL while the lookup runs and the stream goes on, then started again: the turn
//!    ends `completed` after one recovery, every call has exactly one result, and no body ran twice.
//!
//! The server binary comes from `RESTATE_SERVER`, else `target/restate/node_modules/…` (where `.ci/run` installs the
//! pinned npm package). Without it the tests say so loudly and pass, or fail under `HEADSTART_REQUIRE_RESTATE=1`
//! (CI sets it). Every process a test starts is killed when it ends, pass or fail ([`ChildGuard`]).
#![cfg(unix)]

mod support;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart::store::RunState;
use headstart::{Message, SessionId, SqliteStore, TranscriptStore};
use headstart_testkit::invariants::check_session;
use serde_json::Value;
use support::{workdir, ChildGuard};

const SCENARIO: &str = "tests/restate/early.json";
/// The npm package's binary under the workspace's `target/restate` (`.ci/run` installs it there).
const NPM_BINARY: &str = "restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server";
/// How long anything here may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_headstart"))
}

/// The server binary, or `None` (after saying why) when the test should pass without it.
fn server_binary() -> Option<PathBuf> {
    let candidate = std::env::var_os("RESTATE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            target.join(NPM_BINARY)
        });
    if candidate.is_file() {
        return Some(candidate);
    }
    let why = format!(
        "no restate-server at {} (set RESTATE_SERVER, or `npm install --prefix target/restate \
         @restatedev/restate-server-linux-x64@1.7.12`)",
        candidate.display()
    );
    assert!(
        std::env::var("HEADSTART_REQUIRE_RESTATE").as_deref() != Ok("1"),
        "{why}, and HEADSTART_REQUIRE_RESTATE=1"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A GET on loopback: the status line's code, or `None` when nothing answers.
fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_whitespace().nth(1)?.parse().ok()
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Restate server on free loopback ports, its data in `dir`.
struct Server {
    _process: ChildGuard,
    ingress: u16,
    admin: u16,
}

impl Server {
    fn start(binary: &Path, dir: &Path) -> Self {
        let (ingress, admin, node) = (free_port(), free_port(), free_port());
        let process = ChildGuard::spawn(
            Command::new(binary)
                .arg("--no-logo")
                .env("RESTATE_INGRESS__BIND_ADDRESS", format!("127.0.0.1:{ingress}"))
                .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
                .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{node}"))
                .env("RESTATE_ADVERTISED_ADDRESS", format!("http://127.0.0.1:{node}"))
                .env("RESTATE_BASE_DIR", dir.join("restate-data"))
                .env("DO_NOT_TRACK", "1")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .expect("start restate-server");
        wait_until("restate-server's admin API", || {
            get_status(admin, "/health") == Some(200)
        });
        wait_until("restate-server's ingress", || {
            get_status(ingress, "/restate/health").is_some()
        });
        Server {
            _process: process,
            ingress,
            admin,
        }
    }
}

/// `headstart restate serve` on `port`, registered with `server`, running the scenario with every body touching
/// `dir/touch`.
fn deployment(server: &Server, dir: &Path, port: u16) -> ChildGuard {
    let mut child = ChildGuard::spawn(
        Command::new(bin())
            .args(["restate", "serve", "--addr", &format!("127.0.0.1:{port}"), "--store"])
            .arg(dir.join("agents.db"))
            .arg("--scenario")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO))
            .arg("--touch-dir")
            .arg(dir.join("touch"))
            .args(["--register", &format!("http://127.0.0.1:{}", server.admin)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("start the deployment");
    let mut stderr = child.stderr().expect("piped");
    // Read its log until it says it registered, then keep draining it so it never blocks on a full pipe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buffer = [0u8; 4096];
        let mut told = false;
        while let Ok(read) = stderr.read(&mut buffer) {
            if read == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buffer[..read]));
            if !told && text.contains("registered http://") {
                told = true;
                let _ = tx.send(());
            }
        }
        if !told {
            let _ = tx.send(());
            eprintln!("deployment log: {text}");
        }
    });
    rx.recv_timeout(PATIENCE).expect("the deployment registered");
    child
}

/// `headstart submit --restate … [--wait]`: its standard output's lines.
fn submit(server: &Server, wait: bool) -> ChildGuard {
    let mut command = Command::new(bin());
    command
        .args(["submit", "--restate", &format!("http://127.0.0.1:{}", server.ingress)])
        .arg("--scenario")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if wait {
        command.arg("--wait");
    }
    ChildGuard::spawn(&mut command).expect("start submit")
}

/// The report line and the session id `submit --wait` printed.
fn report_and_session(output: &std::process::Output) -> (Value, SessionId) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "submit failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a report and a session id: {stdout}");
    let report: Value = serde_json::from_str(lines[0]).expect("the report is JSON");
    (report, SessionId(lines[1].to_owned()))
}

/// How many times each call's body began (lines of its touch file).
fn touches(dir: &Path, session: &SessionId) -> Vec<(String, usize)> {
    let mut found: Vec<(String, usize)> = std::fs::read_dir(dir.join("touch").join(&session.0))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| {
                    let lines = std::fs::read_to_string(entry.path())
                        .unwrap_or_default()
                        .lines()
                        .count();
                    (entry.file_name().to_string_lossy().into_owned(), lines)
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn open_store(dir: &Path) -> SqliteStore {
    SqliteStore::open_read_only(dir.join("agents.db")).expect("open the store")
}

async fn assert_sound(store: &SqliteStore, session: &SessionId, calls: &[&str]) {
    let violations = check_session(store, session).await.expect("check the session");
    assert!(violations.is_empty(), "invariants: {violations:?}");
    let log = store.load_log(session).await.expect("log");
    let results: Vec<String> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let mut unique = results.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), results.len(), "one result per call: {results:?}");
    assert_eq!(unique, calls, "every call has its result");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_call_starts_through_restate_long_before_the_stream_ends() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = Server::start(&binary, dir.path());
    let _deployment = deployment(&server, dir.path(), free_port());
    let (report, session) = report_and_session(&submit(&server, true).output());
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    assert_eq!(report["recoveries"], 0, "{report}");

    let store = open_store(dir.path());
    assert_sound(&store, &session, &["c_lookup", "c_write"]).await;
    let runs = store.tool_runs(&session).await.expect("runs");
    let lookup = runs
        .iter()
        .find(|run| run.call_id == "c_lookup")
        .expect("the lookup ran");
    let started = lookup.started_at_us.expect("the lookup's start is recorded");
    // The response's terminal commit: its last assistant fragment of request 0.
    let log = store.load_log(&session).await.expect("log");
    let terminal = log
        .iter()
        .filter(|stored| stored.request == Some(0) && matches!(stored.message, Message::Assistant(_)))
        .map(|stored| stored.at_us)
        .max()
        .expect("request 0's fragments");
    let lead_ms = (terminal - started) / 1_000;
    eprintln!("lookup began {lead_ms} ms before the response's terminal commit");
    assert!(
        lead_ms >= 800,
        "the lookup began only {lead_ms} ms before the stream's end"
    );
    assert_eq!(
        touches(dir.path(), &session),
        [("c_lookup".into(), 1), ("c_write".into(), 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_killed_mid_turn_is_recovered_and_nothing_runs_twice() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = Server::start(&binary, dir.path());
    let port = free_port();
    let mut first = deployment(&server, dir.path(), port);
    let submitted = submit(&server, true);
    // Kill the deployment once the lookup's body has begun, while the stream (1.5 s) goes on.
    wait_until("the lookup's body to begin", || {
        std::fs::read_dir(dir.path().join("touch"))
            .map(|sessions| {
                sessions
                    .filter_map(Result::ok)
                    .any(|session| session.path().join("c_lookup").exists())
            })
            .unwrap_or(false)
    });
    first.kill();
    let _second = deployment(&server, dir.path(), port);
    let (report, session) = report_and_session(&submitted.output());
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    assert_eq!(report["recoveries"], 1, "{report}");

    let store = open_store(dir.path());
    // The write was never sealed: the crash cut the response before it, and the resumed loop answered.
    assert_sound(&store, &session, &["c_lookup"]).await;
    let runs = store.tool_runs(&session).await.expect("runs");
    let lookup = runs
        .iter()
        .find(|run| run.call_id == "c_lookup")
        .expect("the lookup's run");
    // Its body began in the killed process: recovery reports it interrupted, never runs it again.
    assert_eq!(lookup.state, RunState::Cancelled, "{lookup:?}");
    for (call, began) in touches(dir.path(), &session) {
        assert_eq!(began, 1, "{call} began {began} times");
    }
}
