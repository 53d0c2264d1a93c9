//! A worker whose store fails its claims and renewals waits longer after each failure (100 ms doubling, with up to
//! a quarter of jitter), says so once per wait with the wait it chose, and starts over after a success. On tokio's
//! paused clock, so every figure is exact.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use headstart::store::{SessionQueue, SqliteStore};
use headstart::UserMessage;
use headstart_fleet::{Backoff, Worker, WorkerConfig, WorkerEvent};
use support::{Observed, Setup, Silent, Switched, UNREACHABLE};

/// The wait a worker announced, after checking its message names the operation and the store's error.
fn announced(event: &WorkerEvent, operation: &str) -> Duration {
    match event {
        WorkerEvent::StoreUnreachable { message, retry_in } => {
            assert!(
                message.starts_with(&format!("{operation}: ")) && message.contains(UNREACHABLE),
                "{message}"
            );
            let line = event.to_string();
            assert!(
                line.starts_with("store-unreachable cannot reach the store: ")
                    && line.ends_with(&format!("; retrying in {:.1} s", retry_in.as_secs_f64())),
                "{line}"
            );
            *retry_in
        }
        other => panic!("expected a store failure, got {other:?}"),
    }
}

/// Whether `wait` is the `failures`th step of the default schedule, less up to a quarter of jitter.
fn in_step(wait: Duration, failures: u32) -> bool {
    let step = Backoff::default().step(failures);
    wait <= step && wait >= step.mul_f64(0.75)
}

#[tokio::test(start_paused = true)]
async fn failed_claims_back_off_and_a_success_starts_over() {
    const FAILURES: usize = 9;
    let queue = Arc::new(Switched::new(Arc::new(
        SqliteStore::open_in_memory().expect("in-memory store"),
    )));
    queue.failing.store(FAILURES, Ordering::SeqCst);
    let config = WorkerConfig::new("w");
    let poll = config.poll_interval;
    let mut worker = Observed::start(
        Worker::new(queue.clone(), Arc::new(Setup(Arc::new(Silent::default()))), config).expect("config"),
    );

    let mut waits = Vec::new();
    for failures in 1..=FAILURES {
        let wait = announced(&worker.next().await, "claim");
        assert!(in_step(wait, failures as u32), "failure {failures}: {wait:?}");
        waits.push(wait);
    }
    // The store is back after the last wait: the worker polls at its interval again, and says nothing.
    tokio::time::sleep(waits[FAILURES - 1] + Duration::from_secs(5)).await;
    assert!(worker.try_next().is_none(), "no event once the store answers");
    let attempts = queue.claims_at();
    let gaps: Vec<Duration> = attempts.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert_eq!(gaps[..FAILURES], waits[..], "each try came after the wait it announced");
    assert!(gaps.len() > FAILURES + 3, "{gaps:?}");
    assert!(gaps[FAILURES..].iter().all(|gap| *gap == poll), "{gaps:?}");
    let total: Duration = waits.iter().sum();
    assert!(
        total >= Duration::from_millis(38_300),
        "9 doublings from 100 ms, capped at 30 s: {total:?}"
    );

    // A new failure waits the first step again.
    queue.failing.store(1, Ordering::SeqCst);
    let wait = announced(&worker.next().await, "claim");
    assert!(in_step(wait, 1), "after a success: {wait:?}");

    let stats = worker.stop().await;
    assert_eq!(stats.claimed, 0);
}

#[tokio::test(start_paused = true)]
async fn failed_renewals_back_off_too_and_keep_the_session() {
    const FAILURES: usize = 3;
    let queue = Arc::new(Switched::new(Arc::new(
        SqliteStore::open_in_memory().expect("in-memory store"),
    )));
    queue.submit(&UserMessage::new("go"), 0).await.expect("submit");
    let mut config = WorkerConfig::new("w");
    // Full with one session: the worker does not claim, so every store failure is a renewal's.
    config.concurrency = 1;
    let renew_every = config.lease / 3;
    let mut worker = Observed::start(
        Worker::new(queue.clone(), Arc::new(Setup(Arc::new(Silent::default()))), config).expect("config"),
    );
    assert!(matches!(worker.next().await, WorkerEvent::Claimed { .. }));
    queue.failing.store(FAILURES, Ordering::SeqCst);
    let first = tokio::time::Instant::now();
    let mut waits = Vec::new();
    for failures in 1..=FAILURES {
        let wait = announced(&worker.next().await, "renew");
        assert!(in_step(wait, failures as u32), "failure {failures}: {wait:?}");
        waits.push(wait);
    }
    // The first failure came at the renewal's own time; the tries after it at the waits announced.
    assert!(first.elapsed() >= renew_every + waits[..FAILURES - 1].iter().sum::<Duration>());
    // Renewed at last, well within the lease: the session was never lost.
    tokio::time::sleep(renew_every * 4).await;
    assert!(worker.try_next().is_none(), "nothing more: renewals succeed");
    let stats = worker.stop().await;
    assert_eq!((stats.claimed, stats.lost, stats.released), (1, 0, 1));
}
