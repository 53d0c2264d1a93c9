//! What the Restate tests share (`tests/restate.rs`, `tests/restate_chaos.rs`, the resume suites): a server on loopback, deployments
//! and balancers as child processes (killed when dropped, pass or fail), submission, and readers of what the store
//! holds and each body did. Every wait has a bound ([`PATIENCE`]) and fails the test instead of hanging.
// Each test file uses some of these.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart::{Message, SessionId, SqliteStore, TranscriptStore};
use headstart_restate::local::{find_server, free_port, LocalServer};
use headstart_restate::{new_session_id, RestateClient, RestateError, TurnReport, TurnRequest};
use headstart_testkit::invariants::check_session;
use serde_json::Value;

use crate::support::ChildGuard;

/// An early `lookup` sealed 50 ms into a 1.5 s response, a sync `write` at 1.2 s, then the answer.
pub const SCENARIO: &str = "tests/restate/early.json";
/// Two early lookups pending at once, the first one slower: their outcomes come back in the other order.
pub const TWO_EARLY: &str = "tests/restate/two_early.json";
/// How long anything here may take before the test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_headstart"))
}

pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// The server binary, or `None` (after saying why) when the test should pass without it.
pub fn server_binary() -> Option<PathBuf> {
    headstart_testkit::skip::or_skip(
        "HEADSTART_REQUIRE_RESTATE",
        "the Restate test",
        find_server(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")),
    )
}

pub fn port() -> u16 {
    free_port().expect("a free port")
}

pub fn start_server(binary: &Path, dir: &Path) -> LocalServer {
    LocalServer::start(binary, dir).expect("start restate-server")
}

pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads `child`'s standard error (piped) until a line contains `text`, and keeps draining it on a thread so the
/// child never blocks on a full pipe.
pub fn wait_for_line(child: &mut ChildGuard, text: &'static str) {
    let mut log = child.stderr().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        let mut buffer = [0u8; 4096];
        let mut told = false;
        while let Ok(read) = log.read(&mut buffer) {
            if read == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
            if !told && seen.contains(text) {
                told = true;
                let _ = tx.send(());
            }
        }
        if !told {
            eprintln!("log without `{text}`: {seen}");
        }
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("no `{text}` line within {} s", PATIENCE.as_secs()));
}

/// `headstart restate serve` on `port`, registered with `server`, running `scenario_file` with every body touching
/// `dir/touch`; returns once it says it registered.
pub fn registered_deployment(server: &LocalServer, dir: &Path, port: u16, scenario_file: &str) -> ChildGuard {
    registered_deployment_in(server, dir, port, scenario_file, &[])
}

/// [`registered_deployment`] with `env` added to its environment.
pub fn registered_deployment_in(
    server: &LocalServer,
    dir: &Path,
    port: u16,
    scenario_file: &str,
    env: &[(&str, &str)],
) -> ChildGuard {
    registered_deployment_with(server, dir, port, scenario_file, env, &[])
}

/// [`registered_deployment_in`] with `extra` flags.
pub fn registered_deployment_with(
    server: &LocalServer,
    dir: &Path,
    port: u16,
    scenario_file: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> ChildGuard {
    registered_deployment_via(server, 0, dir, port, scenario_file, env, extra)
}

/// [`registered_deployment_with`], registered through node `admin`'s admin API (whose discovery then holds a
/// connection to it).
pub fn registered_deployment_via(
    server: &LocalServer,
    admin: usize,
    dir: &Path,
    port: u16,
    scenario_file: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> ChildGuard {
    let mut child = ChildGuard::spawn(
        Command::new(bin())
            .args(deployment_args(dir, port, scenario_file))
            .args(extra)
            .args(["--register", &server.admin_url(admin)])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("start the deployment");
    wait_for_line(&mut child, "registered http://");
    child
}

fn deployment_args(dir: &Path, port: u16, scenario_file: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["restate", "serve", "--addr"].map(OsString::from).into();
    args.push(format!("127.0.0.1:{port}").into());
    args.push("--store".into());
    args.push(dir.join("agents.db").into());
    args.push("--scenario".into());
    args.push(scenario(scenario_file).into());
    args.push("--touch-dir".into());
    args.push(dir.join("touch").into());
    args
}

/// A deployment that is not registered itself (a balancer is, in front of it), with its metrics served.
pub struct Deployment {
    process: Option<ChildGuard>,
    args: Vec<OsString>,
    /// Where it serves.
    pub port: u16,
    /// Where its metrics are.
    pub metrics: u16,
}

impl Deployment {
    /// Starts one on free ports running `scenario_file` with `extra` flags; returns once it listens.
    pub fn start(dir: &Path, scenario_file: &str, extra: &[&str]) -> Deployment {
        let (port, metrics) = (port(), port());
        let mut args = deployment_args(dir, port, scenario_file);
        args.extend(extra.iter().map(OsString::from));
        args.push("--metrics".into());
        args.push(format!("127.0.0.1:{metrics}").into());
        let mut deployment = Deployment {
            process: None,
            args,
            port,
            metrics,
        };
        deployment.restart();
        deployment
    }

    /// Starts it (again) on its ports; returns once it listens (it serves its metrics only once it does).
    pub fn restart(&mut self) {
        self.process = Some(
            ChildGuard::spawn(
                Command::new(bin())
                    .args(&self.args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )
            .expect("start a deployment"),
        );
        let metrics = self.metrics;
        wait_until("a deployment to listen", || {
            TcpStream::connect(("127.0.0.1", metrics)).is_ok()
        });
    }

    /// Kills it with SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Sends it a signal (`STOP`, `CONT`).
    pub fn signal(&self, signal: &str) {
        if let Some(process) = &self.process {
            process.signal(signal);
        }
    }

    /// Counter `name` with `label` on its metrics page (0 when absent).
    pub fn counter(&self, name: &str, label: &str) -> f64 {
        counter(&metrics_page(self.metrics), name, label)
    }

    /// Turns that began here.
    pub fn turns_begun(&self) -> f64 {
        self.counter("headstart_restate_journal_entries_total", "kind=\"begin\"")
    }
}

/// `headstart restate balance` in front of `deployments`, registered with `server`, with `extra` flags; returns once
/// it says it registered.
pub fn balancer(server: &LocalServer, deployments: &[Deployment], extra: &[&str]) -> ChildGuard {
    balancer_on(server, port(), deployments, extra)
}

/// [`balancer`] serving on `port`.
pub fn balancer_on(server: &LocalServer, port: u16, deployments: &[Deployment], extra: &[&str]) -> ChildGuard {
    let mut command = Command::new(bin());
    command.args(["restate", "balance", "--addr", &format!("127.0.0.1:{port}")]);
    for deployment in deployments {
        command.args(["--to", &format!("http://127.0.0.1:{}", deployment.port)]);
    }
    command
        .args(extra)
        .args(["--register", &server.admin_url(0)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = ChildGuard::spawn(&mut command).expect("start the balancer");
    wait_for_line(&mut child, "registered http://");
    child
}

/// `headstart submit --restate … [--wait]` with `scenario_file`'s prompt.
pub fn submit(server: &LocalServer, wait: bool, scenario_file: &str) -> ChildGuard {
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

/// Waits for the turn `invocation` to end, attaching again (every 500 ms) while the server answers an error: it was
/// restarted under the caller, or its cluster is moving partition leaders. `None` when `within` passed first.
pub async fn attach_until_ended(client: &RestateClient, invocation: &str, within: Duration) -> Option<TurnReport> {
    tokio::time::timeout(within, async {
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
    .ok()
}

/// The report line and the session id `submit --wait` printed.
pub fn report_and_session(output: &std::process::Output) -> (Value, SessionId) {
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
pub fn touches(dir: &Path, session: &SessionId) -> Vec<(String, usize)> {
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

/// Asserts that no body of `session` began twice. A touch file without a line is a touch cut off by a kill between
/// the file's creation and its line's write: that body never began (the touch runs before it), and the call's replay
/// found it started and gave it its interrupted result. The chaos test met one in a clean-clone CI run.
pub fn assert_no_body_twice(dir: &Path, session: &SessionId) {
    for (call, began) in touches(dir, session) {
        assert!(began <= 1, "{call} of {session} began {began} times");
    }
}

/// Waits until some session's lookup body has begun (its touch file exists).
pub fn wait_for_lookup(dir: &Path) {
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

pub fn open_store(dir: &Path) -> SqliteStore {
    SqliteStore::open_read_only(dir.join("agents.db")).expect("open the store")
}

/// The call ids of `session`'s results, in log order.
pub async fn result_ids(store: &SqliteStore, session: &SessionId) -> Vec<String> {
    let log = store.load_log(session).await.expect("log");
    log.iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result.tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Asserts the engine's invariants on `session` and one result per call; returns the calls with a result, sorted.
pub async fn assert_one_result_per_call(store: &SqliteStore, session: &SessionId) -> Vec<String> {
    let violations = check_session(store, session).await.expect("check the session");
    assert!(violations.is_empty(), "invariants of {session}: {violations:?}");
    let results = result_ids(store, session).await;
    let mut unique = results.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), results.len(), "one result per call: {results:?}");
    unique
}

/// [`assert_one_result_per_call`], and exactly `calls` have results.
pub async fn assert_sound(store: &SqliteStore, session: &SessionId, calls: &[&str]) {
    let unique = assert_one_result_per_call(store, session).await;
    assert_eq!(unique, calls, "every call has its result");
}

/// What the store holds of `session`: its log and its runs, for comparing before and after.
pub async fn snapshot(store: &SqliteStore, session: &SessionId) -> String {
    let log = store.load_log(session).await.expect("log");
    let runs = store.tool_runs(session).await.expect("runs");
    format!("{log:?}\n{runs:?}")
}

/// The sum of the samples of counter `name` whose line holds `label`, on a metrics page.
pub fn counter(page: &str, name: &str, label: &str) -> f64 {
    page.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.split_whitespace().last()?.parse::<f64>().ok())
        .fold(0.0, |sum, sample| sum + sample)
}

/// A GET of `http://127.0.0.1:PORT/metrics`: the page's text (empty when nothing answers).
pub fn metrics_page(port: u16) -> String {
    http(port, "GET", "/metrics", None).1
}

/// The body of `GET path` on loopback (empty when nothing answers).
pub fn http_get(port: u16, path: &str) -> String {
    let (_, answer) = http(port, "GET", path, None);
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// An HTTP/1.1 request with a JSON body on loopback: its status code.
pub fn send_json(port: u16, method: &str, path: &str, body: &str) -> Option<u16> {
    http(port, method, path, Some(body)).0
}

fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> (Option<u16>, String) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (None, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let body = body.unwrap_or_default();
    let sent = write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    if sent.is_err() {
        return (None, String::new());
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer.split_whitespace().nth(1).and_then(|code| code.parse().ok());
    (status, answer)
}

/// Shortens `server`'s timeouts of `service`, so it gives a silent attempt up within seconds.
pub fn shorten_timeouts(server: &LocalServer, service: &str) {
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

/// The prompt of the scenarios here.
pub fn look_it_up() -> TurnRequest {
    TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    }
}

/// Submits `count` new sessions through `client`; returns each with its turn's invocation. A cluster's other nodes
/// learn a registration a moment after the node that accepted it: `NotRegistered` is tried again (within
/// [`PATIENCE`]).
pub async fn submit_round(client: &RestateClient, count: usize) -> Vec<(String, String)> {
    let started = Instant::now();
    let mut turns = Vec::with_capacity(count);
    while turns.len() < count {
        let session = new_session_id();
        match client.submit(&session, &look_it_up(), &session).await {
            Ok(invocation) => turns.push((session, invocation)),
            Err(RestateError::NotRegistered { .. }) if started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("submit: {error}"),
        }
    }
    turns
}

/// The node of `server` driving the invocation the deployment on `port` is in the middle of: the one with a
/// connection open to it (Restate's partition leader pushes an invocation to the deployment). `registrar`, whose
/// admin API discovered the deployment, may keep an idle connection too: it is the one only when no other node is
/// connected. `None` when no node is.
pub fn node_driving(server: &LocalServer, port: u16, registrar: usize) -> Option<usize> {
    let connected = nodes_connected(server, port);
    connected
        .iter()
        .copied()
        .find(|node| *node != registrar)
        .or_else(|| connected.first().copied())
}

/// The nodes of `server` with an established TCP connection to `port`. Read from Linux's `/proc`: a node whose
/// socket is the local end of such a connection.
pub fn nodes_connected(server: &LocalServer, port: u16) -> Vec<usize> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) = (fields.get(2), fields.get(3), fields.get(9)) else {
                continue;
            };
            let remote_port = remote
                .rsplit(':')
                .next()
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            // 01: ESTABLISHED.
            if remote_port == Some(port) && *state == "01" {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    (0..server.node_count())
        .filter(|index| {
            let Some(pid) = server.pid(*index) else {
                return false;
            };
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok)
                    .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                    .any(|target| inodes.iter().any(|inode| target.as_os_str() == inode.as_str()))
            })
        })
        .collect()
}
