//! The server, or a node of a cluster, killed at each named instant of a turn (issue 45, docs/reliability.md).
//!
//! `tests/restate_resume.rs` kills the deployment at the resume suite's crash points (`tests/resume/suite.rs`).
//! Here the deployment lives and something else dies at those instants: the deployment is started with
//! `HEADSTART_CRASH_AT` and `HEADSTART_CRASH_PAUSE_IN` (`headstart_sim::crash_at`), so the task that reaches the
//! point stops there and says so. The test then kills the single server, or the node of a three-node cluster that
//! drives the turn (the partition leader with a connection open to the deployment; node 1 or node 3 in turn should
//! none have one at that instant), with SIGKILL, lets the task go on, and starts the dead process again on its data. The turn must complete within 30 s of the kill, and then:
//!
//! - 4: the store loads, with the engine's invariants (every call one result, every run settled);
//! - 1: the log as it was at the instant is a prefix of the final log, message for message;
//! - 2: no body began twice (the deployment's recovery policy is the default: an interrupted call is not run
//!   again), and every body that began belongs to a call in the store.
//!
//! Needs the server binary as `tests/restate.rs` does; every process is killed when the test ends, pass or fail.
#![cfg(unix)]

#[path = "restate/crashed.rs"]
mod crashed;
#[path = "restate/harness.rs"]
mod harness;
#[path = "resume/suite.rs"]
mod suite;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use headstart::{AgentStop, SessionId};
use headstart_restate::local::LocalServer;
use headstart_restate::RestateClient;
use headstart_sim::crash_at::{CRASH_AT, PAUSE_IN};

use crashed::submit_prompt;
use harness::{
    attach_until_ended, node_driving, port, registered_deployment_via, server_binary, start_server, wait_until,
};
use suite::{touches, StoreAt, CASES, SCENARIO};
use support::workdir;

/// How soon after the kill the turn must have ended (issue 45: no session stuck after a node's death).
const AFTER_KILL: Duration = Duration::from_secs(30);

/// For each crash point in turn: a deployment pauses there, `victims` (node indexes, in turn) is killed, the
/// deployment goes on, the node starts again; the turn must complete with 4, 1 and 2 holding. Submissions and
/// attachments go through node `ingress`.
async fn a_death_at_every_point(mut server: LocalServer, ingress: usize, victims: &[usize]) {
    let begun = Instant::now();
    // A single server is started again at once, since nothing serves while it is down; a node once the turn ended.
    let single = server.node_count() == 1;
    let what = if single { "the server" } else { "a node" };
    let client = RestateClient::new(&server.ingress_url(ingress));
    let mut slowest = Duration::ZERO;
    let mut drove = 0;
    for (case, fallback) in CASES.iter().zip(victims.iter().cycle()) {
        let dir = workdir();
        let pause = dir.path().join("pause");
        std::fs::create_dir_all(&pause).expect("the pause folder");
        let pause_text = pause.display().to_string();
        let env = [(CRASH_AT, case.crash_at), (PAUSE_IN, pause_text.as_str())];
        let port = port();
        let _deployment = registered_deployment_via(&server, ingress, dir.path(), port, SCENARIO, &env, &[]);
        let (session, invocation) = submit_prompt(&client).await;
        wait_until("the deployment to reach its point", || pause.join("paused").exists());
        // In a cluster, the node that drives the turn dies: the partition leader that pushes the invocation to the
        // deployment. Should none be connected at this instant, the node whose turn it is.
        let driving = if single {
            None
        } else {
            node_driving(&server, port, ingress)
        };
        drove += usize::from(driving.is_some());
        let victim = driving.unwrap_or(*fallback);
        let who = match (single, driving) {
            (true, _) => what.to_owned(),
            (false, Some(_)) => format!("node {} (driving the turn)", victim + 1),
            (false, None) => format!("node {}", victim + 1),
        };
        let label = format!("{who} killed at {}", case.crash_at);
        // The turn is attached to through a node that lives.
        let attach = RestateClient::new(&server.ingress_url(if single { 0 } else { (victim + 1) % 3 }));
        let store = StoreAt::sqlite(&dir.path().join("agents.db"));
        let session = SessionId(session);
        let at_point = store.snapshot(&session).await;

        server.kill(victim);
        let killed = Instant::now();
        std::fs::write(pause.join("go"), "").expect("let the deployment go on");
        if single {
            server
                .restart(victim)
                .unwrap_or_else(|error| panic!("{label}: the server on its data: {error}"));
        }
        let report = attach_until_ended(&attach, &invocation, AFTER_KILL.saturating_sub(killed.elapsed()))
            .await
            .unwrap_or_else(|| panic!("{label}: the turn did not end within {AFTER_KILL:?} of the kill"));
        let took = killed.elapsed();
        slowest = slowest.max(took);
        assert_eq!(report.stop, AgentStop::Completed, "{label}: {report:?}");
        if !single {
            server
                .restart(victim)
                .unwrap_or_else(|error| panic!("{label}: the node on its data: {error}"));
        }
        check_survived(&label, &at_point, &store.snapshot(&session).await, dir.path(), &session);
        eprintln!(
            "resume suite, Restate, {label}: completed {} ms after the kill, {} recoveries",
            took.as_millis(),
            report.recoveries
        );
    }
    let driving = if single {
        String::new()
    } else {
        format!(" ({drove} of them the node driving the turn)")
    };
    eprintln!(
        "resume suite, Restate, {what} killed at {} points{driving}: every turn completed within {:.1} s of its kill \
         (bound {} s), {:.1} s in all",
        CASES.len(),
        slowest.as_secs_f64(),
        AFTER_KILL.as_secs(),
        begun.elapsed().as_secs_f64()
    );
}

/// Properties 4, 1 and 2 on the ended turn (`resumed`), against the log as it was at the instant (`at_point`).
fn check_survived(label: &str, at_point: &suite::Snapshot, resumed: &suite::Snapshot, dir: &Path, session: &SessionId) {
    let violations: Vec<String> = resumed.violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "{label}: property 4, the engine's invariants: {violations:?}"
    );
    assert!(
        resumed.log.len() >= at_point.log.len() && resumed.log[..at_point.log.len()] == at_point.log[..],
        "{label}: property 1, the log at the instant is not a prefix of the final one"
    );
    for (call, began) in touches(&dir.join("touch"), session) {
        assert!(began <= 1, "{label}: property 2, {call}'s body began {began} times");
        assert!(
            resumed.run(&call).is_some(),
            "{label}: property 2, {call} ran without a run"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_at_every_crash_point_of_a_turn_leaves_it_to_complete() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    a_death_at_every_point(server, 0, &[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_killed_at_every_crash_point_of_a_turn_leaves_it_to_complete() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let cluster = LocalServer::cluster(&binary, dir.path(), 3).expect("a 3-node cluster");
    a_death_at_every_point(cluster, 1, &[0, 2]).await;
}
