//! Properties 3, 5 and 6 of the crash contract on Restate (issue 45, docs/reliability.md): copies of one crash,
//! resumed apart, and several deployments resuming one crash at once.
//!
//! At each of the resume suite's crash points (`tests/resume/suite.rs`) a `headstart restate serve` deployment dies
//! (`HEADSTART_CRASH_AT`), and the server is killed with SIGKILL right after, before anything resumes the turn. What
//! the crash left is then three things: the server's data directory (its log and the turn's journal), the store, and
//! the effects (the touch directory). Each is copied, and the copies are resumed one after another, each by the same
//! server binary started again on the copy's data with the same ports (a node's address is part of its data):
//!
//! - two copies by one deployment each, at the address the dead one was registered at;
//! - one copy by k deployments at once behind a balancer at that address (k = 2, 4 and 8, in turn over the
//!   points): Restate sends the turn's retry and its `Tools` calls to whichever it picks.
//!
//! The resumers run calls of idempotent tools again (`--rerun-idempotent`), so an idempotent call cut off by the
//! crash is a pending effect that must happen once, however many deployments are ready to do it (property 5); the
//! non-idempotent write gets the interrupted result. Every copy is checked for 1, 2 and 5, and all three must end
//! with the same transcript and runs (3) and the same results for the calls the crash cut off (6).
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
use std::process::Command;
use std::time::{Duration, Instant};

use headstart::AgentStop;
use headstart_restate::local::LocalServer;
use headstart_restate::RestateClient;

use crashed::{crash_deployment, Crashed};
use harness::{attach_until_ended, balancer_on, registered_deployment_with, server_binary, start_server, Deployment};
use suite::{check_forks, copy_touches, touches, Fork, StoreAt, CASES, PATIENCE, SCENARIO};
use support::{copy_sqlite, workdir, ChildGuard};

/// How many deployments resume one copy together, in turn over the crash points.
const TOGETHER: [usize; 3] = [2, 4, 8];
/// The resumers' flag: idempotent calls cut off by the crash run again.
const RERUN: &str = "--rerun-idempotent";

/// Copies directory `from` to `to` as it is (`cp -a`: the server's data is a tree of RocksDB files).
fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().expect("run cp");
    assert!(
        status.success(),
        "copy {} to {}: {status}",
        from.display(),
        to.display()
    );
}

/// What resumes one copy, killed when dropped: the process registered at the dead deployment's address (a
/// deployment, or a balancer), and the deployments behind it.
struct Resumers {
    _front: ChildGuard,
    _behind: Vec<Deployment>,
}

/// `count` resumers of the store in `dir`, registered with `server` at `port`, the dead deployment's address.
fn resumers(server: &LocalServer, dir: &Path, port: u16, count: usize) -> Resumers {
    if count == 1 {
        let front = registered_deployment_with(server, dir, port, SCENARIO, &[], &[RERUN]);
        return Resumers {
            _front: front,
            _behind: Vec::new(),
        };
    }
    let behind: Vec<Deployment> = (0..count).map(|_| Deployment::start(dir, SCENARIO, &[RERUN])).collect();
    Resumers {
        _front: balancer_on(server, port, &behind, &[]),
        _behind: behind,
    }
}

/// What one crash point found, for the figures.
struct Figures {
    case: &'static str,
    together: usize,
    recovered: Vec<String>,
    took: Duration,
}

async fn run_case(binary: &Path, case: &suite::Case, together: usize) -> Figures {
    let begun = Instant::now();
    let label = format!("Restate, crash at {}", case.crash_at);
    let server_dir = workdir();
    let data = server_dir.path().join("restate-data");
    let mut server = start_server(binary, server_dir.path());
    let client = RestateClient::new(&server.ingress_url(0));
    let Crashed {
        dir,
        port,
        session,
        invocation,
        at_crash,
        touched: touched_at_crash,
    } = crash_deployment(&server, &client, case, &label).await;
    server.kill(0);
    let crashed_data = dir.path().join("crashed-restate-data");
    copy_tree(&data, &crashed_data);

    let copies = [
        ("alone-a".to_owned(), 1),
        ("alone-b".to_owned(), 1),
        (format!("together-{together}"), together),
    ];
    let mut forks = Vec::new();
    for (name, count) in copies {
        let copy = dir.path().join(&name);
        std::fs::create_dir_all(&copy).expect("a folder for the copy");
        copy_sqlite(&dir.path().join("agents.db"), &copy.join("agents.db"));
        copy_touches(&dir.path().join("touch"), &copy.join("touch"));
        copy_tree(&crashed_data, &data);
        server
            .restart(0)
            .unwrap_or_else(|error| panic!("{label}, {name}: the server on the copy: {error}"));
        let resuming = resumers(&server, &copy, port, count);
        let report = attach_until_ended(&client, &invocation, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("{label}, {name}: the turn did not end"));
        assert_eq!(report.stop, AgentStop::Completed, "{label}, {name}: {report:?}");
        drop(resuming);
        server.kill(0);
        forks.push(Fork {
            label: format!("{label}, {name}"),
            snapshot: StoreAt::sqlite(&copy.join("agents.db")).snapshot(&session).await,
            touched: touches(&copy.join("touch"), &session),
        });
    }
    let recovered = check_forks(case, (&at_crash, &touched_at_crash), &forks);
    Figures {
        case: case.crash_at,
        together,
        recovered: recovered
            .iter()
            .map(|(call, outcome, _)| format!("{call}: {outcome:?}"))
            .collect(),
        took: begun.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_crash_resume_alike_on_restate_and_k_deployments_perform_a_pending_effect_once() {
    let Some(binary) = server_binary() else { return };
    let begun = Instant::now();
    let mut figures = Vec::new();
    for (case, together) in CASES.iter().zip(TOGETHER.iter().cycle()) {
        figures.push(run_case(&binary, case, *together).await);
    }
    for found in &figures {
        eprintln!(
            "resume suite, Restate forks, crash at {:<11}: 3 copies (1, 1 and {} deployments), recovered as {:?}, \
             {:.1} s",
            found.case,
            found.together,
            found.recovered,
            found.took.as_secs_f64()
        );
    }
    eprintln!(
        "resume suite, Restate forks: properties 3, 5 and 6 × {} crash points hold, {:.1} s",
        figures.len(),
        begun.elapsed().as_secs_f64()
    );
}
