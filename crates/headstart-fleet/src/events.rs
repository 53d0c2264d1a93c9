//! What a worker reports: each event as it happens ([`WorkerEvent`]), and its totals ([`WorkerStats`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use headstart::store::SessionEnd;
use headstart::SessionId;

use crate::metrics;

/// What a worker did, as it happens (for logs; see [`Worker::observe`](crate::Worker::observe)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEvent {
    /// A session was claimed; `previous_owner` is set when it was taken over from a worker whose lease expired.
    Claimed {
        /// The session.
        session: SessionId,
        /// The claim's epoch.
        epoch: u64,
        /// The worker that held it before.
        previous_owner: Option<String>,
    },
    /// Recovery gave `calls` unfinished calls of a taken-over session their result before it continued.
    Recovered {
        /// The session.
        session: SessionId,
        /// How many calls.
        calls: usize,
    },
    /// The worker finished the session as `end` says.
    Finished {
        /// The session.
        session: SessionId,
        /// How.
        end: SessionEnd,
    },
    /// The worker lost the session (another worker holds it now, or it ended elsewhere) and stopped it.
    Lost {
        /// The session.
        session: SessionId,
        /// How the loss showed.
        reason: String,
    },
    /// A write of the session was fenced (contract §7.5.2): nothing was written.
    FencedWrite {
        /// The session.
        session: SessionId,
    },
    /// A claim or a renewal failed: the store is down, unreachable, or refused it. The worker neither claims nor
    /// renews before `retry_in` has passed, a wait that doubles with each failure in a row
    /// ([`WorkerConfig::retry`](crate::WorkerConfig::retry))
    /// and starts over after a success: one event per wait, however long the store stays away.
    StoreUnreachable {
        /// What failed, and why.
        message: String,
        /// How long the worker waits before it tries the store again.
        retry_in: Duration,
    },
    /// Finishing a session in the queue failed (its lease lapses and a worker claims it again).
    QueueError {
        /// What failed.
        message: String,
    },
    /// The queue's wake-ups stopped (PostgreSQL: the listening connection was lost, or could not be opened): the
    /// worker finds new sessions by polling alone, up to one poll interval late, until
    /// [`WakeUpsRestored`](Self::WakeUpsRestored). Reported once per outage.
    WakeUpsLost {
        /// Why.
        message: String,
    },
    /// The queue's wake-ups work again after [`WakeUpsLost`](Self::WakeUpsLost); the worker looked for work at once,
    /// for what it missed meanwhile.
    WakeUpsRestored,
    /// The session stopped because its model's provider is down (not the session's fault): the worker released it
    /// to its queue, where no worker claims it before `after`.
    Retrying {
        /// The session.
        session: SessionId,
        /// The attempt that just failed (from 1).
        attempt: u32,
        /// The attempts allowed ([`WorkerConfig::max_attempts`](crate::WorkerConfig::max_attempts)).
        max_attempts: u32,
        /// The backoff before the next claim.
        after: Duration,
        /// The provider's error.
        reason: String,
    },
    /// `failures` sessions in a row stopped on a provider outage (or a probe did): the worker stops claiming for
    /// `cool_down`, then probes with one claim ([`WorkerConfig::breaker`](crate::WorkerConfig::breaker)).
    BreakerOpened {
        /// Provider failures in a row.
        failures: u32,
        /// How long it claims nothing.
        cool_down: Duration,
    },
    /// A model request succeeded after [`BreakerOpened`](Self::BreakerOpened): the worker claims as usual again.
    BreakerClosed,
}

impl std::fmt::Display for WorkerEvent {
    /// One line, as `headstart worker` logs it: the event's name, then the session (or what failed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerEvent::Claimed {
                session,
                epoch,
                previous_owner: Some(previous),
            } => write!(f, "claimed {session} epoch {epoch} from {previous}"),
            WorkerEvent::Claimed { session, epoch, .. } => write!(f, "claimed {session} epoch {epoch}"),
            WorkerEvent::Recovered { session, calls } => write!(f, "recovered {session} {calls} call(s)"),
            WorkerEvent::Finished { session, end } => match end {
                SessionEnd::Completed => write!(f, "finished {session} completed"),
                SessionEnd::Failed(reason) => write!(f, "finished {session} failed: {reason}"),
                SessionEnd::Released => write!(f, "finished {session} released"),
                SessionEnd::Retry { reason, .. } => write!(f, "finished {session} released for a retry: {reason}"),
            },
            WorkerEvent::Lost { session, reason } => write!(f, "lost {session}: {reason}"),
            WorkerEvent::FencedWrite { session } => write!(f, "fenced-write {session}"),
            WorkerEvent::StoreUnreachable { message, retry_in } => write!(
                f,
                "store-unreachable cannot reach the store: {message}; retrying in {:.1} s",
                retry_in.as_secs_f64()
            ),
            WorkerEvent::QueueError { message } => write!(f, "queue-error {message}"),
            WorkerEvent::WakeUpsLost { message } => {
                write!(f, "wake-ups-lost {message}; polling until the listener is back")
            }
            WorkerEvent::WakeUpsRestored => write!(f, "wake-ups-restored"),
            WorkerEvent::Retrying {
                session,
                attempt,
                max_attempts,
                after,
                reason,
            } => write!(
                f,
                "retrying {session} after attempt {attempt} of {max_attempts}, in {:.1} s: the provider failed: {reason}",
                after.as_secs_f64()
            ),
            WorkerEvent::BreakerOpened { failures, cool_down } => write!(
                f,
                "breaker-open {failures} session(s) in a row stopped on the provider; claiming nothing for {:.1} s, \
                 then one probe",
                cool_down.as_secs_f64()
            ),
            WorkerEvent::BreakerClosed => write!(f, "breaker-closed the provider answered; claiming again"),
        }
    }
}

/// What a worker did over its run ([`Worker::run`](crate::Worker::run), [`Worker::stats`](crate::Worker::stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Sessions claimed.
    pub claimed: u64,
    /// Of which taken over from another worker.
    pub taken_over: u64,
    /// Unfinished calls recovery settled before sessions continued.
    pub recovered_calls: u64,
    /// Sessions finished as completed.
    pub completed: u64,
    /// Sessions finished as failed.
    pub failed: u64,
    /// Sessions released back to the queue (shutdown).
    pub released: u64,
    /// Sessions lost to another worker.
    pub lost: u64,
    /// Writes the store fenced.
    pub fenced_writes: u64,
    /// Sessions released for a retry because their model's provider was down.
    pub retried: u64,
    /// Times the worker stopped claiming because its provider was down.
    pub breaker_opened: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    claimed: AtomicU64,
    taken_over: AtomicU64,
    recovered_calls: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    fenced_writes: AtomicU64,
    retried: AtomicU64,
    breaker_opened: AtomicU64,
}

/// Each count goes to the worker's totals and to its metric ([`crate::metrics`]), so the two always agree.
impl Counters {
    pub(crate) fn count_claim(&self, taken_over: bool, queue: &str) {
        self.claimed.fetch_add(1, Ordering::Relaxed);
        if taken_over {
            self.taken_over.fetch_add(1, Ordering::Relaxed);
        }
        metrics::claimed(taken_over, queue);
    }

    pub(crate) fn count_recovered(&self, calls: u64) {
        self.recovered_calls.fetch_add(calls, Ordering::Relaxed);
        metrics::recovered(calls);
    }

    pub(crate) fn count_end(&self, end: &SessionEnd, queue: &str) {
        let counter = match end {
            SessionEnd::Completed => &self.completed,
            SessionEnd::Failed(_) => &self.failed,
            SessionEnd::Released => &self.released,
            SessionEnd::Retry { .. } => &self.retried,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        metrics::finished(end, queue);
    }

    pub(crate) fn count_breaker_opened(&self) {
        self.breaker_opened.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_lost(&self) {
        self.lost.fetch_add(1, Ordering::Relaxed);
        metrics::lost();
    }

    pub(crate) fn count_fenced_write(&self) {
        self.fenced_writes.fetch_add(1, Ordering::Relaxed);
        metrics::fenced_write();
    }

    pub(crate) fn snapshot(&self) -> WorkerStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WorkerStats {
            claimed: get(&self.claimed),
            taken_over: get(&self.taken_over),
            recovered_calls: get(&self.recovered_calls),
            completed: get(&self.completed),
            failed: get(&self.failed),
            released: get(&self.released),
            lost: get(&self.lost),
            fenced_writes: get(&self.fenced_writes),
            retried: get(&self.retried),
            breaker_opened: get(&self.breaker_opened),
        }
    }
}
