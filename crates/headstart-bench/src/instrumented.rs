//! A write layer that counts a store's writes and lets a benchmark wait until no write is in flight.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headstart::store::{Layered, TranscriptStore, Write, WriteFuture, WriteLayer, Written};
use tokio::sync::Notify;

/// A store with [`Instrumentation`] around its writes.
pub type InstrumentedStore = Layered<Instrumentation>;

/// Wraps `inner` in [`Instrumentation`].
pub fn instrumented(inner: Arc<dyn TranscriptStore>) -> InstrumentedStore {
    Layered::new(inner, Instrumentation::default())
}

/// Counts durable writes (every write method is one transaction) and tracks the writes in flight, so a benchmark
/// can measure one admission at a time without the engine's background writes (the `started` mark, tool results)
/// queueing in front of it.
#[derive(Debug, Default)]
pub struct Instrumentation {
    writes: AtomicU64,
    in_flight: AtomicUsize,
    idle: Notify,
    fragment_commits: Mutex<Vec<Duration>>,
}

/// Decrements the in-flight count when a write ends (or its future is dropped).
struct InFlight<'a>(&'a Instrumentation);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Instrumentation {
    /// Durable writes completed successfully so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// How long each successful `commit_fragment` took, as its caller awaited it (hand-off to the blocking pool,
    /// the transaction and the way back), since the last call; clears the list.
    pub fn take_fragment_commit_times(&self) -> Vec<Duration> {
        self.fragment_commits
            .lock()
            .map(|mut times| std::mem::take(&mut *times))
            .unwrap_or_default()
    }

    /// Waits until no write is in flight. Yields first, so that tasks the engine has just spawned (its `started`
    /// marks) get to issue their writes before the check.
    pub async fn wait_idle(&self) {
        loop {
            tokio::task::yield_now().await;
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                continue;
            }
            notified.await;
        }
    }
}

impl WriteLayer for Instrumentation {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight(self);
        Box::pin(async move {
            let _guard = guard;
            let started = Instant::now();
            let written = next.await;
            if written.is_ok() {
                self.writes.fetch_add(1, Ordering::SeqCst);
                if matches!(write, Write::CommitFragment { .. }) {
                    if let Ok(mut times) = self.fragment_commits.lock() {
                        times.push(started.elapsed());
                    }
                }
            }
            written
        })
    }
}
