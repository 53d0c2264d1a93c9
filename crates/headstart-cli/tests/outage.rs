//! `headstart worker` when its provider is down (issue 44), and queue names at `submit` and `worker`:
//!
//! - A worker whose provider answers every request with HTTP 500 releases the session it claimed back to its
//!   queue with a backoff (`retrying … after attempt 1 of 5`), not `failed`; after `--breaker 1` such session it
//!   stops claiming (`breaker-open`), and its metrics say so (`headstart_worker_claiming{worker="broken"} 0`, one
//!   `end="retry"` finish). `inspect --json` shows the session pending, one attempt, the provider's error as its last
//!   error and the end of its backoff; the other session was never claimed. Its totals say it too.
//! - A queue name that is empty, over 64 bytes or not printable is refused at `submit` and `worker` (exit 2),
//!   before anything is created.
//!
//! Every process is killed when its test ends ([`ChildGuard`]); the test waits for log lines, never for time.
#![cfg(unix)]

mod support;

use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart_bench::prometheus;
use serde_json::Value;
use support::{ChildGuard, DownProvider};

/// Generous: each model request is tried three times (0.5 s and 1 s apart) before the worker hears of the outage.
const DEADLINE: Duration = Duration::from_secs(120);

fn headstart() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
}

#[test]
fn a_worker_whose_provider_is_down_releases_its_session_and_stops_claiming() {
    let temp = tempfile::tempdir().expect("temp dir");
    let db = temp.path().join("queue.db");
    let provider = DownProvider::start(500);
    let ids = support::submit_count(std::path::Path::new(env!("CARGO_BIN_EXE_headstart")), &db, 2, "go");
    let mut worker = ChildGuard::spawn(
        headstart()
            .args(["worker", "--store"])
            .arg(&db)
            .args(["--id", "broken", "--concurrency", "1", "--poll-ms", "20"])
            .args(["--breaker", "1", "--breaker-ms", "600000", "--retry-ms", "600000"])
            .args(["--provider", "openai-compatible", "--model", "m", "--base-url"])
            .arg(provider.url("/v1"))
            .args(["--metrics", "127.0.0.1:0"])
            .current_dir(temp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("start the worker");
    let received = support::lines_of(worker.stderr().expect("piped standard error"));
    let deadline = Instant::now() + DEADLINE;
    let mut endpoint: Option<SocketAddr> = None;
    let mut seen = Vec::new();
    let mut retrying = None;
    let mut opened = None;
    while opened.is_none() {
        let line = received
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the worker's breaker did not open; its log: {seen:#?}"));
        if let Some(addr) = support::metrics_address(&line) {
            endpoint = Some(addr);
        }
        if line.starts_with("retrying ") {
            retrying = Some(line.clone());
        }
        if line.starts_with("breaker-open ") {
            opened = Some(line.clone());
        }
        if line.starts_with("finished ") {
            assert_eq!(
                line,
                format!(
                    "finished {} released for a retry: attempt 1 of 5: {}",
                    ids[0],
                    retrying
                        .as_deref()
                        .and_then(|line| line.split(": the provider failed: ").nth(1))
                        .unwrap_or("?")
                ),
                "released, not failed"
            );
        }
        seen.push(line);
    }
    let retrying = retrying.expect("a retrying line before the breaker opened");
    assert!(
        retrying.starts_with(&format!("retrying {} after attempt 1 of 5, in ", ids[0]))
            && retrying.contains("the provider failed")
            && retrying.contains("500"),
        "{retrying}"
    );
    let opened = opened.expect("the breaker line");
    assert!(
        opened.starts_with("breaker-open 1 session(s) in a row stopped on the provider; claiming nothing for "),
        "{opened}"
    );
    let requests = provider.requests();
    assert_eq!(
        requests, 3,
        "one session's request, tried three times by the model's own retries"
    );

    let endpoint = endpoint.expect("the metrics line");
    let text = prometheus::fetch(endpoint, Duration::from_secs(30)).expect("GET /metrics");
    let page = prometheus::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    let value = |name: &str, labels: &[(&str, &str)]| {
        page.value(name, labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{text}"))
    };
    assert_eq!(value("headstart_worker_claiming", &[("worker", "broken")]), 0.0);
    assert_eq!(
        value(
            "headstart_sessions_finished_total",
            &[("end", "retry"), ("queue", "default")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "headstart_sessions_finished_total",
            &[("end", "failed"), ("queue", "default")]
        ),
        0.0
    );

    let inspected = headstart()
        .args(["inspect"])
        .arg(&db)
        .arg("--json")
        .output()
        .expect("inspect");
    assert!(inspected.status.success());
    let sessions: Value = serde_json::from_slice(&inspected.stdout).expect("inspect prints JSON");
    let entry = |id: &str| {
        sessions
            .as_array()
            .and_then(|all| all.iter().find(|entry| entry["session"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {sessions:#}"))
    };
    let released = entry(&ids[0]);
    assert_eq!(released["state"], "pending", "{released:#}");
    assert_eq!(
        (released["queue"].as_str(), released["attempts"].as_u64()),
        (Some("default"), Some(1))
    );
    let failure = released["failure"].as_str().unwrap_or_default();
    assert!(
        failure.starts_with("attempt 1 of 5: ") && failure.contains("500"),
        "{failure}"
    );
    assert!(released["not_before_us"].as_i64().is_some(), "{released:#}");
    let untouched = entry(&ids[1]);
    assert_eq!(
        (untouched["state"].as_str(), untouched["attempts"].as_u64()),
        (Some("pending"), Some(0))
    );
    assert_eq!(untouched["epoch"], 0, "the open breaker claimed nothing more");
    let human = headstart().args(["inspect"]).arg(&db).output().expect("inspect");
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains(&format!(
            "session {} (pending, released 1 time(s) for a provider outage, not claimed before ",
            ids[0]
        )),
        "{human}"
    );

    worker.signal("TERM");
    let mut out = String::new();
    worker
        .stdout()
        .expect("piped standard output")
        .read_to_string(&mut out)
        .expect("read the totals");
    assert!(worker.wait().success());
    let totals: Value = serde_json::from_str(out.trim()).expect("the totals are JSON");
    assert_eq!(
        (
            &totals["claimed"],
            &totals["retried"],
            &totals["failed"],
            &totals["breaker_opened"]
        ),
        (&Value::from(1), &Value::from(1), &Value::from(0), &Value::from(1)),
        "{totals}"
    );
}

#[test]
fn a_bad_queue_name_is_refused_at_submit_and_worker() {
    let temp = tempfile::tempdir().expect("temp dir");
    let db = temp.path().join("never.db");
    let long = "q".repeat(65);
    for (name, expected) in [
        ("", "must not be empty"),
        ("two words", "whitespace or a control character"),
        ("bell\u{7}", "whitespace or a control character"),
        (long.as_str(), "at most 64 bytes"),
    ] {
        let submit = headstart()
            .args(["submit", "--store"])
            .arg(&db)
            .args(["--queue", name, "go"])
            .output()
            .expect("submit");
        let worker = headstart()
            .args(["worker", "--store"])
            .arg(&db)
            .args(["--id", "w", "--queue", name, "--scenario", "nothing.json"])
            .output()
            .expect("worker");
        for (command, output) in [("submit", submit), ("worker", worker)] {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{command} {name:?}: {stderr}");
            assert!(stderr.contains(expected), "{command} {name:?}: {stderr}");
        }
    }
    assert!(!db.exists(), "nothing was created");
}
