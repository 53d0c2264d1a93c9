//! headstart on Restate under chaos (issues 31 and 45), two campaigns whose length the environment sets:
//!
//! 1. **Deployments and the server.** Two deployments behind `headstart restate balance` run sessions of
//!    `tests/restate/early.json`, submitted in waves, one wave before each kill. `HEADSTART_RESTATE_KILLS` kills
//!    (default 9) come at random moments, 400–800 ms apart. Each is a SIGKILL of a deployment, in turn, started
//!    again 200 ms later. The fifth of every nine kills the server instead, which is started again on its data.
//!    `HEADSTART_CHAOS_SESSIONS` sessions in all (default 300, and at least 8 per kill). Then every session must have
//!    completed within 300 s (no stall), with the engine's invariants, exactly one result per call, and no body begun
//!    twice. The scenario's tools are not idempotent: recovery fails an interrupted call, never runs it again.
//! 2. **A node of a cluster.** Three `restate-server` nodes on loopback (the log replicated on 2). For each of
//!    `HEADSTART_CLUSTER_KILLS` rounds (default 2), 12 sessions go in through node 2's ingress. Once one of them has
//!    begun its lookup, node 1 or node 3 (in turn) is killed with SIGKILL. Every session of the round must end, and
//!    complete, within 30 s of the kill, with one result per call and no body twice. Then the node starts again on
//!    its data. Issue 45 found sessions stuck for minutes after node 1's death: a replay of `Tools/run_call`
//!    contradicted its journal and was retried forever.
//!
//! Each prints what the chaos cost and its seed (`HEADSTART_RESTATE_SEED` repeats a run). Needs the server binary as
//! `tests/restate.rs` does; every process is killed when the test ends.
#![cfg(unix)]

#[path = "restate/harness.rs"]
mod harness;
mod support;

use std::time::{Duration, Instant};

use headstart::store::RunState;
use headstart::{SessionId, TranscriptStore};
use headstart_restate::local::LocalServer;
use headstart_restate::{new_session_id, RestateClient, RestateError};

use harness::*;
use support::campaign::{env_number, seed, Rng};
use support::workdir;

/// Sessions of a default run.
const SESSIONS: u64 = 300;
/// Sessions per kill, at least, so that a long campaign keeps the deployments busy throughout.
const SESSIONS_PER_KILL: u64 = 8;
/// Kills of a default run: eight of deployments, one of the server.
const KILLS: u64 = 9;
/// Every ninth kill, this one is the server's.
const SERVER_EVERY: u64 = 9;
const SERVER_AT: u64 = 4;
/// How long after the last kill every session must have ended.
const NO_STALL: Duration = Duration::from_secs(300);
/// A cluster campaign's rounds by default, and its sessions per round.
const CLUSTER_KILLS: u64 = 2;
const CLUSTER_SESSIONS: usize = 12;
/// How soon after a node's death every session of its round must have ended (issue 45).
const AFTER_NODE_KILL: Duration = Duration::from_secs(30);

/// Submits one session, again while the server is down or restarting (within [`PATIENCE`]); returns its id and
/// the turn's invocation.
async fn submit_one(client: &RestateClient) -> (SessionId, String) {
    let started = Instant::now();
    let session = new_session_id();
    loop {
        match client.submit(&session, &look_it_up(), &session).await {
            Ok(invocation) => return (SessionId(session), invocation),
            // An answer that this session was submitted already: the earlier try got through before its answer
            // was lost, and its turn is the one to wait for.
            Err(RestateError::SubmittedTwice { invocation, .. }) => return (SessionId(session), invocation),
            Err(error) if started.elapsed() < PATIENCE => {
                eprintln!("submit {session}: {error}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("submit {session}: {error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_under_kills_of_deployments_and_the_server_lose_nothing_and_run_nothing_twice() {
    let Some(binary) = server_binary() else { return };
    let kills = env_number("HEADSTART_RESTATE_KILLS").unwrap_or(KILLS);
    let sessions = env_number("HEADSTART_CHAOS_SESSIONS")
        .unwrap_or(SESSIONS)
        .max(kills * SESSIONS_PER_KILL);
    let seed = seed("HEADSTART_RESTATE_SEED");
    eprintln!("chaos: seed {seed} (HEADSTART_RESTATE_SEED={seed} repeats it), {sessions} sessions, {kills} kills");
    let mut rng = Rng(seed);
    let begun = Instant::now();
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

    let per_wave = sessions.div_ceil(kills + 1);
    let mut turns: Vec<(SessionId, String)> = Vec::with_capacity(sessions as usize);
    let (mut deployment_kills, mut server_kills) = (0, 0);
    for kill in 0..=kills {
        while (turns.len() as u64) < (per_wave * (kill + 1)).min(sessions) {
            turns.push(submit_one(&client).await);
        }
        if kill == kills {
            break;
        }
        tokio::time::sleep(rng.between_ms(400, 800)).await;
        if kill % SERVER_EVERY == SERVER_AT {
            server.kill(0);
            server.restart(0).expect("the server starts again on its data");
            server_kills += 1;
        } else {
            let deployment = &mut deployments[(deployment_kills % 2) as usize];
            deployment.kill();
            tokio::time::sleep(Duration::from_millis(200)).await;
            deployment.restart();
            deployment_kills += 1;
        }
    }
    let last_kill = Instant::now();

    let store = open_store(dir.path());
    let (mut recoveries, mut interrupted, mut calls) = (0, 0, 0);
    for (session, invocation) in &turns {
        // The server was restarted under the caller.
        let report = attach_until_ended(&client, invocation, NO_STALL.saturating_sub(last_kill.elapsed()))
            .await
            .unwrap_or_else(|| panic!("session {session} did not end within {NO_STALL:?} of the last kill"));
        assert_eq!(report.stop, headstart::AgentStop::Completed, "{session}: {report:?}");
        recoveries += report.recoveries;
        calls += assert_one_result_per_call(&store, session).await.len();
        assert_no_body_twice(dir.path(), session);
        let runs = store.tool_runs(session).await.expect("runs");
        interrupted += runs.iter().filter(|run| run.state == RunState::Cancelled).count();
    }
    eprintln!(
        "chaos: {} sessions completed, {deployment_kills} deployment kills and {server_kills} server kills; \
         {calls} calls with one result each, {recoveries} recoveries, {interrupted} interrupted calls, 0 lost, 0 \
         bodies begun twice, 0 stalls; all ended {:.1} s after the last kill, {:.1} s in all",
        turns.len(),
        last_kill.elapsed().as_secs_f64(),
        begun.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_losing_a_node_again_and_again_completes_every_session_soon_after_each_kill() {
    let Some(binary) = server_binary() else { return };
    let rounds = env_number("HEADSTART_CLUSTER_KILLS").unwrap_or(CLUSTER_KILLS);
    let begun = Instant::now();
    let dir = workdir();
    let mut cluster = LocalServer::cluster(&binary, dir.path(), 3).expect("a 3-node cluster");
    let _deployment = registered_deployment(&cluster, dir.path(), port(), SCENARIO);
    // Node 2 (index 1) takes the submissions; nodes 1 and 3 die in turn.
    let client = RestateClient::new(&cluster.ingress_url(1));
    let store = open_store(dir.path());
    let (mut sessions, mut recoveries, mut slowest) = (0, 0, Duration::ZERO);
    for round in 0..rounds {
        let victim = if round % 2 == 0 { 0 } else { 2 };
        let turns = submit_round(&client, CLUSTER_SESSIONS).await;
        wait_until("a lookup of the round to begin", || {
            turns
                .iter()
                .any(|(session, _)| dir.path().join("touch").join(session).join("c_lookup").exists())
        });
        cluster.kill(victim);
        let killed = Instant::now();
        for (session, invocation) in &turns {
            let report = attach_until_ended(&client, invocation, AFTER_NODE_KILL.saturating_sub(killed.elapsed()))
                .await
                .unwrap_or_else(|| {
                    panic!(
                        "round {round}: session {session} did not end within {AFTER_NODE_KILL:?} of node {}'s SIGKILL",
                        victim + 1
                    )
                });
            assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");
            recoveries += report.recoveries;
            let session = SessionId(session.clone());
            assert_one_result_per_call(&store, &session).await;
            assert_no_body_twice(dir.path(), &session);
        }
        slowest = slowest.max(killed.elapsed());
        sessions += turns.len();
        cluster.restart(victim).expect("the node starts again on its data");
    }
    eprintln!(
        "cluster chaos: {rounds} node kills, {sessions} sessions completed, {recoveries} recoveries; every round's \
         sessions ended within {:.1} s of its kill (bound {} s), {:.1} s in all",
        slowest.as_secs_f64(),
        AFTER_NODE_KILL.as_secs(),
        begun.elapsed().as_secs_f64()
    );
}
