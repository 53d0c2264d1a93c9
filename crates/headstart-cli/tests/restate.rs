//! headstart on Restate (issue 31), against a real `restate-server` on loopback: `headstart restate serve` runs the
//! scenario `tests/restate/early.json` (an early `lookup` sealed 50 ms into a 1.5 s response, a sync `write` at the
//! end, then the answer), registered with the server; `headstart submit --restate` sends the prompt.
//!
//! 1. The early call's body begins, through its journaled seal and its durable call to `Tools`, at least 800 ms
//!    before the response's terminal commit; the session completes with the engine's invariants.
//! 2. The deployment killed with SIGKILL while the lookup runs and the stream goes on, then started again: the turn
//!    ends `completed` after one recovery, every call has exactly one result, and no body ran twice.
//! 3. Two early calls pending at once (`tests/restate/two_early.json`), ending in the other order: both results
//!    come back and the turn completes.
//! 4. A session submitted twice under its key: the second submission is refused with the first turn's invocation,
//!    and one turn runs.
//! 5. `restate-server` killed with SIGKILL while the lookup runs, then started again on its data: the caller
//!    attaches again and the turn completes, one result per call, no body twice.
//! 6. Two deployments behind `headstart restate balance`, one turn at a time each, four sessions at once: both run
//!    turns, every turn begins once and completes.
//! 7. A 3-node cluster (log replicated on 2), node 1 killed with SIGKILL while four turns run: every turn completes
//!    through node 2's ingress (those whose partition node 1 led after a recovery), invariants hold, no body twice.
//! 8. SIGSTOP of the deployment running a turn (two behind the balancer, the services' timeouts shortened): the
//!    turn completes on the other one; after SIGCONT the stopped one's writes are refused and the store is
//!    unchanged.
//!
//! The server (`headstart_restate::local::LocalServer`, killed when dropped) binary comes from `RESTATE_SERVER`, else `target/restate/node_modules/…` (where `.ci/run` installs the
//! pinned npm package). Without it the tests say so loudly and pass, or fail under `HEADSTART_REQUIRE_RESTATE=1`
//! (CI sets it). Every process a test starts is killed when it ends, pass or fail ([`ChildGuard`], `LocalServer`).
#![cfg(unix)]

mod support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart::store::RunState;
use headstart::{Message, SessionId, SqliteStore, TranscriptStore};
use headstart_restate::local::{find_server, free_port, LocalServer};
use headstart_restate::{new_session_id, RestateClient, RestateError, TurnRequest};
use headstart_testkit::invariants::check_session;
use serde_json::Value;
use support::{workdir, ChildGuard};

const SCENARIO: &str = "tests/restate/early.json";
/// Two early lookups pending at once, the first one slower: their outcomes come back in the other order.
const TWO_EARLY: &str = "tests/restate/two_early.json";
/// How long anything here may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_headstart"))
}

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// The server binary, or `None` (after saying why) when the test should pass without it.
fn server_binary() -> Option<PathBuf> {
    let why = match find_server(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")) {
        Ok(binary) => return Some(binary),
        Err(why) => why,
    };
    assert!(
        std::env::var("HEADSTART_REQUIRE_RESTATE").as_deref() != Ok("1"),
        "{why}, and HEADSTART_REQUIRE_RESTATE=1"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn port() -> u16 {
    free_port().expect("a free port")
}

fn start_server(binary: &Path, dir: &Path) -> LocalServer {
    LocalServer::start(binary, dir).expect("start restate-server")
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `headstart restate serve` on `port`, registered with `server`, running `scenario` with every body touching
/// `dir/touch`.
fn deployment(server: &LocalServer, dir: &Path, port: u16, scenario_file: &str) -> ChildGuard {
    let mut child = ChildGuard::spawn(
        Command::new(bin())
            .args(["restate", "serve", "--addr", &format!("127.0.0.1:{port}"), "--store"])
            .arg(dir.join("agents.db"))
            .arg("--scenario")
            .arg(scenario(scenario_file))
            .arg("--touch-dir")
            .arg(dir.join("touch"))
            .args(["--register", &server.admin_url(0)])
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

/// `headstart submit --restate … [--wait]` with `scenario_file`'s prompt.
fn submit(server: &LocalServer, wait: bool, scenario_file: &str) -> ChildGuard {
    let mut command = Command::new(bin());
    command
        .args(["submit", "--restate", &server.ingress_url(0)])
        .arg("--scenario")
        .arg(scenario(scenario_file))
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

/// Waits until some session's lookup body has begun (its touch file exists).
fn wait_for_lookup(dir: &Path) {
    wait_until("the lookup's body to begin", || {
        std::fs::read_dir(dir.join("touch"))
            .map(|sessions| {
                sessions
                    .filter_map(Result::ok)
                    .any(|session| session.path().join("c_lookup").exists())
            })
            .unwrap_or(false)
    });
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
    let server = start_server(&binary, dir.path());
    let _deployment = deployment(&server, dir.path(), port(), SCENARIO);
    let (report, session) = report_and_session(&submit(&server, true, SCENARIO).output_within(PATIENCE));
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
    let server = start_server(&binary, dir.path());
    let port = port();
    let mut first = deployment(&server, dir.path(), port, SCENARIO);
    let submitted = submit(&server, true, SCENARIO);
    // Kill the deployment once the lookup's body has begun, while the stream (1.5 s) goes on.
    wait_for_lookup(dir.path());
    first.kill();
    let _second = deployment(&server, dir.path(), port, SCENARIO);
    let (report, session) = report_and_session(&submitted.output_within(PATIENCE));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_early_calls_pending_at_once_both_come_back_in_either_order() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let _deployment = deployment(&server, dir.path(), port(), TWO_EARLY);
    // Before the invocation awaited its calls through one select, the slow call's completion could be read by the
    // fast call's future and the turn hung here.
    let (report, session) = report_and_session(&submit(&server, true, TWO_EARLY).output_within(PATIENCE));
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    let store = open_store(dir.path());
    assert_sound(&store, &session, &["c_fast", "c_slow"]).await;
    assert_eq!(
        touches(dir.path(), &session),
        [("c_fast".into(), 1), ("c_slow".into(), 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_submitted_twice_is_refused_with_the_earlier_turn() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let _deployment = deployment(&server, dir.path(), port(), SCENARIO);
    let client = RestateClient::new(&server.ingress_url(0));
    let session = new_session_id();
    let request = TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    };
    let first = client.submit(&session, &request, &session).await.expect("submitted");
    let again = client
        .submit(&session, &request, &session)
        .await
        .expect_err("the same key again");
    assert!(
        matches!(&again, RestateError::SubmittedTwice { invocation, .. } if *invocation == first),
        "{again:?}"
    );
    assert!(again.to_string().contains("already submitted"), "{again}");
    let report = client.attach(&first).await.expect("the first turn ends");
    assert_eq!(report.stop["reason"], "completed", "{report:?}");
    let store = open_store(dir.path());
    let log = store.load_log(&SessionId(session)).await.expect("log");
    let prompts = log
        .iter()
        .filter(|stored| matches!(stored.message, Message::User(_)))
        .count();
    assert_eq!(prompts, 1, "one turn ran: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_turn_comes_back_and_the_turn_completes_once() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let mut server = start_server(&binary, dir.path());
    let _deployment = deployment(&server, dir.path(), port(), SCENARIO);
    let client = RestateClient::new(&server.ingress_url(0));
    let session = new_session_id();
    let request = TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    };
    let invocation = client.submit(&session, &request, &session).await.expect("submitted");
    wait_for_lookup(dir.path());
    server.kill(0);
    server.restart(0).expect("the server starts again on its data");
    // The caller's connection died with the server: it attaches again by the invocation id.
    let report = tokio::time::timeout(PATIENCE, client.attach(&invocation))
        .await
        .expect("the turn ends")
        .expect("its report");
    assert_eq!(report.stop["reason"], "completed", "{report:?}");

    let store = open_store(dir.path());
    let session = SessionId(session);
    let violations = check_session(&store, &session).await.expect("check");
    assert!(violations.is_empty(), "invariants: {violations:?}");
    let log = store.load_log(&session).await.expect("log");
    let mut results: Vec<String> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let count = results.len();
    results.dedup();
    assert_eq!(results.len(), count, "one result per call: {results:?}");
    assert!(results.contains(&"c_lookup".to_owned()), "{results:?}");
    for (call, began) in touches(dir.path(), &session) {
        assert_eq!(began, 1, "{call} began {began} times");
    }
}

/// The sum of counter `name{kind="begin"}`-style lines with `label` on a deployment's metrics page.
fn counter(page: &str, name: &str, label: &str) -> f64 {
    page.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

/// A GET of `http://127.0.0.1:PORT/metrics`: the page's text.
fn metrics_page(port: u16) -> String {
    use std::io::Write as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("ask");
    let mut page = String::new();
    let _ = stream.read_to_string(&mut page);
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deployments_behind_the_balancer_share_the_turns() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let (first, second) = (port(), port());
    let metrics = [port(), port()];
    let mut deployments = Vec::new();
    for (index, deployment_port) in [first, second].into_iter().enumerate() {
        deployments.push(
            ChildGuard::spawn(
                Command::new(bin())
                    .args(["restate", "serve", "--addr", &format!("127.0.0.1:{deployment_port}")])
                    .arg("--store")
                    .arg(dir.path().join("agents.db"))
                    .arg("--scenario")
                    .arg(scenario(TWO_EARLY))
                    .args(["--concurrency", "1"])
                    .args(["--metrics", &format!("127.0.0.1:{}", metrics[index])])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )
            .expect("start a deployment"),
        );
    }
    // A deployment serves its metrics once it listens: the balancer must not find one that does not listen yet.
    for metrics_port in metrics {
        wait_until("a deployment to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", metrics_port)).is_ok()
        });
    }
    let balancer = port();
    let mut balance = ChildGuard::spawn(
        Command::new(bin())
            .args(["restate", "balance", "--addr", &format!("127.0.0.1:{balancer}")])
            .args(["--to", &format!("http://127.0.0.1:{first}")])
            .args(["--to", &format!("http://127.0.0.1:{second}")])
            .args(["--register", &server.admin_url(0)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("start the balancer");
    let mut log = balance.stderr().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buffer = [0u8; 1024];
        while let Ok(read) = log.read(&mut buffer) {
            if read == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buffer[..read]));
            if text.contains("registered http://") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(PATIENCE).expect("the balancer registered");

    // One turn at a time per deployment, four sessions submitted at once: both must take turns.
    let output = Command::new(bin())
        .args(["submit", "--restate", &server.ingress_url(0), "--count", "4"])
        .arg("--scenario")
        .arg(scenario(TWO_EARLY))
        .output()
        .expect("submit");
    assert!(output.status.success(), "{output:?}");
    let sessions: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(sessions.len(), 4, "{sessions:?}");
    let client = RestateClient::new(&server.ingress_url(0));
    let request = TurnRequest {
        prompt: "look both up".to_owned(),
        ..TurnRequest::default()
    };
    let store = open_store(dir.path());
    for session in &sessions {
        // Submitting again with the session's key only names its turn; attach to it.
        let invocation = match client.submit(session, &request, session).await {
            Err(RestateError::SubmittedTwice { invocation, .. }) => invocation,
            other => panic!("the turn was submitted already: {other:?}"),
        };
        let report = tokio::time::timeout(PATIENCE, client.attach(&invocation))
            .await
            .expect("the turn ends")
            .expect("its report");
        assert_eq!(report.stop["reason"], "completed", "{report:?}");
        assert_sound(&store, &SessionId(session.clone()), &["c_fast", "c_slow"]).await;
    }
    let turns: Vec<f64> = metrics
        .iter()
        .map(|port| {
            counter(
                &metrics_page(*port),
                "headstart_restate_journal_entries_total",
                "kind=\"begin\"",
            )
        })
        .collect();
    assert_eq!(turns.iter().sum::<f64>(), 4.0, "every turn began once: {turns:?}");
    assert!(
        turns.iter().all(|&began| began >= 1.0),
        "both deployments ran turns: {turns:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_killed_mid_turn_leaves_every_session_to_complete() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let mut cluster = LocalServer::cluster(&binary, dir.path(), 3).expect("a 3-node cluster");
    let _deployment = deployment(&cluster, dir.path(), port(), SCENARIO);
    // Submitted and attached through node 2's ingress; node 1 (which provisioned the cluster) is killed.
    let client = RestateClient::new(&cluster.ingress_url(1));
    let request = TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    };
    let mut turns = Vec::new();
    let started = Instant::now();
    while turns.len() < 4 {
        let session = new_session_id();
        match client.submit(&session, &request, &session).await {
            Ok(invocation) => turns.push((session, invocation)),
            // The registration reaches the other nodes' ingress a moment after node 1's admin API accepted it.
            Err(RestateError::NotRegistered { .. }) if started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("submit: {error}"),
        }
    }
    wait_for_lookup(dir.path());
    cluster.kill(0);
    let store = open_store(dir.path());
    for (session, invocation) in &turns {
        let report = tokio::time::timeout(Duration::from_secs(120), async {
            // The ingress may answer an error while the cluster moves its partitions' leaders: ask again.
            loop {
                match client.attach(invocation).await {
                    Ok(report) => return report,
                    Err(error) => {
                        eprintln!("attach {invocation}: {error}; again");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        })
        .await
        .expect("the turn ends within two minutes of the kill");
        eprintln!("{report:?}");
        assert_eq!(report.stop["reason"], "completed", "{report:?}");
        let session = SessionId(session.clone());
        let violations = check_session(&store, &session).await.expect("check");
        assert!(violations.is_empty(), "invariants: {violations:?}");
        for (call, began) in touches(dir.path(), &session) {
            assert_eq!(began, 1, "{call} began {began} times");
        }
    }
}

/// An HTTP/1.1 request with a JSON body on loopback; its status code.
fn send_json(port: u16, method: &str, path: &str, body: &str) -> Option<u16> {
    use std::io::Write as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_whitespace().nth(1)?.parse().ok()
}

/// What the store holds of `session`: its log and its runs, for comparing before and after.
async fn snapshot(store: &SqliteStore, session: &SessionId) -> String {
    let log = store.load_log(session).await.expect("log");
    let runs = store.tool_runs(session).await.expect("runs");
    format!("{log:?}\n{runs:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_deployment_is_replaced_and_its_writes_are_refused_when_it_resumes() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let ports = [port(), port()];
    let metrics = [port(), port()];
    let mut deployments = Vec::new();
    for index in 0..2 {
        deployments.push(
            ChildGuard::spawn(
                Command::new(bin())
                    .args(["restate", "serve", "--addr", &format!("127.0.0.1:{}", ports[index])])
                    .arg("--store")
                    .arg(dir.path().join("agents.db"))
                    .arg("--scenario")
                    .arg(scenario(SCENARIO))
                    .arg("--touch-dir")
                    .arg(dir.path().join("touch"))
                    .args(["--metrics", &format!("127.0.0.1:{}", metrics[index])])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )
            .expect("start a deployment"),
        );
    }
    // A deployment serves its metrics once it listens: the balancer must not find one that does not listen yet.
    for metrics_port in metrics {
        wait_until("a deployment to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", metrics_port)).is_ok()
        });
    }
    let balancer = port();
    let mut balance = ChildGuard::spawn(
        Command::new(bin())
            .args(["restate", "balance", "--addr", &format!("127.0.0.1:{balancer}")])
            .args(["--to", &format!("http://127.0.0.1:{}", ports[0])])
            .args(["--to", &format!("http://127.0.0.1:{}", ports[1])])
            .args(["--answer-within-ms", "1000", "--set-aside-ms", "600000"])
            .args(["--register", &server.admin_url(0)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("start the balancer");
    wait_for_line(&mut balance, "registered http://");
    // Short timeouts, so the server gives a silent attempt up within seconds instead of minutes.
    for service in ["Session", "Tools"] {
        assert_eq!(
            send_json(
                server.ports(0).admin,
                "PATCH",
                &format!("/services/{service}"),
                r#"{"inactivity_timeout":"2s","abort_timeout":"2s"}"#
            ),
            Some(200),
            "shorten {service}'s timeouts"
        );
    }

    let client = RestateClient::new(&server.ingress_url(0));
    let session = new_session_id();
    let request = TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    };
    let invocation = client.submit(&session, &request, &session).await.expect("submitted");
    let began = |index: usize| {
        counter(
            &metrics_page(metrics[index]),
            "headstart_restate_journal_entries_total",
            "kind=\"begin\"",
        )
    };
    let mut running = None;
    wait_until("the turn to begin on a deployment", || {
        running = (0..2).find(|index| began(*index) >= 1.0);
        running.is_some()
    });
    let running = running.expect("found");
    wait_for_lookup(dir.path());
    deployments[running].signal("STOP");

    let report = tokio::time::timeout(Duration::from_secs(120), client.attach(&invocation))
        .await
        .expect("the turn ends on the other deployment")
        .expect("its report");
    assert_eq!(report.stop["reason"], "completed", "{report:?}");
    // One recovery at least: more when the server also gave up the new attempt while it waited for the call the
    // stopped deployment held.
    assert!(report.recoveries >= 1, "{report:?}");
    let store = open_store(dir.path());
    let session = SessionId(session);
    let before = snapshot(&store, &session).await;

    // The stopped deployment resumes with the old attempt's engine in memory: whatever it writes now is refused.
    deployments[running].signal("CONT");
    wait_until("the resumed deployment's stale writes to be refused", || {
        counter(
            &metrics_page(metrics[running]),
            "headstart_restate_stale_writes_refused_total",
            "where=",
        ) >= 1.0
    });
    assert_eq!(
        snapshot(&store, &session).await,
        before,
        "a stale write reached the store"
    );
    let violations = check_session(&store, &session).await.expect("check");
    assert!(violations.is_empty(), "invariants: {violations:?}");
    for (call, began) in touches(dir.path(), &session) {
        assert_eq!(began, 1, "{call} began {began} times");
    }
    let info = store.session(&session).await.expect("read").expect("the session");
    assert_eq!(info.state.as_str(), "completed", "{info:?}");
}

/// Reads `child`'s standard error until a line contains `text`, then drains the rest on a thread.
fn wait_for_line(child: &mut ChildGuard, text: &'static str) {
    let mut log = child.stderr().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        let mut buffer = [0u8; 1024];
        while let Ok(read) = log.read(&mut buffer) {
            if read == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
            if seen.contains(text) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(PATIENCE).expect("the line");
}
