//! The crash contract as a suite (issue 45, docs/reliability.md): the six properties a resumed agent must keep
//! ("Resume Means Resume", arXiv:2608.03836), checked on each backend a fleet runs on (a SQLite file, a PostgreSQL
//! database) at each instant a crash can hit a call's life.
//!
//! A worker (`headstart worker --scenario tests/resume/two-turns.json`: an early idempotent `fetch` and a sync
//! `write` in the first response, a second `write` in the next, then the answer) runs one session and dies at a
//! named instant (`HEADSTART_CRASH_AT`, `headstart_sim::crash_at`: the process aborts there, a SIGKILL at exactly
//! that instant): before a seal; after a seal, before its call starts; inside the idempotent fetch's body; inside
//! the non-idempotent write's body; after a body, before its result's write; while the request after the results is
//! built. Every body appends its worker's name to `<touch dir>/<session>/<call id>` as it begins: the effect,
//! counted outside every process. The crashed store is copied (with its touch directory) and each copy is resumed
//! apart: by one worker (twice), and by 2, 4 and 8 workers started together. Then:
//!
//! 1. **prefix continuation**: every copy's log begins with the crashed log, message for message, timestamps
//!    included; a result stored before the crash is never stored again;
//! 2. **effect exactly once**: a call that had its result at the crash never runs again; a non-idempotent call cut
//!    off by the crash never runs again (it gets the interrupted result); an idempotent one runs again at most once;
//!    a call admitted after the resume runs once; every effect has its call stored (the engine's invariants);
//! 3. **fork determinism**: every copy, however many workers resumed it, ends with the same transcript and the same
//!    runs, timestamps aside;
//! 4. **checkpoint validity**: the crashed store loads on its own, and what it holds keeps the engine's invariants
//!    except for the calls the crash left without a result, each of which has its owning fragment stored;
//! 5. **consume once**: k = 2, 4 and 8 workers started together on one crashed session perform a pending effect at
//!    most once between them (the bounds of 2 hold whatever k is);
//! 6. **recovery determinism**: the results recovery gave the calls the crash cut off (interrupted or run again)
//!    are the same in every copy.
//!
//! Each crash point is also checked to be the instant it names (what was admitted, begun and stored when it hit),
//! so the suite cannot drift into testing six times the same crash. Figures per case are printed.
//!
//! PostgreSQL comes from `headstart_postgres::testing` (`DATABASE_URL`, or a throwaway cluster); without one its test
//! says so loudly and passes, or fails under `HEADSTART_REQUIRE_POSTGRES=1` (CI sets it). Every process a test
//! starts is killed when the test ends, pass or fail ([`ChildGuard`]).
#![cfg(unix)]

#[path = "resume/suite.rs"]
mod suite;
mod support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headstart::store::{RunOutcome, SessionState};
use headstart::SessionId;
use suite::*;
use support::ChildGuard;

/// The crashing worker's lease: a resumer claims the session once it has run out.
const LEASE_MS: &str = "400";
const POLL_MS: &str = "50";
/// How many workers resume one copy together, for property 5.
const TOGETHER: [usize; 3] = [2, 4, 8];

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_headstart"))
}

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(SCENARIO)
}

/// `headstart worker` named `name` on `store`, touching under `touch`, its log in `dir/<name>.log`; with
/// `crash_at`, dying there.
fn worker(dir: &Path, store: &StoreAt, name: &str, touch: &Path, crash_at: Option<&str>) -> ChildGuard {
    let log = File::create(dir.join(format!("{name}.log"))).expect("a worker's log file");
    let mut command = Command::new(bin());
    command
        .args(["worker", "--store", &store.location, "--id", name, "--scenario"])
        .arg(scenario())
        .arg("--touch-dir")
        .arg(touch)
        .args(["--lease-ms", LEASE_MS, "--poll-ms", POLL_MS, "--concurrency", "1"])
        .env_remove(headstart_sim::crash_at::CRASH_AT)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(point) = crash_at {
        command.env(headstart_sim::crash_at::CRASH_AT, point);
    }
    ChildGuard::spawn(&mut command).expect("start a worker")
}

fn log_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// Submits one session to `store`; returns its id.
fn submit(store: &StoreAt) -> SessionId {
    let ids = support::submit_count(&bin(), Path::new(&store.location), 1, PROMPT);
    assert_eq!(ids.len(), 1, "one session submitted: {ids:?}");
    SessionId(ids[0].clone())
}

/// Waits until `session` in `store` is completed; returns how long it took.
async fn completed(store: &StoreAt, session: &SessionId, label: &str, dir: &Path, workers: &[String]) -> Duration {
    let begun = Instant::now();
    let queue = store.open().await;
    loop {
        let info = queue
            .session(session)
            .await
            .expect("read the session")
            .expect("the session is stored");
        match info.state {
            SessionState::Completed => return begun.elapsed(),
            SessionState::Failed => panic!("{label}: the session failed: {:?}", info.failure),
            _ => {}
        }
        if begun.elapsed() > PATIENCE {
            let logs: Vec<String> = workers
                .iter()
                .map(|name| format!("{name}: {}", log_of(dir, name)))
                .collect();
            panic!("{label}: not completed within {PATIENCE:?} ({info:?}); {logs:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one case found, for the figures.
struct Figures {
    case: &'static str,
    unfinished: usize,
    re_run: usize,
    interrupted: usize,
    copies: usize,
    slowest: Duration,
}

/// Crashes a worker at `case`'s instant on a fresh `backend` store, resumes copies of what it left, and checks the
/// six properties. `None` when the backend is not available.
async fn run_case(backend: Backend, case: &Case) -> Option<Figures> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let label = format!("{backend:?}, crash at {}", case.crash_at);
    let crashed = StoreAt::fresh(backend, dir, "crashed").await?;
    let session = submit(&crashed);
    let crash_touch = dir.join("touch-crashed");

    let mut dying = worker(dir, &crashed, "crashed", &crash_touch, Some(case.crash_at));
    let status = dying.wait_within(PATIENCE);
    let log = log_of(dir, "crashed");
    assert!(
        !status.success() && log.contains("aborting at"),
        "{label}: the worker did not die at its point ({status}): {log}"
    );

    let at_crash = crashed.snapshot(&session).await;
    let touched_at_crash = touches(&crash_touch, &session);
    check_crashed(&label, case, &at_crash, &touched_at_crash);

    // Copies: one worker each (twice), then 2, 4 and 8 workers together.
    let mut groups: Vec<(String, usize)> = vec![("alone-a".to_owned(), 1), ("alone-b".to_owned(), 1)];
    groups.extend(TOGETHER.iter().map(|k| (format!("together-{k}"), *k)));
    let mut copies = Vec::new();
    for (name, count) in &groups {
        let store = crashed.copy(dir, name).await;
        let touch = dir.join(format!("touch-{name}"));
        copy_touches(&crash_touch, &touch);
        copies.push((name.clone(), *count, store, touch));
    }
    let mut running = Vec::new();
    let mut names_of = Vec::new();
    for (name, count, store, touch) in &copies {
        let names: Vec<String> = (0..*count).map(|i| format!("{name}-w{i}")).collect();
        for worker_name in &names {
            running.push(worker(dir, store, worker_name, touch, None));
        }
        names_of.push(names);
    }
    let mut forks = Vec::new();
    let mut slowest = Duration::ZERO;
    for ((name, _, store, touch), names) in copies.iter().zip(&names_of) {
        let label = format!("{label}, {name}");
        slowest = slowest.max(completed(store, &session, &label, dir, names).await);
        forks.push(Fork {
            snapshot: store.snapshot(&session).await,
            touched: touches(touch, &session),
            label,
        });
    }
    drop(running);
    let reference_recovery = check_forks(case, (&at_crash, &touched_at_crash), &forks);

    let outcomes: Vec<Option<RunOutcome>> = reference_recovery.iter().map(|(_, outcome, _)| *outcome).collect();
    Some(Figures {
        case: case.crash_at,
        unfinished: case.unfinished.len(),
        re_run: outcomes
            .iter()
            .filter(|outcome| !matches!(outcome, Some(RunOutcome::Interrupted)))
            .count(),
        interrupted: outcomes
            .iter()
            .filter(|outcome| matches!(outcome, Some(RunOutcome::Interrupted)))
            .count(),
        copies: forks.len(),
        slowest,
    })
}

async fn every_property_at_every_point(backend: Backend) {
    let begun = Instant::now();
    let mut figures = Vec::new();
    for case in &CASES {
        let Some(found) = run_case(backend, case).await else {
            return;
        };
        figures.push(found);
    }
    for found in &figures {
        eprintln!(
            "resume suite, {backend:?}, crash at {:<11}: {} unfinished ({} run again, {} interrupted), {} copies \
             resumed by {} workers in all, slowest {} ms",
            found.case,
            found.unfinished,
            found.re_run,
            found.interrupted,
            found.copies,
            2 + TOGETHER.iter().sum::<usize>(),
            found.slowest.as_millis()
        );
    }
    eprintln!(
        "resume suite, {backend:?}: 6 properties × {} crash points hold, {:.1} s",
        figures.len(),
        begun.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_property_holds_at_every_crash_point_on_sqlite() {
    every_property_at_every_point(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_property_holds_at_every_crash_point_on_postgres() {
    every_property_at_every_point(Backend::Postgres).await;
}
