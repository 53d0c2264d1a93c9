//! What the Restate resume tests share (`tests/restate_resume.rs`, `tests/restate_forks.rs`,
//! `tests/restate_points.rs`): the resume suite's prompt submitted as a new session, and a deployment that dies at a
//! crash point, with what it left checked (property 4, and that the point is the instant it names).
// Each test file uses some of these.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use headstart::SessionId;
use headstart_restate::local::LocalServer;
use headstart_restate::{new_session_id, RestateClient, RestateError, TurnRequest};
use headstart_sim::crash_at::CRASH_AT;
use tempfile::TempDir;

use crate::harness::{port, registered_deployment_in};
use crate::suite::{check_crashed, touches, Case, Snapshot, StoreAt, PATIENCE, PROMPT, SCENARIO};
use crate::support::workdir;

/// Submits the suite's prompt as a new session through `client`, again while a cluster's nodes have not all
/// learned the registration yet (within [`PATIENCE`]); returns the session and the turn's invocation.
pub async fn submit_prompt(client: &RestateClient) -> (String, String) {
    let request = TurnRequest {
        prompt: PROMPT.to_owned(),
        ..TurnRequest::default()
    };
    let started = Instant::now();
    let session = new_session_id();
    loop {
        match client.submit(&session, &request, &session).await {
            Ok(invocation) => return (session, invocation),
            Err(RestateError::NotRegistered { .. }) if started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("submit: {error}"),
        }
    }
}

/// What a deployment that died at a crash point left.
pub struct Crashed {
    /// Its folder: the store (`agents.db`) and the bodies' touch files (`touch`).
    pub dir: TempDir,
    /// The address it was registered at.
    pub port: u16,
    pub session: SessionId,
    /// The turn's invocation.
    pub invocation: String,
    /// The store and the effects as the crash left them.
    pub at_crash: Snapshot,
    pub touched: BTreeMap<String, usize>,
}

/// A deployment registered with `server`, dying at `case`'s point while it runs a turn submitted through `client`;
/// what it left is checked ([`check_crashed`]).
pub async fn crash_deployment(server: &LocalServer, client: &RestateClient, case: &Case, label: &str) -> Crashed {
    let dir = workdir();
    let port = port();
    let mut dying = registered_deployment_in(server, dir.path(), port, SCENARIO, &[(CRASH_AT, case.crash_at)]);
    let (session, invocation) = submit_prompt(client).await;
    let status = dying.wait_within(PATIENCE);
    assert!(
        !status.success(),
        "{label}: the deployment did not die at its point ({status})"
    );
    let session = SessionId(session);
    let at_crash = StoreAt::sqlite(&dir.path().join("agents.db")).snapshot(&session).await;
    let touched = touches(&dir.path().join("touch"), &session);
    check_crashed(label, case, &at_crash, &touched);
    Crashed {
        dir,
        port,
        session,
        invocation,
        at_crash,
        touched,
    }
}
