//! What an application gives a worker beside its [`SessionSetup`](headstart::SessionSetup): the worker's settings.

use std::time::Duration;

use headstart::store::{Backoff, QueueName};
use headstart::RecoveryPolicy;

use crate::breaker::BreakerConfig;

/// A worker's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The worker's name in the queue (the owner of its leases). Unique within the fleet, by convention: the
    /// epoch fences even two workers that share a name.
    pub id: String,
    /// The most sessions it runs at once (default 8).
    pub concurrency: usize,
    /// How long a claim or renewal holds a session (default 10 s). Renewed every third of it.
    pub lease: Duration,
    /// How often it looks for work when it has room (default 250 ms). With a queue that sends wake-ups
    /// ([`SessionQueue::wake_ups`](headstart::store::SessionQueue::wake_ups)) it claims at once when woken, and the
    /// poll is the fallback for a missed wake-up, so it may be seconds; but it is still how a worker finds a
    /// session whose owner's lease expired (nothing announces an expiry): a takeover waits up to one interval.
    pub poll_interval: Duration,
    /// What recovery does with the unfinished calls of a session it takes over (default: re-execute calls of
    /// idempotent tools, fail the others as interrupted).
    pub recovery: RecoveryPolicy,
    /// How long it waits before trying its store again after a failed claim or renewal (default: 100 ms, doubled
    /// after each failure in a row, up to 30 s).
    pub retry: Backoff,
    /// The queues it claims from (default: the default queue alone). Never empty.
    pub queues: Vec<QueueName>,
    /// How many times a session may stop because its model's provider is down before it fails (default 5): each
    /// time before that, the worker releases it to its queue with a backoff ([`session_backoff`](Self::session_backoff))
    /// instead of failing it. At least 1 (1: the first outage fails it, as a session's own failure does).
    pub max_attempts: u32,
    /// How long a session released for a provider outage waits before any worker claims it again: 2 s after its
    /// first outage, doubled after each further one, up to 60 s (the default).
    pub session_backoff: Backoff,
    /// When the worker stops claiming because its provider is down (default: after 3 sessions in a row, for 5 s
    /// doubling up to 5 min).
    pub breaker: BreakerConfig,
}

impl WorkerConfig {
    /// The defaults, for worker `id`.
    pub fn new(id: impl Into<String>) -> Self {
        WorkerConfig {
            id: id.into(),
            concurrency: 8,
            lease: Duration::from_secs(10),
            poll_interval: Duration::from_millis(250),
            recovery: RecoveryPolicy::ReExecuteIdempotent,
            retry: Backoff::default(),
            queues: vec![QueueName::default()],
            max_attempts: 5,
            session_backoff: Backoff {
                first: Duration::from_secs(2),
                max: Duration::from_secs(60),
            },
            breaker: BreakerConfig::default(),
        }
    }
}

/// A worker configuration that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// Concurrency 0: the worker could never claim anything.
    #[error("a worker's concurrency must be at least 1")]
    NoConcurrency,
    /// A lease too short to renew (under 3 ms, a third of it would round to nothing).
    #[error("a worker's lease must be at least 3 ms (it is renewed every third of it), not {0:?}")]
    LeaseTooShort(Duration),
    /// An empty worker id.
    #[error("a worker's id must not be empty")]
    NoId,
    /// No queue to claim from.
    #[error("a worker needs at least one queue to claim from")]
    NoQueues,
    /// `max_attempts` 0: a session could never be tried.
    #[error("a worker's max attempts must be at least 1")]
    NoAttempts,
}
