//! headstart on Restate under chaos (issue 31): `HEADSTART_CHAOS_SESSIONS` sessions (default 300) of
//! `tests/restate/early.json` submitted at once to two deployments behind `headstart restate balance`, while the
//! deployments are killed with SIGKILL and started again, one after the other, eight times, and `restate-server`
//! itself once. Then every session must have completed, with the engine's invariants, exactly one result per call,
//! and no body begun twice (the scenario's tools are not idempotent: recovery fails an interrupted call, never runs
//! it again). The test prints what the chaos cost: recoveries and interrupted calls.
//!
//! Needs the server binary as `tests/restate.rs` does; every process is killed when the test ends.
#![cfg(unix)]

#[path = "restate/harness.rs"]
mod harness;
mod support;

use std::time::Duration;

use headstart::{SessionId, TranscriptStore};
use headstart_restate::{new_session_id, RestateClient, TurnRequest};

use harness::*;
use support::workdir;

/// Sessions of the run, unless `HEADSTART_CHAOS_SESSIONS` says otherwise.
const SESSIONS: usize = 300;
/// Kills of a deployment during the run.
const KILLS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_under_kills_of_deployments_and_the_server_lose_nothing_and_run_nothing_twice() {
    let Some(binary) = server_binary() else { return };
    let sessions = std::env::var("HEADSTART_CHAOS_SESSIONS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(SESSIONS);
    let dir = workdir();
    let mut server = start_server(&binary, dir.path());
    let mut deployments = [
        Deployment::start(dir.path(), SCENARIO, &["--concurrency", "32"]),
        Deployment::start(dir.path(), SCENARIO, &["--concurrency", "32"]),
    ];
    let _balancer = balancer(
        &server,
        &deployments,
        &["--answer-within-ms", "2000", "--set-aside-ms", "1000"],
    );

    let client = RestateClient::new(&server.ingress_url(0));
    let request = TurnRequest {
        prompt: "look it up and write it down".to_owned(),
        ..TurnRequest::default()
    };
    let mut turns = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let session = new_session_id();
        let invocation = client.submit(&session, &request, &session).await.expect("submitted");
        turns.push((SessionId(session), invocation));
    }

    // The chaos: a deployment killed and started again every 600 ms, in turn; the server killed once, halfway.
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let deployment = &mut deployments[kill % 2];
        deployment.kill();
        tokio::time::sleep(Duration::from_millis(200)).await;
        deployment.restart();
        if kill == KILLS / 2 {
            server.kill(0);
            server.restart(0).expect("the server starts again on its data");
        }
    }

    let store = open_store(dir.path());
    let (mut recoveries, mut interrupted) = (0, 0);
    for (session, invocation) in &turns {
        // The server was restarted under the caller.
        let report = attach_until_ended(&client, invocation, Duration::from_secs(300))
            .await
            .unwrap_or_else(|| panic!("session {session} did not end"));
        assert_eq!(report.stop, headstart::AgentStop::Completed, "{session}: {report:?}");
        recoveries += report.recoveries;
        assert_one_result_per_call(&store, session).await;
        assert_no_body_twice(dir.path(), session);
        let runs = store.tool_runs(session).await.expect("runs");
        interrupted += runs
            .iter()
            .filter(|run| run.state == headstart::store::RunState::Cancelled)
            .count();
    }
    eprintln!(
        "chaos: {sessions} sessions completed, {KILLS} deployment kills and 1 server kill; {recoveries} recoveries, \
         {interrupted} interrupted calls, 0 lost, 0 bodies begun twice"
    );
}
