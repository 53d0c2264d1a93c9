//! `headstart worker --metrics 127.0.0.1:0`: the worker logs the address it bound, serves valid Prometheus text on
//! `/metrics` (checked with `headstart_bench::prometheus`, which refuses malformed pages), and its counters match
//! the totals it prints when it stops, after a run of a few scenario sessions on a SQLite queue.
#![cfg(unix)]

mod support;

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart_bench::fleet::{scenario, FleetLoad};
use headstart_bench::prometheus;
use serde_json::Value;
use support::ChildGuard;

const SESSIONS: usize = 3;
/// Generous: the machine may be busy; the run itself takes well under a second.
const DEADLINE: Duration = Duration::from_secs(120);

fn headstart() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
}

#[test]
fn the_metrics_endpoint_serves_prometheus_text_that_matches_the_worker_totals() {
    let temp = tempfile::tempdir().expect("temp dir");
    let db = temp.path().join("queue.db");
    let scenario_path = temp.path().join("scenario.json");
    let load = FleetLoad {
        model_ms: 20,
        tool_ms: 10,
    };
    std::fs::write(&scenario_path, scenario(load).to_string()).expect("write the scenario");
    let ids = support::submit_count(Path::new(env!("CARGO_BIN_EXE_headstart")), &db, SESSIONS, "go");
    assert_eq!(ids.len(), SESSIONS);

    let mut worker = ChildGuard::spawn(
        headstart()
            .args(["worker", "--store"])
            .arg(&db)
            .args(["--id", "w1", "--scenario"])
            .arg(&scenario_path)
            .args(["--poll-ms", "20", "--metrics", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("start the worker");
    let received = support::lines_of(worker.stderr().expect("piped standard error"));
    let deadline = Instant::now() + DEADLINE;
    let mut endpoint: Option<SocketAddr> = None;
    let mut finished = 0;
    let mut seen = Vec::new();
    while endpoint.is_none() || finished < SESSIONS {
        let line = received
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the worker did not finish {SESSIONS} sessions; its log: {seen:#?}"));
        if let Some(addr) = support::metrics_address(&line) {
            endpoint = Some(addr);
        }
        if line.starts_with("finished ") {
            assert!(line.ends_with(" completed"), "{line}");
            finished += 1;
        }
        seen.push(line);
    }
    let endpoint = endpoint.expect("the metrics line");
    assert_ne!(endpoint.port(), 0, "the bound port is logged, not the one asked for");
    // A session task leaves the running gauge just after it logs its `finished` line: scrape until it has.
    let (text, page) = loop {
        let text = prometheus::fetch(endpoint, Duration::from_secs(30)).expect("GET /metrics");
        let page = prometheus::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
        if page.value("headstart_sessions_running", &[]) == Some(0.0) || Instant::now() > deadline {
            break (text, page);
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    worker.signal("TERM");
    let mut out = String::new();
    worker
        .stdout()
        .expect("piped standard output")
        .read_to_string(&mut out)
        .expect("read the totals");
    assert!(worker.wait().success());
    let totals: Value = serde_json::from_str(out.trim()).expect("the totals are JSON");

    let counter = |name: &str, labels: &[(&str, &str)]| {
        page.value(name, labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{text}"))
    };
    let total = |key: &str| totals[key].as_u64().unwrap_or_else(|| panic!("{key} in {totals}")) as f64;
    assert_eq!(total("claimed"), SESSIONS as f64);
    assert_eq!(
        counter("headstart_sessions_claimed_total", &[("queue", "default")]),
        total("claimed")
    );
    assert_eq!(counter("headstart_sessions_taken_over_total", &[]), total("taken_over"));
    assert_eq!(
        counter("headstart_recovered_calls_total", &[]),
        total("recovered_calls")
    );
    for (end, key) in [
        ("completed", "completed"),
        ("failed", "failed"),
        ("released", "released"),
        ("retry", "retried"),
    ] {
        assert_eq!(
            counter(
                "headstart_sessions_finished_total",
                &[("end", end), ("queue", "default")]
            ),
            total(key),
            "{end}"
        );
    }
    let worker_id = "w1";
    assert_eq!(counter("headstart_worker_claiming", &[("worker", worker_id)]), 1.0);
    assert_eq!(counter("headstart_leases_lost_total", &[]), total("lost"));
    assert_eq!(counter("headstart_fenced_writes_total", &[]), total("fenced_writes"));
    assert_eq!(counter("headstart_sessions_running", &[]), 0.0);
    // Each session: two early calls while the model streams, one sync call after it.
    let sessions = SESSIONS as f64;
    assert_eq!(
        counter("headstart_tool_calls_started_total", &[("when", "early")]),
        2.0 * sessions
    );
    assert_eq!(
        counter("headstart_tool_calls_started_total", &[("when", "after_stream")]),
        sessions
    );
    for (histogram, labels) in [
        ("headstart_seal_to_start_seconds", vec![("when", "early")]),
        ("headstart_seal_to_start_seconds", vec![("when", "after_stream")]),
        // Per session: two prefixes, the terminal fragment, the final answer.
        ("headstart_fragment_commit_seconds", vec![]),
        ("headstart_claim_duration_seconds", vec![]),
    ] {
        assert_eq!(page.types[histogram], "histogram");
        let count = counter(&format!("{histogram}_count"), &labels);
        assert!(count >= 1.0, "{histogram} {labels:?}: {count}");
    }
    assert_eq!(
        counter("headstart_seal_to_start_seconds_count", &[("when", "early")]),
        2.0 * sessions
    );
    assert_eq!(counter("headstart_fragment_commit_seconds_count", &[]), 4.0 * sessions);
    // Every headstart metric is described; a SQLite worker sends no PostgreSQL statements.
    for (name, kind) in &page.types {
        if name.starts_with("headstart_") {
            assert!(page.help.contains_key(name), "{name} ({kind}) has no HELP");
        }
    }
    assert_eq!(page.sum("headstart_store_statements_total"), None);
}
