//! Wake-ups (issue 22): an idle worker claims a submitted session at once when its queue says so, not at its next
//! poll; with the wake-ups gone (the listening connection killed) it still claims every session by polling; and
//! its PostgreSQL listener reconnects, after which wake-ups work again.
//!
//! Submit→claim is measured from just before `submit` to the worker's `claimed` event and printed (p50, p99, max).
//! The bounds asserted are far from what a loaded machine needs and far from what polling could meet: with wake-ups
//! a claim must come within [`WOKEN`] while the poll interval is 5 s or more; without them, within [`POLLED`] of a
//! 300 ms poll. Sessions never answer (their model stays silent), so nothing but claims loads the worker.
#![cfg(unix)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headstart::store::{Backoff, SessionQueue, SqliteStore};
use headstart::{SessionId, UserMessage};
use headstart_fleet::{Worker, WorkerConfig, WorkerEvent};
use headstart_postgres::testing::{self, TestDatabase};
use headstart_postgres::{PgOptions, PgStore};
use support::{Observed, Setup, Silent};

/// The most a woken claim may take (polling every 5 s would take 2.5 s on average).
const WOKEN: Duration = Duration::from_secs(1);

/// The most a polled claim may take with a 300 ms poll: the poll, and ample room for a loaded machine.
const POLLED: Duration = Duration::from_secs(5);

/// A worker polling every `poll` with room for everything the test submits.
fn start(queue: Arc<dyn SessionQueue>, poll: Duration) -> Observed {
    let mut config = WorkerConfig::new("w");
    config.concurrency = 256;
    config.poll_interval = poll;
    Observed::start(Worker::new(queue, Arc::new(Setup(Arc::new(Silent::default()))), config).expect("config"))
}

async fn pg(database: &TestDatabase, options: PgOptions) -> Arc<PgStore> {
    Arc::new(PgStore::connect(database.url(), options).await.expect("connect"))
}

/// Submits `count` sessions one after the other; when each was submitted.
async fn submit(queue: &dyn SessionQueue, count: usize) -> HashMap<SessionId, Instant> {
    let mut submitted = HashMap::new();
    for _ in 0..count {
        let at = Instant::now();
        let session = queue.submit(&UserMessage::new("go"), 0).await.expect("submit");
        submitted.insert(session, at);
    }
    submitted
}

/// Waits for every submitted session's claim; submit→claim of each, sorted. Fails on a store error.
async fn claimed(worker: &mut Observed, mut submitted: HashMap<SessionId, Instant>) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(submitted.len());
    while !submitted.is_empty() {
        match worker.next_stamped().await {
            (at, WorkerEvent::Claimed { session, .. }) => {
                let sent = submitted.remove(&session).expect("a submitted session, claimed once");
                latencies.push(at.saturating_duration_since(sent));
            }
            (_, event @ (WorkerEvent::StoreUnreachable { .. } | WorkerEvent::QueueError { .. })) => {
                panic!("{event}")
            }
            _ => {}
        }
    }
    latencies.sort();
    latencies
}

/// Prints p50, p99 and the maximum of `sorted` under `label`; returns the p99.
fn report(label: &str, sorted: &[Duration]) -> Duration {
    let at = |share: f64| sorted[((sorted.len() as f64 * share).ceil() as usize).clamp(1, sorted.len()) - 1];
    let (p50, p99) = (at(0.50), at(0.99));
    eprintln!(
        "{label}: {} sessions, submit→claim p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        sorted.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        sorted[sorted.len() - 1].as_secs_f64() * 1e3
    );
    p99
}

/// The next event that is not a claim.
async fn next_other(worker: &mut Observed) -> WorkerEvent {
    loop {
        match worker.next().await {
            WorkerEvent::Claimed { .. } => {}
            event => return event,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_wakes_an_idle_worker_sharing_the_sqlite_store() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let mut worker = start(store.clone(), Duration::from_secs(60));
    let latencies = claimed(&mut worker, submit(store.as_ref(), 20).await).await;
    let p99 = report("SQLite, same store object, poll 60 s", &latencies);
    assert!(p99 < WOKEN, "p99 {p99:?}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_submits_are_claimed_at_once_by_an_idle_worker_polling_every_5_s() {
    let Some(database) = testing::database().await else {
        return;
    };
    let mut worker = start(pg(&database, PgOptions::default()).await, Duration::from_secs(5));
    database.listener(None).await;
    // Submitted as `headstart submit` does, from a store of its own.
    let submitter = pg(&database, PgOptions::default()).await;
    let latencies = claimed(&mut worker, submit(submitter.as_ref(), 200).await).await;
    let p99 = report("PostgreSQL with wake-ups, poll 5 s", &latencies);
    assert!(p99 < WOKEN, "p99 {p99:?}: a claim waited for the poll");
    let stats = worker.stop().await;
    assert_eq!(stats.claimed, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_listener_killed_every_session_is_claimed_by_polling() {
    let Some(database) = testing::database().await else {
        return;
    };
    // The listener does not come back within the test: wake-ups stay off.
    let never = Duration::from_secs(3600);
    let options = PgOptions {
        listen_retry: Backoff {
            first: never,
            max: never,
        },
        ..PgOptions::default()
    };
    let mut worker = start(pg(&database, options).await, Duration::from_millis(300));
    database.terminate(database.listener(None).await).await;
    let lost = next_other(&mut worker).await;
    assert!(matches!(lost, WorkerEvent::WakeUpsLost { .. }), "{lost:?}");
    assert!(lost.to_string().starts_with("wake-ups-lost "), "{lost}");
    let submitter = pg(&database, PgOptions::default()).await;
    let latencies = claimed(&mut worker, submit(submitter.as_ref(), 20).await).await;
    let p99 = report("PostgreSQL without wake-ups (listener killed), poll 300 ms", &latencies);
    assert!(p99 < POLLED, "p99 {p99:?}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_after_it_is_killed_and_wake_ups_work_again() {
    let Some(database) = testing::database().await else {
        return;
    };
    let mut worker = start(pg(&database, PgOptions::default()).await, Duration::from_secs(5));
    let killed = database.listener(None).await;
    database.terminate(killed).await;
    let lost = next_other(&mut worker).await;
    assert!(matches!(lost, WorkerEvent::WakeUpsLost { .. }), "{lost:?}");
    assert_eq!(next_other(&mut worker).await, WorkerEvent::WakeUpsRestored);
    assert_eq!(WorkerEvent::WakeUpsRestored.to_string(), "wake-ups-restored");
    database.listener(Some(killed)).await;
    let submitter = pg(&database, PgOptions::default()).await;
    let latencies = claimed(&mut worker, submit(submitter.as_ref(), 20).await).await;
    let p99 = report("PostgreSQL with wake-ups after a reconnection, poll 5 s", &latencies);
    assert!(p99 < WOKEN, "p99 {p99:?}: a claim waited for the poll");
    worker.stop().await;
}
