//! The crash contract on Restate (issue 45, docs/reliability.md): the resume suite's crash points
//! (`tests/resume/suite.rs`), each hit by a `headstart restate serve` deployment running the suite's scenario, which
//! dies there (`HEADSTART_CRASH_AT`: the process aborts, a SIGKILL at exactly that instant). The store the dead
//! deployment left is checked as it is (property 4, and that the point is the instant it names); then a new
//! deployment is started at the same address, Restate runs the turn's invocations again on it, and the turn must
//! complete with properties 1 (prefix continuation) and 2 (effect exactly once) holding. Copies of one crash (3 and
//! 6) and several deployments resuming at once (5) are `tests/restate_forks.rs`.
//!
//! A second test (issue 43) crashes at `after-body` with an `after_tool_call` hook that redacts the fetch's result:
//! the result `Tools` journaled is stored by the replay, and it must pass through the hook as on the live path.
//!
//! Needs the server binary as `tests/restate.rs` does; every process is killed when the test ends.
#![cfg(unix)]

#[path = "restate/crashed.rs"]
mod crashed;
#[path = "restate/harness.rs"]
mod harness;
#[path = "resume/suite.rs"]
mod suite;
mod support;

use std::time::Instant;

use headstart::{AgentStop, SessionId};
use headstart_restate::{new_session_id, RestateClient, TurnRequest};
use headstart_sim::crash_at::CRASH_AT;

use crashed::{crash_deployment, Crashed};
use harness::{attach_until_ended, port, registered_deployment, registered_deployment_in, server_binary, start_server};
use suite::{check_resumed, touches, StoreAt, CASES, PATIENCE, PROMPT, SCENARIO};
use support::workdir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_turn_resumes_on_restate_with_its_prefix_and_no_effect_twice() {
    let Some(binary) = server_binary() else { return };
    let begun = Instant::now();
    let server_dir = workdir();
    let server = start_server(&binary, server_dir.path());
    let client = RestateClient::new(&server.ingress_url(0));
    for case in &CASES {
        let label = format!("Restate, crash at {}", case.crash_at);
        let Crashed {
            dir,
            port,
            session,
            invocation,
            at_crash,
            touched: touched_at_crash,
        } = crash_deployment(&server, &client, case, &label).await;
        let store = StoreAt::sqlite(&dir.path().join("agents.db"));
        let touch = dir.path().join("touch");

        let _resumer = registered_deployment(&server, dir.path(), port, SCENARIO);
        let report = attach_until_ended(&client, &invocation, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("{label}: the turn did not end"));
        assert_eq!(report.stop, AgentStop::Completed, "{label}: {report:?}");
        let resumed = store.snapshot(&session).await;
        check_resumed(
            &label,
            case,
            (&at_crash, &touched_at_crash),
            (&resumed, &touches(&touch, &session)),
        );
        eprintln!(
            "resume suite, Restate, crash at {:<11}: {} unfinished, recovered as {:?}, {} recoveries",
            case.crash_at,
            case.unfinished.len(),
            case.recovered_in(&resumed)
                .iter()
                .map(|(call, outcome, _)| format!("{call}: {outcome:?}"))
                .collect::<Vec<_>>(),
            report.recoveries
        );
    }
    eprintln!(
        "resume suite, Restate: properties 1, 2 and 4 × {} crash points hold, {:.1} s",
        CASES.len(),
        begun.elapsed().as_secs_f64()
    );
}

/// The suite's scenario with an `after_tool_call` hook that replaces the fetch's result, written to `dir`.
fn redacting_scenario(dir: &std::path::Path) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO);
    let mut scenario: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read the scenario")).expect("JSON");
    scenario["hooks"] = serde_json::json!({ "after": { "fetch": { "text": "fetched (redacted)" } } });
    let written = dir.join("redacting.json");
    std::fs::write(&written, scenario.to_string()).expect("write the scenario");
    written.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_journal_kept_passes_through_the_after_hook_when_the_turn_died_before_storing_it() {
    let Some(binary) = server_binary() else { return };
    let server_dir = workdir();
    let server = start_server(&binary, server_dir.path());
    let client = RestateClient::new(&server.ingress_url(0));
    let request = TurnRequest {
        prompt: PROMPT.to_owned(),
        ..TurnRequest::default()
    };
    for crash_at in [None, Some("after-body")] {
        let label = format!("crash at {crash_at:?}");
        let dir = workdir();
        let scenario = redacting_scenario(dir.path());
        let port = port();
        let env: Vec<(&str, &str)> = crash_at.iter().map(|point| (CRASH_AT, *point)).collect();
        let mut first = registered_deployment_in(&server, dir.path(), port, &scenario, &env);
        let session = new_session_id();
        let invocation = client.submit(&session, &request, &session).await.expect("submitted");
        let _resumer = crash_at.map(|_| {
            let status = first.wait_within(PATIENCE);
            assert!(!status.success(), "{label}: the deployment did not die ({status})");
            registered_deployment(&server, dir.path(), port, &scenario)
        });
        let report = attach_until_ended(&client, &invocation, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("{label}: the turn did not end"));
        assert_eq!(report.stop, AgentStop::Completed, "{label}: {report:?}");
        let stored = StoreAt::sqlite(&dir.path().join("agents.db"))
            .snapshot(&SessionId(session))
            .await;
        assert_eq!(
            stored.result("c_fetch").map(|result| result.text()),
            Some("fetched (redacted)".to_owned()),
            "{label}: the fetch's stored result went through the after hook: {:?}",
            stored.log
        );
    }
}
