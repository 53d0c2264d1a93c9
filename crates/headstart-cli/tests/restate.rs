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
//!    and one turn runs. Before the deployment is registered, a submission is refused as `NotRegistered`, and an
//!    unknown turn cannot be attached to.
//! 5. `restate-server` killed with SIGKILL while the lookup runs, then started again on its data: the caller
//!    attaches again and the turn completes, one result per call, no body twice.
//! 6. Two deployments behind `headstart restate balance`, one turn at a time each, four sessions at once: both run
//!    turns, every turn begins once and completes.
//! 7. A 3-node cluster (log replicated on 2), node 1 killed with SIGKILL while four turns run: every turn completes
//!    through node 2's ingress (those whose partition node 1 led after a recovery), invariants hold, no body twice.
//! 8. SIGSTOP of the deployment running a turn (two behind the balancer, the services' timeouts shortened): the
//!    turn completes on the other one; after SIGCONT the stopped one's writes are refused and the store is
//!    unchanged.
//! 9. `inspect --restate` and `serve --restate` show the server's side beside the store: a completed turn, and a
//!    session whose deployment is gone (submitted, not begun, its turn backing off with the failure).
//! 10. The deployment aborts (`HEADSTART_RESTATE_FAULT`) right after the lookup's outcome is journaled, before
//!     `Tools/run_call` returns: on the next deployment the replay returns the journaled outcome, so the lookup keeps
//!     its real result, its body ran once, and the turn completes (issue 45: a replay never contradicts its journal).
//! 11. Every attempt of `Tools/run_call` fails (`HEADSTART_RESTATE_FAULT=fail-run-call`): `inspect --restate` shows,
//!     under the turn that waits, the call Restate keeps retrying and its last failure, and the deployment's
//!     `headstart_restate_calls_failing` counts it.
//! 12. A body that passes its timeout and one that panics, on `Tools`: each call ends with the outcome, state and text
//!     the same scenario gives in process (`headstart replay`), through the engine's one body runner.
//!
//! The server (`headstart_restate::local::LocalServer`, killed when dropped) binary comes from `RESTATE_SERVER`, else `target/restate/node_modules/…` (where `.ci/run` installs the
//! pinned npm package). Without it the tests say so loudly and pass, or fail under `HEADSTART_REQUIRE_RESTATE=1`
//! (CI sets it). Every process a test starts is killed when it ends, pass or fail ([`ChildGuard`], `LocalServer`).
#![cfg(unix)]

#[path = "restate/harness.rs"]
mod harness;
mod support;

use headstart::store::{RunState, ToolRun};
use headstart::{Message, SessionId, SqliteStore, TranscriptStore};
use headstart_restate::local::LocalServer;
use headstart_restate::{new_session_id, RestateClient, RestateError, TurnRequest};
use std::time::Duration;

use harness::*;
use support::{terminal_commit_us, workdir, ChildGuard};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_call_starts_through_restate_long_before_the_stream_ends() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let _deployment = registered_deployment(&server, dir.path(), port(), SCENARIO);
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
    let lead_ms = (terminal_commit_us(&log, 0) - started) / 1_000;
    eprintln!("lookup began {lead_ms} ms before the response's terminal commit");
    assert!(
        lead_ms >= 800,
        "the lookup began only {lead_ms} ms before the stream's end"
    );
    assert_eq!(
        touches(dir.path(), &session),
        [("c_lookup".into(), 1), ("c_write".into(), 1)]
    );
    // The turn's attempt finished the session it had taken over.
    let info = store.session(&session).await.expect("read").expect("the session");
    assert_eq!(info.state.as_str(), "completed", "{info:?}");
    assert!(
        info.owner.as_deref().is_some_and(|owner| owner.starts_with("restate ")),
        "{info:?}"
    );
}

/// The end of a turn (`submitted`, `submit --wait`) whose deployment died with the lookup's body begun and was
/// replaced: it completed after one recovery, with the lookup's result only (the write was never sealed: the crash
/// cut the response before it, and the resumed loop answered). Returns the store, the session and the lookup's run.
async fn lookup_after_one_recovery(dir: &std::path::Path, submitted: ChildGuard) -> (SqliteStore, SessionId, ToolRun) {
    let (report, session) = report_and_session(&submitted.output_within(PATIENCE));
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    assert_eq!(report["recoveries"], 1, "{report}");
    let store = open_store(dir);
    assert_sound(&store, &session, &["c_lookup"]).await;
    let lookup = store
        .tool_runs(&session)
        .await
        .expect("runs")
        .into_iter()
        .find(|run| run.call_id == "c_lookup")
        .expect("the lookup's run");
    (store, session, lookup)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_killed_mid_turn_is_recovered_and_nothing_runs_twice() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let port = port();
    let mut first = registered_deployment(&server, dir.path(), port, SCENARIO);
    let submitted = submit(&server, true, SCENARIO);
    // Kill the deployment once the lookup's body has begun, while the stream (1.5 s) goes on.
    wait_for_lookup(dir.path());
    first.kill();
    let _second = registered_deployment(&server, dir.path(), port, SCENARIO);
    let (_, session, lookup) = lookup_after_one_recovery(dir.path(), submitted).await;
    // Its body began in the killed process: recovery reports it interrupted, never runs it again.
    assert_eq!(lookup.state, RunState::Cancelled, "{lookup:?}");
    assert_no_body_twice(dir.path(), &session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_whose_outcome_was_journaled_keeps_it_when_its_attempt_dies_before_the_invocation_ends() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let port = port();
    // The deployment dies right after the lookup's outcome is journaled, before `Tools/run_call` returns it (and
    // with it the turn's attempt, mid-stream).
    let mut first = registered_deployment_in(
        &server,
        dir.path(),
        port,
        SCENARIO,
        &[(headstart_restate::FAULT_VARIABLE, "abort-after-outcome")],
    );
    let submitted = submit(&server, true, SCENARIO);
    let status = first.wait_within(PATIENCE);
    assert!(!status.success(), "the deployment aborted at the fault: {status:?}");
    let _second = registered_deployment(&server, dir.path(), port, SCENARIO);
    let (store, session, lookup) = lookup_after_one_recovery(dir.path(), submitted).await;
    // The replayed `run_call` found the body's outcome in its journal and returned it: the lookup's real result,
    // not "interrupted" (which the `started` marker alone would say, and Restate would then retry forever as a
    // journal mismatch had the output been the handler's return).
    assert_eq!(lookup.state, RunState::Finished, "{lookup:?}");
    let log = store.load_log(&session).await.expect("log");
    let texts = support::result_texts(&log);
    assert!(texts.iter().any(|text| text == "found it"), "{texts:?}");
    assert_eq!(touches(dir.path(), &session), [("c_lookup".to_owned(), 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_retried_for_good_is_shown_beside_the_turn_that_waits_on_it() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    // Every attempt of `Tools/run_call` fails: the turn runs, and waits on a call Restate retries.
    let metrics = port();
    let _deployment = registered_deployment_with(
        &server,
        dir.path(),
        port(),
        SCENARIO,
        &[(headstart_restate::FAULT_VARIABLE, "fail-run-call")],
        &["--metrics", &format!("127.0.0.1:{metrics}")],
    );
    let submitted = submit(&server, false, SCENARIO).output_within(PATIENCE);
    assert!(submitted.status.success(), "{submitted:?}");
    let session = String::from_utf8_lossy(&submitted.stdout).trim().to_owned();
    let inspect = |json: bool| {
        let mut command = std::process::Command::new(bin());
        command.arg("inspect").arg(dir.path().join("agents.db")).args([
            "--restate",
            &server.admin_url(0),
            "--session",
            &session,
        ]);
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("inspect runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    let mut shown = serde_json::Value::Null;
    wait_until("the failing call to be shown with its turn", || {
        shown = serde_json::from_str(&inspect(true)).expect("JSON");
        // Between two attempts the server says why the last one failed (while one runs, it may say nothing).
        shown[0]["restate"][0]["failing_calls"][0]["last_failure"].is_string()
    });
    let turn = &shown[0]["restate"][0];
    assert_ne!(turn["status"], "completed", "{turn}");
    let call = &turn["failing_calls"][0];
    assert!(call["retries"].as_u64() >= Some(1), "{call}");
    assert!(
        call["last_failure"]
            .as_str()
            .is_some_and(|failure| failure.contains("run_call fails on purpose")),
        "{call}"
    );
    let text = inspect(false);
    assert!(text.contains("  waits on Tools/run_call inv_"), "{text}");
    assert!(text.contains("run_call fails on purpose"), "{text}");
    // The deployment's metrics say so too, by the failure's code, not only a reader of `inspect`.
    wait_until("the failing call to be counted on /metrics", || {
        counter(
            &metrics_page(metrics),
            headstart_restate::metrics::CALLS_FAILING,
            "code=",
        ) >= 1.0
    });
}

/// How each call of `session` ended in `store`: call id, outcome, state and result text, by call id.
async fn ends(store: &dyn TranscriptStore, session: &SessionId) -> Vec<(String, String, String)> {
    let log = store.load_log(session).await.expect("log");
    let mut ends: Vec<(String, String, String)> = store
        .tool_runs(session)
        .await
        .expect("runs")
        .into_iter()
        .map(|run| {
            let text = log
                .iter()
                .find_map(|stored| match &stored.message {
                    Message::ToolResult(result) if result.tool_call_id == run.call_id => Some(result.text()),
                    _ => None,
                })
                .unwrap_or_default();
            (run.call_id, format!("{:?} {:?}", run.outcome, run.state), text)
        })
        .collect();
    ends.sort();
    ends
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_times_out_or_panics_on_tools_ends_as_it_does_in_process() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    // The lookup passes its timeout; the write panics.
    let mut scenario: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(harness::scenario(SCENARIO)).expect("read")).expect("JSON");
    scenario["tools"][0]["timeout_ms"] = serde_json::json!(100);
    scenario["tools"][1]["behavior"] = serde_json::json!({ "delay_ms": 10, "panic": "boom", "touch": true });
    let file = dir.path().join("stopped.json");
    std::fs::write(&file, scenario.to_string()).expect("write the scenario");
    let file = file.display().to_string();

    // In process: the same scenario replayed on the wall clock.
    let replay_db = dir.path().join("replay.db");
    let replayed = std::process::Command::new(bin())
        .args(["replay", "--clock", "wall", "--db"])
        .arg(&replay_db)
        .arg(&file)
        .output()
        .expect("replay runs");
    assert!(replayed.status.success(), "{replayed:?}");
    let replay_store = headstart::SqliteStore::open_read_only(&replay_db).expect("open the replay's store");
    let replayed_session = replay_store.sessions().await.expect("sessions")[0].id.clone();
    let in_process = ends(&replay_store, &replayed_session).await;

    let server = start_server(&binary, dir.path());
    let _deployment = registered_deployment(&server, dir.path(), port(), &file);
    let (report, session) = report_and_session(&submit(&server, true, &file).output_within(PATIENCE));
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    let on_restate = ends(&open_store(dir.path()), &session).await;
    assert_eq!(on_restate, in_process, "the calls end on Restate as in process");
    let outcomes: Vec<&str> = on_restate.iter().map(|(_, outcome, _)| outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        ["Some(TimedOut) Cancelled", "Some(Panicked) Finished"],
        "{on_restate:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_early_calls_pending_at_once_both_come_back_in_either_order() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let _deployment = registered_deployment(&server, dir.path(), port(), TWO_EARLY);
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
    let client = RestateClient::new(&server.ingress_url(0));
    // Before any deployment: the submission says what to do, and nothing is accepted.
    let unregistered = client
        .submit(&new_session_id(), &look_it_up(), "before-registration")
        .await
        .expect_err("no Session service yet");
    assert!(
        matches!(unregistered, RestateError::NotRegistered { .. }),
        "{unregistered:?}"
    );
    assert!(
        unregistered.to_string().contains("register a deployment first"),
        "{unregistered}"
    );
    let unknown = client.attach("inv_1nosuchturn").await.expect_err("no such invocation");
    assert!(matches!(unknown, RestateError::Refused { .. }), "{unknown:?}");
    let _deployment = registered_deployment(&server, dir.path(), port(), SCENARIO);
    let session = new_session_id();
    let first = client
        .submit(&session, &look_it_up(), &session)
        .await
        .expect("submitted");
    let again = client
        .submit(&session, &look_it_up(), &session)
        .await
        .expect_err("the same key again");
    assert!(
        matches!(&again, RestateError::SubmittedTwice { invocation, .. } if *invocation == first),
        "{again:?}"
    );
    assert!(again.to_string().contains("already submitted"), "{again}");
    let report = client.attach(&first).await.expect("the first turn ends");
    assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");
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
    let _deployment = registered_deployment(&server, dir.path(), port(), SCENARIO);
    let client = RestateClient::new(&server.ingress_url(0));
    let session = new_session_id();
    let invocation = client
        .submit(&session, &look_it_up(), &session)
        .await
        .expect("submitted");
    wait_for_lookup(dir.path());
    server.kill(0);
    server.restart(0).expect("the server starts again on its data");
    // The caller's connection died with the server: it attaches again by the invocation id.
    let report = tokio::time::timeout(PATIENCE, client.attach(&invocation))
        .await
        .expect("the turn ends")
        .expect("its report");
    assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");

    let store = open_store(dir.path());
    let session = SessionId(session);
    let calls = assert_one_result_per_call(&store, &session).await;
    assert!(calls.contains(&"c_lookup".to_owned()), "{calls:?}");
    assert_no_body_twice(dir.path(), &session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deployments_behind_the_balancer_share_the_turns() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let deployments = [
        Deployment::start(dir.path(), TWO_EARLY, &["--concurrency", "1"]),
        Deployment::start(dir.path(), TWO_EARLY, &["--concurrency", "1"]),
    ];
    let _balancer = balancer(&server, &deployments, &[]);

    // One turn at a time per deployment, four sessions submitted at once: both must take turns.
    let output = std::process::Command::new(bin())
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
        assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");
        assert_sound(&store, &SessionId(session.clone()), &["c_fast", "c_slow"]).await;
    }
    let turns: Vec<f64> = deployments.iter().map(Deployment::turns_begun).collect();
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
    let _deployment = registered_deployment(&cluster, dir.path(), port(), SCENARIO);
    // Submitted and attached through node 2's ingress; node 1 (which provisioned the cluster) is killed.
    let client = RestateClient::new(&cluster.ingress_url(1));
    let turns = submit_round(&client, 4).await;
    wait_for_lookup(dir.path());
    cluster.kill(0);
    let store = open_store(dir.path());
    for (session, invocation) in &turns {
        // The ingress may answer an error while the cluster moves its partitions' leaders.
        let report = attach_until_ended(&client, invocation, Duration::from_secs(120))
            .await
            .expect("the turn ends within two minutes of the kill");
        eprintln!("{report:?}");
        assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");
        let session = SessionId(session.clone());
        assert_one_result_per_call(&store, &session).await;
        assert_no_body_twice(dir.path(), &session);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_deployment_is_replaced_and_its_writes_are_refused_when_it_resumes() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let deployments = [
        Deployment::start(dir.path(), SCENARIO, &[]),
        Deployment::start(dir.path(), SCENARIO, &[]),
    ];
    let _balancer = balancer(
        &server,
        &deployments,
        &["--answer-within-ms", "1000", "--set-aside-ms", "600000"],
    );
    // Short timeouts, so the server gives a silent attempt up within seconds instead of minutes.
    shorten_timeouts(&server, "Session");
    shorten_timeouts(&server, "Tools");

    let client = RestateClient::new(&server.ingress_url(0));
    let session = new_session_id();
    let invocation = client
        .submit(&session, &look_it_up(), &session)
        .await
        .expect("submitted");
    let mut running = None;
    wait_until("the turn to begin on a deployment", || {
        running = deployments
            .iter()
            .position(|deployment| deployment.turns_begun() >= 1.0);
        running.is_some()
    });
    let stopped = &deployments[running.expect("found")];
    wait_for_lookup(dir.path());
    stopped.signal("STOP");

    let report = tokio::time::timeout(Duration::from_secs(120), client.attach(&invocation))
        .await
        .expect("the turn ends on the other deployment")
        .expect("its report");
    assert_eq!(report.stop, headstart::AgentStop::Completed, "{report:?}");
    // One recovery at least: more when the server also gave up the new attempt while it waited for the call the
    // stopped deployment held.
    assert!(report.recoveries >= 1, "{report:?}");
    let store = open_store(dir.path());
    let session = SessionId(session);
    let before = snapshot(&store, &session).await;

    // The stopped deployment resumes with the old attempt's engine in memory: whatever it writes now is refused.
    stopped.signal("CONT");
    wait_until("the resumed deployment's stale writes to be refused", || {
        stopped.counter("headstart_restate_stale_writes_refused_total", "where=") >= 1.0
    });
    assert_eq!(
        snapshot(&store, &session).await,
        before,
        "a stale write reached the store"
    );
    assert_one_result_per_call(&store, &session).await;
    assert_no_body_twice(dir.path(), &session);
    let info = store.session(&session).await.expect("read").expect("the session");
    assert_eq!(info.state.as_str(), "completed", "{info:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_serve_show_the_servers_turns_beside_the_store() {
    let Some(binary) = server_binary() else { return };
    let dir = workdir();
    let server = start_server(&binary, dir.path());
    let mut deployment = registered_deployment(&server, dir.path(), port(), SCENARIO);
    let (_, done) = report_and_session(&submit(&server, true, SCENARIO).output_within(PATIENCE));
    // The deployment gone, a second session waits on the server: the store has not seen it.
    deployment.kill();
    let waiting = submit(&server, false, SCENARIO).output_within(PATIENCE);
    assert!(waiting.status.success(), "{waiting:?}");
    let waiting = String::from_utf8_lossy(&waiting.stdout).trim().to_owned();
    let store = dir.path().join("agents.db");
    let inspect = |json: bool| {
        let mut command = std::process::Command::new(bin());
        command
            .arg("inspect")
            .arg(&store)
            .args(["--restate", &server.admin_url(0)]);
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("inspect runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    let mut sessions = Vec::new();
    wait_until("the waiting turn to back off", || {
        sessions = serde_json::from_str::<Vec<serde_json::Value>>(&inspect(true)).expect("JSON");
        sessions
            .iter()
            .any(|session| session["session"] == waiting.as_str() && session["restate"][0]["status"] == "backing-off")
    });
    let find = |id: &str| {
        sessions
            .iter()
            .find(|session| session["session"] == id)
            .unwrap_or_else(|| panic!("session {id} in {sessions:?}"))
            .clone()
    };
    let completed = find(&done.0);
    assert_eq!(completed["state"], "completed");
    assert_eq!(completed["restate"].as_array().map(Vec::len), Some(1), "{completed}");
    assert_eq!(completed["restate"][0]["status"], "completed", "{completed}");
    assert_eq!(completed["transcript"].as_array().map(Vec::len), Some(6), "{completed}");
    let pending = find(&waiting);
    assert_eq!(pending["state"], "submitted", "{pending}");
    assert_eq!(pending["transcript"], serde_json::json!([]), "{pending}");
    assert!(pending["restate"][0]["retries"].as_u64() >= Some(1), "{pending}");
    assert!(
        pending["restate"][0]["last_failure"]
            .as_str()
            .is_some_and(|failure| failure.contains("Connection refused")),
        "{pending}"
    );
    let text = inspect(false);
    assert!(
        text.contains(&format!("session {waiting} (submitted to Restate, not begun)")),
        "{text}"
    );
    assert!(text.contains(": backing-off after "), "{text}");

    // serve --restate: the session's JSON carries the same turns.
    let serve_port = port();
    let _serving = support::ChildGuard::spawn(
        std::process::Command::new(bin())
            .arg("serve")
            .arg(&store)
            .args(["--addr", &format!("127.0.0.1:{serve_port}")])
            .args(["--restate", &server.admin_url(0)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    )
    .expect("start serve");
    wait_until("serve to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", serve_port)).is_ok()
    });
    let page = http_get(serve_port, &format!("/api/sessions/{}", done.0));
    let served: serde_json::Value = serde_json::from_str(&page).expect("the session's JSON");
    assert_eq!(served["restate"], completed["restate"], "{served}");
    let html = http_get(serve_port, &format!("/sessions/{}", done.0));
    assert!(
        html.contains("Restate turns") && html.contains("data-status=\"completed\""),
        "{html}"
    );
}
